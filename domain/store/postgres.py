"""eventsourcing's PostgreSQL application recorder, with tasktrail's read guards.

Kept apart so that only a PostgreSQL store imports the driver.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import psycopg
from eventsourcing.persistence import InterfaceError, OperationalError, StoredEvent
from eventsourcing.postgres import PostgresApplicationRecorder, PostgresDatastore
from eventsourcing.utils import retry
from psycopg.pq import TransactionStatus
from psycopg.rows import tuple_row
from psycopg.sql import SQL, Composed, Identifier, Literal

from .creation import lock_creation
from .direct import direct_connection
from .guards import APPENDED_SINCE, STAMPED_LATER, guard_sql
from .location import checked_schema

AT_PATTERN = r'"at":(-?[0-9]+(\.[0-9]+)?([eE][-+]?[0-9]+)?)'
"""An event's decision time in its stored JSON: the first ``"at"`` key is the event's own
(orjson writes it first, after a non-task stream's ``task_id``, a string)."""

STORED_AT_SQL = f"substring(encode(state, 'escape') from '{AT_PATTERN}')::float8"
"""A row's ``at``, read from its stored JSON (``NULL`` where none is readable)."""


PREFETCH_LIMIT = 1_000
"""At most this many rows of other writers come back with an append; more are read."""


def depended_later_guard_sql(table: str) -> str:
    """The time guard as one statement: cast the guard's message to an integer (an error
    that names it and the later time) when an event the append depended on (parameters:
    their streams and versions) is stamped later than the append's earliest time.
    A row whose state holds no readable ``at`` is verify's to report, not this append's."""
    return (
        f"SELECT CAST(CASE WHEN max(at) > %s THEN %s || ' (at ' || max(at) || ')' ELSE '0' END "
        f"AS integer) FROM (SELECT {STORED_AT_SQL} AS at FROM {table} t "
        "JOIN unnest(%s::text[], %s::bigint[]) AS d(id, v) "
        "ON t.originator_id = d.id AND t.originator_version = d.v) depended"
    )


def unseen_guard_sql(table: str) -> str:
    """The unseen guard as one statement, run under the lock before the INSERT (so every
    row past the decision's position is another's): cast its message to an integer
    (an error that names it) when an event of the counted topics is there."""
    return (
        f"SELECT CAST(CASE WHEN EXISTS (SELECT 1 FROM {table} WHERE notification_id > %s "
        f"AND topic = ANY(%s)) THEN %s ELSE '0' END AS integer)"
    )


class GuardedPostgresRecorder(PostgresApplicationRecorder):
    """Appends in one round trip to the server and one statement: a function
    (:meth:`append_function_sql`, created with the table) takes eventsourcing's
    EXCLUSIVE table lock, notifies (when asked: :attr:`notify`), runs the time guard
    (against the events the decision depended on, :func:`.guards.depended_on`), inserts
    and runs a decision's read guards, in the statement's own transaction. A store whose
    function is missing (its tables made by an earlier release and opened without
    creating any) appends through one pipeline of the same statements instead: one
    round trip too, but seven statements' work in the driver (about 0.4 ms of client CPU an append,
    against 0.1). An append with an unseen guard (a decision that counted events of
    every stream: a scheduled run's daily cap, a rare command) goes that way too."""

    prefetched: list[tuple[int, str, int, str, bytes]] | None = None
    """The rows other writers appended between the ``since`` position an append was
    given and its own first position, as ``select_rows`` returns them (``None``: not
    known)."""
    notify = False
    """Whether an append NOTIFYs the table's channel: on unless the URL says
    ``?notify=off`` (:mod:`.location`), for the store's news (:mod:`.news`). A NOTIFY
    takes the server's one notify lock through the commit, so it serializes the appends
    of every store on the server (docs/scaling.md): off trades the news for that."""

    def __init__(self, datastore: PostgresDatastore, *, events_table_name: str = "stored_events"):
        self.writer_pids: set[int] = set()
        """The server processes of the connections this recorder appended on: their
        NOTIFYs are this store's own news, which its append told already (:mod:`.news`)."""
        # Before the first statement: every statement quotes it too (Identifier).
        checked_schema(datastore.schema, "a PostgreSQL store")
        super().__init__(datastore, events_table_name=events_table_name)
        # Versioned: a store made by an earlier release gains this one's function once.
        self.append_function = f"{events_table_name}_tasktrail_append2"
        self.check_identifier_length(self.append_function)
        self.sql_create_statements.append(self.append_function_sql())
        arguments = SQL(", ").join([SQL("%s")] * 8)
        # Composed once: psycopg would compose a Composed query again at every execute
        # (about a tenth of an append's client CPU). The names are plain (checked).
        self._call_append = (
            SQL("SELECT * FROM {schema}.{function}({arguments})")
            .format(
                arguments=arguments,
                schema=Identifier(self.datastore.schema),
                function=Identifier(self.append_function),
            )
            .as_bytes(None)
        )
        self._has_function = True

    def create_table(self) -> None:
        """Create the table, its index, type and functions, unless all are there: then
        no DDL at all (one catalog query). Creation runs in one transaction under an
        advisory lock, so concurrent opens of a fresh schema queue instead of racing in
        the catalog ("tuple concurrently updated"); each checks again once it holds it."""
        if not self._missing():
            self.datastore.register_type_adapters()
            return
        with self.datastore.transaction(commit=True) as curs:
            lock_creation(curs, self.datastore.schema)
            if self._missing(curs):
                for statement in self.sql_create_statements:
                    if "CREATE TYPE" in statement.as_string() and self._type_exists(curs):
                        continue  # no IF NOT EXISTS for a type
                    curs.execute(statement, prepare=False)
        self.datastore.register_type_adapters()

    def _missing(self, curs: Any = None) -> bool:
        """Whether any object :meth:`create_table` makes is missing."""
        schema = self.datastore.schema
        query = (
            "SELECT to_regclass(%(table)s) IS NOT NULL AND to_regclass(%(index)s) IS NOT NULL "
            "AND to_regtype(%(type)s) IS NOT NULL AND (SELECT count(DISTINCT proname) "
            "FROM pg_proc WHERE pronamespace = to_regnamespace(%(schema)s) "
            "AND proname IN (%(append)s, %(insert)s)) = 2 AS present"
        )
        quoted = f'"{schema}".'
        params = {
            "table": quoted + f'"{self.events_table_name}"',
            "index": quoted + f'"{self.notification_id_index_name}"',
            "type": quoted + f'"{self.stored_event_type_name}"',
            "schema": f'"{schema}"',
            "append": self.append_function,
            "insert": self.pg_function_name_insert_events,
        }
        if curs is not None:
            curs.execute(query, params)
            return not curs.fetchone()["present"]
        with self.datastore.transaction(commit=False) as own:
            own.execute(query, params)
            found: Any = own.fetchone()
            return not found["present"]

    def _type_exists(self, curs: Any) -> bool:
        name = f'"{self.datastore.schema}"."{self.stored_event_type_name}"'
        curs.execute("SELECT to_regtype(%s) IS NOT NULL AS present", (name,))
        return bool(curs.fetchone()["present"])

    def append_function_sql(self) -> Composed:
        """``CREATE OR REPLACE FUNCTION``: an append as one statement (see the class)."""
        schema = Identifier(self.datastore.schema)
        table = Identifier(self.events_table_name)
        columns = SQL("originator_id, originator_version, topic, state")
        return SQL(
            "CREATE OR REPLACE FUNCTION {schema}.{function}("
            "events {schema}.{event}[], earliest float8, "
            "guard_ids {id_type}[], guard_versions bigint[], "
            "depended_ids {id_type}[], depended_versions bigint[], notify boolean, "
            "since bigint) RETURNS TABLE(r_position bigint, r_id {id_type}, "
            "r_version bigint, r_topic text, r_state bytea) LANGUAGE plpgsql AS $BODY$ "
            "DECLARE later float8; "
            "BEGIN "
            "SET LOCAL lock_timeout = {lock_timeout}; "
            "LOCK TABLE {schema}.{table} IN EXCLUSIVE MODE; "
            "IF notify THEN NOTIFY {channel}; END IF; "
            # The time guard (guards.later_stamp): the events the decision depended on.
            "IF earliest IS NOT NULL THEN "
            "SELECT max({stored_at}) INTO later FROM {schema}.{table} t "
            "JOIN unnest(depended_ids, depended_versions) AS d(id, v) "
            "ON t.originator_id = d.id AND t.originator_version = d.v; "
            "IF later > earliest THEN "
            "RAISE EXCEPTION '% (at %)', {stamped_later}, later; END IF; "
            "END IF; "
            # Under the lock: every row past the writer's position is committed; they
            # come back first, so that it folds them without reading (PREFETCH_LIMIT).
            "IF since IS NOT NULL THEN RETURN QUERY SELECT t.notification_id, "
            "t.originator_id, t.originator_version, t.topic, t.state FROM {schema}.{table} t "
            "WHERE t.notification_id > since ORDER BY t.notification_id LIMIT {limit}; "
            "END IF; "
            "RETURN QUERY INSERT INTO {schema}.{table} AS t ({columns}) "
            "SELECT {columns} FROM unnest(events) RETURNING t.notification_id, "
            "NULL::{id_type}, NULL::bigint, NULL::text, NULL::bytea; "
            # The read guards (guards.guard_sql): a moved stream breaks the key.
            "INSERT INTO {schema}.{table} ({columns}) SELECT {t_columns} "
            "FROM {schema}.{table} t JOIN unnest(guard_ids, guard_versions) AS g(id, v) "
            "ON t.originator_id = g.id AND t.originator_version = g.v; "
            "END; $BODY$"
        ).format(
            schema=schema,
            function=Identifier(self.append_function),
            event=Identifier(self.stored_event_type_name),
            id_type=Identifier(self.datastore.originator_id_type),
            lock_timeout=Literal(f"{self.datastore.lock_timeout}s"),
            table=table,
            channel=Identifier(self.channel_name),
            stored_at=SQL(STORED_AT_SQL),
            stamped_later=Literal(STAMPED_LATER),
            columns=columns,
            t_columns=SQL("t.originator_id, t.originator_version, t.topic, t.state"),
            limit=Literal(PREFETCH_LIMIT),
        )

    @retry((InterfaceError, OperationalError), max_attempts=10, wait=0.2)
    def insert_events(
        self, stored_events: Sequence[StoredEvent], **kwargs: Any
    ) -> Sequence[int] | None:
        if not stored_events:
            return []
        rows = [
            self.construct_pg_stored_event(e.originator_id, e.originator_version, e.topic, e.state)
            for e in stored_events
        ]
        earliest = kwargs.get("earliest_at")
        guards = kwargs.get("guards") or {}
        unseen = kwargs.get("unseen")
        depended: list[tuple[str, int]] = kwargs.get("depended") or []
        if self._has_function and unseen is None:
            with self.datastore.get_connection() as conn, conn.cursor() as curs:
                self.writer_pids.add(conn.info.backend_pid)  # before its NOTIFY is heard
                try:
                    curs.execute(
                        self._call_append,
                        (
                            rows,
                            earliest,
                            list(guards),
                            [v + 1 for v in guards.values()],
                            [stream for stream, _ in depended],
                            [version for _, version in depended],
                            self.notify,
                            kwargs.get("since"),
                        ),
                        prepare=True,
                    )
                    return self._positions(curs.fetchall())
                except psycopg.errors.UndefinedFunction:
                    self._has_function = False  # an earlier release's tables, not created here
        self.prefetched = None
        return self._insert_in_pipeline(rows, earliest, guards, depended, unseen)

    def _positions(self, returned: list[Any]) -> list[int]:
        """The append's positions; the rows before them (other writers' since the
        writer's position, complete when fewer than :data:`PREFETCH_LIMIT`) are kept in
        :attr:`prefetched` for the writer to fold without reading them."""
        others = [
            (r["r_position"], r["r_id"], r["r_version"], r["r_topic"], bytes(r["r_state"]))
            for r in returned
            if r["r_id"] is not None
        ]
        self.prefetched = others if len(others) < PREFETCH_LIMIT else None
        return [r["r_position"] for r in returned if r["r_id"] is None]

    def _insert_in_pipeline(
        self,
        rows: list[Any],
        earliest: float | None,
        guards: dict[str, int],
        depended: list[tuple[str, int]],
        unseen: tuple[int, list[str]] | None = None,
    ) -> list[int]:
        table = self._table
        with self.datastore.get_connection() as conn:
            self.writer_pids.add(conn.info.backend_pid)  # before its NOTIFY is heard
            try:
                with conn.cursor() as curs, conn.cursor() as inserted:
                    with conn.pipeline():
                        curs.execute("BEGIN")
                        for statement in self.lock_table_statements:
                            curs.execute(statement, prepare=True)
                        if self.notify:
                            self._notify_channel(curs)
                        if earliest is not None and depended:
                            # The time guard (guards.later_stamp); it fails the transaction.
                            guard = depended_later_guard_sql(table)
                            ids = [stream for stream, _ in depended]
                            versions = [version for _, version in depended]
                            params = (earliest, STAMPED_LATER, ids, versions)
                            curs.execute(guard, params, prepare=True)
                        if unseen is not None:
                            since, topics = unseen
                            guard = unseen_guard_sql(table)
                            curs.execute(guard, (since, list(topics), APPENDED_SINCE), prepare=True)
                        inserted.execute(self.insert_events_statement, (rows,), prepare=True)
                        statement = guard_sql(table, "%s")
                        for stream, version in guards.items():
                            curs.execute(statement, (stream, version + 1), prepare=True)
                        curs.execute("COMMIT")
                    return [row["notification_id"] for row in inserted.fetchall()]
            except psycopg.Error:
                # A key or a guard broken: the transaction failed; end it before the
                # connection goes back to the pool.
                if conn.info.transaction_status != TransactionStatus.IDLE:
                    conn.execute("ROLLBACK")  # the pool's connections are in autocommit
                raise

    @property
    def _table(self) -> str:
        table = f'"{self.events_table_name}"'
        if self.datastore.schema:
            table = f'"{self.datastore.schema}".{table}'
        return table

    @retry((InterfaceError, OperationalError), max_attempts=10, wait=0.2)
    def select_rows(
        self, start: int, limit: int, stop: int | None = None
    ) -> list[tuple[int, str, int, str, bytes]]:
        """The log's rows from position ``start`` (to ``stop``), at most ``limit``:
        ``(position, originator_id, originator_version, topic, state)``. The SELECT of
        eventsourcing's ``select_notifications``, without its statement composed anew
        and a ``Notification`` made per row (a command's refresh is one of these)."""
        until = "" if stop is None else "AND notification_id <= %s "
        params = (start, limit) if stop is None else (start, stop, limit)
        with self.datastore.get_connection() as conn, conn.cursor(row_factory=tuple_row) as curs:
            curs.execute(
                "SELECT notification_id, originator_id, originator_version, topic, state "
                f"FROM {self._table} WHERE notification_id >= %s {until}"
                "ORDER BY notification_id LIMIT %s",
                params,
                prepare=True,
            )
            return [(r[0], r[1], r[2], r[3], bytes(r[4])) for r in curs.fetchall()]

    def select_stream_rows(
        self, stream_id: str, after: int = 0
    ) -> list[tuple[int, int, str, bytes]]:
        """One stream's rows after version ``after``, by version: ``(position, version,
        topic, state)``."""
        # One statement in autocommit: one round trip (no BEGIN, no ROLLBACK).
        with self.datastore.get_connection() as conn, conn.cursor() as curs:
            curs.execute(
                f"SELECT notification_id, originator_version, topic, state FROM {self._table} "
                "WHERE originator_id = %s AND originator_version > %s ORDER BY originator_version",
                (stream_id, after),
                prepare=True,
            )
            return [
                (r["notification_id"], r["originator_version"], r["topic"], bytes(r["state"]))
                for r in curs.fetchall()
            ]


def connection_problem(env: dict[str, str]) -> str | None:
    """Why PostgreSQL refuses a connection, in the server's or the network's words (the
    connection pool only says it timed out): one direct attempt, same settings."""
    try:
        with direct_connection(env, autocommit=False) as connection:
            connection.execute("SELECT 1")
    except Exception as error:  # psycopg's errors, DNS, sockets: the cause, in its words
        lines = [line.strip() for line in str(error).splitlines() if line.strip()]
        return "; ".join(lines[:2]) or type(error).__name__
    return None
