"""The store's watchers: how a :class:`~.news.News` hears of other writers' appends
(the module :mod:`.news` says what each does and why), one thread a store."""

from __future__ import annotations

import logging
import sqlite3
import threading
from collections.abc import Collection
from typing import Any
from urllib.parse import quote

from .news import FALLBACK_S, IDLE_LOOK_S, RECONNECT_S, SQLITE_LOOK_S, Heard, Watch

log = logging.getLogger("tasktrail.news")


def sqlite_watch(path: str, table: str) -> Watch:
    """A watcher of a SQLite file: ``PRAGMA data_version`` every :data:`SQLITE_LOOK_S`;
    a change is news unless this store's own append made it (the module says how)."""
    head_sql = f"SELECT max(rowid) FROM {table}"

    def foreign(connection: sqlite3.Connection, own_head: int) -> bool:
        try:
            head = connection.execute(head_sql).fetchone()[0]
        except sqlite3.Error:
            return True  # cannot tell: news
        return head is None or head > own_head

    def watch(stopped: threading.Event, heard: Heard) -> None:
        try:
            connection = sqlite3.connect(
                f"file:{quote(path)}?mode=ro", uri=True, check_same_thread=False, timeout=1
            )
        except sqlite3.Error as error:
            log.warning("cannot watch %s for news (%s): waiters poll", path, error)
            return
        try:
            # The baseline, as the first waiter begins: a change after it is news at the
            # first look, even one made before the watcher looked again.
            appends_seen = heard.own()[0]
            seen = _version(connection)
            while True:
                if not heard.wanted.is_set():
                    # Nobody waits: no look until somebody does (a busy worker, every
                    # slot taken, waits for none). The look then compares the version
                    # with the last one seen, so a change meanwhile is news then.
                    heard.wanted.wait(IDLE_LOOK_S)
                    if stopped.is_set():
                        break
                    if not heard.wanted.is_set():
                        continue
                elif stopped.wait(SQLITE_LOOK_S):
                    break
                version = _version(connection)
                if version is None:
                    continue  # busy a moment: the next look
                # An append counted here may have committed after the version was read:
                # its change then shows at the next look with no new append counted, and
                # is news twice (as every own append was before). Never news missed.
                appends, own_head = heard.own()
                changed = seen is not None and version != seen
                if changed and (appends == appends_seen or foreign(connection, own_head)):
                    heard.signal()
                appends_seen, seen = appends, version
        finally:
            connection.close()

    return watch


def _version(connection: sqlite3.Connection) -> int | None:
    try:
        version: int = connection.execute("PRAGMA data_version").fetchone()[0]
    except sqlite3.Error:
        return None
    return version


def postgres_watch(conninfo: dict[str, Any], channel: str, own: Collection[int] = ()) -> Watch:
    """A watcher of a PostgreSQL store: ``LISTEN channel`` on a connection of its own,
    connecting again after :data:`RECONNECT_S` when it is lost. A NOTIFY sent by a
    server process in ``own`` (the store's writers', which grows as they connect) is
    this store's own append, which woke the waiters already: not news again."""

    def watch(stopped: threading.Event, heard: Heard) -> None:
        try:
            listen(stopped, heard)
        finally:
            heard.listening(False)  # however it ends: appends go unheard from here

    def listen(stopped: threading.Event, heard: Heard) -> None:
        import psycopg
        from psycopg import sql

        lost = False  # said once an outage, not at every attempt
        while not stopped.is_set():
            try:
                with psycopg.connect(**conninfo, autocommit=True) as connection:
                    connection.execute(sql.SQL("LISTEN {}").format(sql.Identifier(channel)))
                    lost = False
                    heard.listening(True)
                    heard.signal()  # what was appended while it was not listening
                    while not stopped.is_set():
                        for notify in connection.notifies(timeout=0.2, stop_after=1):
                            if notify.pid not in own:
                                heard.signal()
            except psycopg.Error as error:
                heard.listening(False)  # first: appends may go unheard from here
                if stopped.is_set():
                    return
                if not lost:
                    log.warning(
                        "news listener on %s lost (%s): waiters poll every %.1f s until it "
                        "connects again",
                        channel,
                        error,
                        FALLBACK_S,
                    )
                lost = True
                stopped.wait(RECONNECT_S)

    return watch


def watch_for(location: Any, recorder: Any) -> Watch | None:
    """The watcher of a store's location (a :class:`~.location.StoreLocation`), or
    ``None`` where nothing can watch (an in-memory SQLite database)."""
    env = location.env
    if location.kind == "postgresql":
        if not env.get("TASKTRAIL_POSTGRES_NOTIFY"):
            return None  # ?notify=off: no news to hear; waiters poll
        conninfo = {
            "dbname": env["POSTGRES_DBNAME"],
            "host": env["POSTGRES_HOST"],
            "port": env["POSTGRES_PORT"],
            "user": env["POSTGRES_USER"],
            "password": env.get("POSTGRES_PASSWORD") or None,
            "connect_timeout": env.get("POSTGRES_CONNECT_TIMEOUT", "5"),
        }
        return postgres_watch(conninfo, recorder.channel_name, recorder.writer_pids)
    path = location.path
    if path is None or path == ":memory:":
        return None
    return sqlite_watch(path, recorder.events_table_name)
