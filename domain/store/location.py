"""Where a store is: a SQLite file path or a ``postgresql://`` URL, parsed into the
eventsourcing settings that open it. :func:`parse_location` checks the text and
builds a :class:`StoreLocation` (its kind, a target safe to show with any password
redacted, and the environment the recorders read, naming tasktrail's guarded
PostgreSQL recorder by topic so that only a PostgreSQL store imports the driver).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Literal
from urllib.parse import parse_qs, unquote, urlsplit

from ..errors import StoreError


@dataclass(frozen=True)
class StoreLocation:
    """Where a store is: ``kind`` ``sqlite`` (with a file path) or ``postgresql``."""

    kind: Literal["sqlite", "postgresql"]
    target: str
    env: dict[str, str]

    def __str__(self) -> str:
        return self.target


def parse_location(location: str | os.PathLike[str]) -> StoreLocation:
    """Turn a path or a ``postgresql://`` URL into the settings of a store."""
    text = os.fspath(location) if isinstance(location, str | os.PathLike) else None
    if not isinstance(text, str) or not text.strip():
        raise StoreError("a store location must be a file path or a postgresql:// URL")
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
            env["POSTGRES_SCHEMA"] = query["schema"][0]
        return StoreLocation("postgresql", _redact(text), env)
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
    return StoreLocation("sqlite", str(path), env)


def _redact(url: str) -> str:
    parts = urlsplit(url)
    if parts.password:
        netloc = parts.netloc.replace(f":{parts.password}@", ":***@")
        return parts._replace(netloc=netloc).geturl()
    return url
