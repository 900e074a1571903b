"""Where a store is: a SQLite file path, a SQLite ``file:`` URI or a ``postgresql://``
URL, parsed into the eventsourcing settings that open it. :func:`parse_location`
checks the text and builds a :class:`StoreLocation` (its kind, a target safe to show
with any password redacted, the SQLite file's path, whether the location asks for
reading only, and the environment the recorders read, naming tasktrail's guarded
PostgreSQL recorder by topic so that only a PostgreSQL store imports the driver).
:func:`read_only_location` turns a location into one that reads without creating or
writing anything (see :mod:`.files` for how a SQLite file is opened that way).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Literal
from urllib.parse import parse_qs, quote, unquote, urlsplit

from ..errors import StoreError
from .files import read_only_mode


@dataclass(frozen=True)
class StoreLocation:
    """Where a store is: ``kind`` ``sqlite`` (with a file path) or ``postgresql``."""

    kind: Literal["sqlite", "postgresql"]
    target: str
    env: dict[str, str]
    path: str | None = None
    """The SQLite file (``None`` for PostgreSQL)."""
    read_only: bool = False
    """Opened to read only: no table is created, nothing is written."""

    def __str__(self) -> str:
        return self.target


SCHEMA_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,62}")
"""The PostgreSQL schema names a store accepts: a letter or ``_``, then letters, digits
and ``_``, 63 characters at most (the server's limit). Every statement quotes the name
as well; a name outside the pattern is refused before anything runs."""
DEFAULT_POOL_SIZE = 1
"""Server connections a PostgreSQL store keeps: one; a worker's liveness lock holds a
second of its own (docs/scaling.md, "Connections")."""
MAX_POOL_SIZE = 100
NOTIFY_KEY = "TASKTRAIL_POSTGRES_NOTIFY"
"""Whether appends NOTIFY (``?notify=on``; the recorder's ``notify``), in a location's env."""
SWITCHES = {"on": "on", "true": "on", "1": "on", "yes": "on"} | {
    "off": "",
    "false": "",
    "0": "",
    "no": "",
}


def parse_location(
    location: str | os.PathLike[str], *, pool_size: int | None = None
) -> StoreLocation:
    """Turn a path or a ``postgresql://`` URL into the settings of a store.

    A PostgreSQL store keeps ``pool_size`` server connections (default
    :data:`DEFAULT_POOL_SIZE`; ``?pool_size=N`` in the URL, which the argument
    overrides); a SQLite store ignores it. Its appends NOTIFY (``?notify=off`` stops
    it), which waiters of results and idle workers LISTEN for (:mod:`.news`)."""
    text = os.fspath(location) if isinstance(location, str | os.PathLike) else None
    if not isinstance(text, str) or not text.strip():
        raise StoreError("a store location must be a file path or a postgresql:// URL")
    _refuse_nul(text)
    if text.startswith(("postgresql://", "postgres://")):
        try:
            parts = urlsplit(text)
        except ValueError as error:  # the text is not shown: it may hold a password
            raise StoreError(f"a postgresql:// URL that cannot be parsed: {error}") from None
        dbname = unquote(parts.path.lstrip("/"))
        if not dbname or "/" in dbname:
            raise StoreError(
                f"{_redact(text)}: the URL must name one database, as postgresql://host/dbname"
            )
        try:
            port = parts.port or 5432
        except ValueError:
            raise StoreError(f"{_redact(text)}: the port is not a number") from None
        query = parse_qs(parts.query)
        env = {
            "PERSISTENCE_MODULE": "eventsourcing.postgres",
            "POSTGRES_DBNAME": dbname,
            "POSTGRES_HOST": parts.hostname or "127.0.0.1",
            "POSTGRES_PORT": str(port),
            "POSTGRES_USER": unquote(parts.username or "postgres"),
            "POSTGRES_PASSWORD": unquote(parts.password or ""),
            "POSTGRES_CONNECT_TIMEOUT": query.get("connect_timeout", ["5"])[0],
            "ORIGINATOR_ID_TYPE": "text",
            # Imported only when a PostgreSQL store is opened.
            "APPLICATION_RECORDER_TOPIC": "tasktrail.domain.store.postgres:GuardedPostgresRecorder",
        }
        if "schema" in query:
            env["POSTGRES_SCHEMA"] = checked_schema(query["schema"][0], _redact(text))
        notify = query.get("notify", ["on"])[-1].lower()  # the news (news.py) listens
        if notify not in SWITCHES:
            raise StoreError(f"{_redact(text)}: notify must be on or off, not {notify!r}")
        env[NOTIFY_KEY] = SWITCHES[notify]
        size = _pool_size(query, pool_size, _redact(text))
        # The pool never grows past its size: the connections are a fleet's budget.
        env.update({"POSTGRES_POOL_SIZE": str(size), "POSTGRES_MAX_OVERFLOW": "0"})
        return StoreLocation("postgresql", _redact(text), env)
    if text.startswith("file:"):
        return _sqlite_uri(text)
    if "://" in text:
        scheme = text.split("://", 1)[0]
        raise StoreError(
            f"unsupported store URL scheme {scheme!r}: use a SQLite file path or postgresql://"
        )
    path = Path(text).expanduser()
    if path.is_dir():
        raise StoreError(f"{path}: is a directory; give a file path for a SQLite store")
    env = {
        "PERSISTENCE_MODULE": "eventsourcing.sqlite",
        "SQLITE_DBNAME": str(path),
        "SQLITE_LOCK_TIMEOUT": "30",
        "ORIGINATOR_ID_TYPE": "text",
    }
    return StoreLocation("sqlite", str(path), env, path=str(path))


def _refuse_nul(text: str) -> None:
    """A NUL byte names no file and no part of a URL (the OS and libpq would stop at it,
    or fail deep inside): refused here, before anything is opened. In a URL or a
    ``file:`` URI a ``%00`` counts too; a plain path is never percent-decoded."""
    url = "://" in text or text.startswith("file:")
    if "\x00" in text or (url and "\x00" in unquote(text)):
        try:
            shown = repr(_redact(text) if "://" in text else text)
        except ValueError:  # a URL that cannot be parsed: not shown, it may hold a password
            shown = "a URL"
        raise StoreError(f"{shown}: a store location cannot hold a NUL byte (\\x00 or %00)")


def checked_schema(name: str, where: str) -> str:
    """``name`` if it is a schema name a store accepts (:data:`SCHEMA_NAME`), else
    :class:`StoreError` naming it, before any statement runs."""
    if not SCHEMA_NAME.fullmatch(name):
        raise StoreError(
            f"{where}: schema {name!r} is not a plain name: use letters, digits and _ "
            "(starting with a letter or _), at most 63 characters"
        )
    return name


def _pool_size(query: dict[str, list[str]], argument: int | None, where: str) -> int:
    """The pool size the argument or the URL's ``pool_size`` asks for (checked)."""
    if argument is None:
        text = query.get("pool_size", [str(DEFAULT_POOL_SIZE)])[-1]
        if not text.strip().isdigit():
            raise StoreError(f"{where}: pool_size must be a whole number, not {text!r}")
        argument = int(text)
    if isinstance(argument, bool) or not isinstance(argument, int):
        raise StoreError(f"pool_size must be a whole number, not {argument!r}")
    if not 1 <= argument <= MAX_POOL_SIZE:
        raise StoreError(f"{where}: pool_size must be from 1 to {MAX_POOL_SIZE}, not {argument}")
    return argument


def _sqlite_uri(text: str) -> StoreLocation:
    """A SQLite ``file:`` URI (``file:trail.db?mode=ro``, ``file:///abs/trail.db?immutable=1``),
    passed to SQLite as it is; ``mode=ro`` or ``immutable=1`` make it a read-only store."""
    parts = urlsplit(text)
    if parts.netloc not in ("", "localhost"):
        raise StoreError(f"{text}: a file: URI names a local file, not host {parts.netloc!r}")
    path = unquote(parts.path)
    if not path:
        raise StoreError(f"{text}: the file: URI names no file")
    query = {key: values[-1] for key, values in parse_qs(parts.query).items()}
    if query.get("mode") == "memory":
        raise StoreError(f"{text}: an in-memory database keeps nothing; give a file")
    if Path(path).is_dir():
        raise StoreError(f"{path}: is a directory; give a file path for a SQLite store")
    read_only = query.get("mode") == "ro" or query.get("immutable") == "1"
    env = {
        "PERSISTENCE_MODULE": "eventsourcing.sqlite",
        "SQLITE_DBNAME": text,
        "SQLITE_LOCK_TIMEOUT": "30",
        "ORIGINATOR_ID_TYPE": "text",
    }
    if read_only:
        env["CREATE_TABLE"] = "false"
    return StoreLocation("sqlite", text, env, path=path, read_only=read_only)


def read_only_location(location: StoreLocation) -> StoreLocation:
    """The same store, opened to read only: no table created, nothing written, and for a
    SQLite file no ``-wal``/``-shm`` left behind (``mode=ro``, or ``immutable=1`` where
    nothing could write the file; :func:`.files.read_only_mode` says which).

    A SQLite file must exist and be a SQLite database, or :class:`StoreError` says
    what it is instead (missing, empty, not a database), without touching it.
    """
    env = {**location.env, "CREATE_TABLE": "false"}
    if location.kind != "sqlite":
        return replace(location, env=env, read_only=True)
    assert location.path is not None
    mode = read_only_mode(location.path)
    if "immutable=1" in location.target.partition("?")[2]:
        uri = location.target  # the user's own promise that nothing writes the file
    else:
        uri = f"file:{quote(os.path.abspath(location.path), safe='/')}?{mode}"
    env["SQLITE_DBNAME"] = uri
    return replace(location, env=env, read_only=True)


def _redact(url: str) -> str:
    parts = urlsplit(url)
    if parts.password:
        netloc = parts.netloc.replace(f":{parts.password}@", ":***@")
        return parts._replace(netloc=netloc).geturl()
    return url
