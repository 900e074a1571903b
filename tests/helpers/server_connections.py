"""A process's connections to the PostgreSQL server, found from outside it, and cut.

The tests that count a scheduler's connections (tests/test_postgres_connections.py)
and those that cut a live worker's connections as a network blip, a server restart or
an idle-session timeout would (tests/test_connection_cuts.py) find them the same way:
the local ports of the process's TCP sockets to port 5432 (from ``/proc``), matched
against ``pg_stat_activity.client_port``.
"""

from __future__ import annotations

import os

import psycopg

POSTGRES_PORT_HEX = ":1538"  # 5432, as /proc/net/tcp writes a port


def server_ports(pid: int | str = "self") -> set[int]:
    """The local ports of process ``pid``'s TCP connections to port 5432."""
    inodes = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue  # closed meanwhile
        if target.startswith("socket:["):
            inodes.add(target[len("socket:[") : -1])
    ports = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(table) as lines:
            for line in list(lines)[1:]:
                fields = line.split()
                if fields[9] in inodes and fields[2].endswith(POSTGRES_PORT_HEX):
                    ports.add(int(fields[1].rsplit(":", 1)[1], 16))
    return ports


def server_connections(admin_dsn: str, ports: set[int]) -> int:
    """How many of the server's backends (``pg_stat_activity``) serve these client ports."""
    with psycopg.connect(admin_dsn, autocommit=True) as admin:
        row = admin.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE client_port = ANY(%s)", (list(ports),)
        ).fetchone()
    assert row is not None
    return int(row[0])


def cut_connections(admin_dsn: str, pid: int) -> int:
    """End every server session of process ``pid`` (``pg_terminate_backend``), as a
    network blip or a server restart would; how many were ended."""
    ports = server_ports(pid)
    with psycopg.connect(admin_dsn, autocommit=True) as admin:
        rows = admin.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE client_port = ANY(%s) AND pid <> pg_backend_pid()",
            (list(ports),),
        ).fetchall()
    return sum(1 for (ended,) in rows if ended)
