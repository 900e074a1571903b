"""A writer's first look at a location before it makes a store there.

``worker --help`` promises a store is created if new, and a writer does create the
log's tables where there are none. Two places need a look first:

- A SQLite file holding another application's tables is not a tasktrail store, and
  one open for writing would add tasktrail's tables to it (and turn it to WAL, which
  rewrites its header): :func:`refuse_foreign_file` refuses it before SQLite opens
  it for writing, reading its schema with ``immutable=1`` (no lock, no ``-wal`` or
  ``-shm``), so the file is left byte for byte as it was.
- A PostgreSQL URL's ``?schema=`` that does not exist: :func:`made_schema`
  creates it for a writer, as the writer then creates the tables in it; a reader
  creates nothing and is told the ``CREATE SCHEMA`` statement
  (:func:`missing_schema_problem`).
"""

from __future__ import annotations

import os
import sqlite3
from typing import Any
from urllib.parse import quote

from ..errors import StoreError
from .direct import direct_connection
from .location import StoreLocation

STORE_TABLES = frozenset(
    {"stored_events", "tasktrail_meta", "tasktrail_leases", "tasktrail_snapshots"}
)
"""The tables a tasktrail store holds (SQLite's own ``sqlite_*`` aside)."""


NO_LOG = "it holds no tasktrail log (no table of events)"


def refuse_foreign_file(path: str | None) -> None:
    """Refuse a SQLite file that holds tables and no tasktrail log: another
    application's database. A file that is not there, empty, not SQLite, or that
    cannot be read this way is left to the open itself to judge (``None``: no file)."""
    if path is None:
        return
    try:
        if os.path.getsize(path) == 0:
            return
        uri = f"file:{quote(os.path.abspath(path), safe='/')}?immutable=1"
        connection = sqlite3.connect(uri, uri=True)
        try:
            rows = connection.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
            tables = {str(row[0]) for row in rows}
        finally:
            connection.close()
    except (OSError, sqlite3.Error, UnicodeError):
        return  # missing, not a database, or changing under us: the open says what
    foreign = sorted(t for t in tables - STORE_TABLES if not t.startswith("sqlite_"))
    if foreign and "stored_events" not in tables:
        shown = ", ".join(foreign[:5]) + (", ..." if len(foreign) > 5 else "")
        raise StoreError(
            f"{path} is a SQLite database of another application (tables: {shown}), not a "
            "tasktrail store: refusing to write to it; give a new file for the store"
        )


def _schema(location: StoreLocation) -> str | None:
    return location.env.get("POSTGRES_SCHEMA") if location.kind == "postgresql" else None


def _connect(location: StoreLocation) -> Any:
    return direct_connection(location.env)


def _create_statement(schema: str) -> str:
    return 'CREATE SCHEMA "{}"'.format(schema.replace('"', '""'))


def made_schema(location: StoreLocation, error: BaseException) -> bool:
    """For a writer whose open failed because its URL's schema does not exist: create
    the schema (``True``: open again; a read-only location: ``False``). Raises
    :class:`StoreError` with the statement to run when this user may not create it."""
    schema, text = _schema(location), str(error)
    if schema is None or location.read_only or not ("schema" in text and "does not exist" in text):
        return False
    from psycopg import sql

    try:
        with _connect(location) as connection:
            connection.execute(
                sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(sql.Identifier(schema))
            )
    except Exception as cause:  # no privilege, the server gone: said, with what to run
        if _schema_exists(location, schema):
            return True  # another writer created it at the same moment
        text = str(cause).strip().splitlines()[0] if str(cause).strip() else repr(cause)
        raise StoreError(
            f"{location}: the schema {schema!r} does not exist and could not be created "
            f"({text}); create it as a user who may: {_create_statement(schema)}"
        ) from None
    return True


def missing_schema_problem(location: StoreLocation) -> str | None:
    """Why a reader found no log: the URL's schema does not exist (``None``: it does,
    or this cannot tell)."""
    schema = _schema(location)
    if schema is None or _schema_exists(location, schema) is not False:
        return None
    return (
        f"the schema {schema!r} does not exist (a writer, such as tasktrail worker, "
        f"creates it; or run {_create_statement(schema)})"
    )


def _schema_exists(location: StoreLocation, schema: str) -> bool | None:
    """Whether the database holds ``schema`` (``None``: the server did not say)."""
    try:
        with _connect(location) as connection:
            found = connection.execute(
                "SELECT 1 FROM pg_namespace WHERE nspname = %s", (schema,)
            ).fetchone()
    except Exception:  # the server's own words come from the caller's path
        return None
    return found is not None


def open_problem(location: StoreLocation, error: BaseException) -> str:
    """Why opening failed: a database without the log (a PostgreSQL schema that is
    missing, with how to make it), or the server's own words."""
    from .application import describe, open_failure

    text = describe(error)
    if "no such table" in text or "does not exist" in text:
        return missing_schema_problem(location) or NO_LOG
    return open_failure(location.kind, location.env, error)
