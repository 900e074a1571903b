"""The PostgreSQL server's CPU for the concurrency benchmark's workers, read from /proc.

The server runs on this machine, so each backend is a process whose CPU time
``/proc/PID/stat`` gives. Other sessions use the same server at the same time, so
the whole server's CPU would count their work too: :class:`BackendCpu` counts only
the backends that serve the benchmark's worker processes. A worker's connections are
its TCP sockets to the server's port (its file descriptors, matched to local ports
through ``/proc/net/tcp``); a backend's process title names its client's address
and port (``postgres: ... 127.0.0.1(54321) idle``). The server's shared processes
(WAL writer, checkpointer, autovacuum) are not counted: they serve every client.

A backend's CPU is read when the window opens, every ``interval_s`` while it is open
(a backend that exits meanwhile keeps the last value read: up to one interval of
its CPU is lost) and when it closes; a backend first seen after the window opened
counts from zero (it started inside the window). Only a server reached over TCP on
this machine can be read; otherwise :meth:`BackendCpu.seconds` is ``None``.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from urllib.parse import urlparse

_TICKS = os.sysconf("SC_CLK_TCK")
_LOCAL = {"127.0.0.1", "localhost", "::1", "[::1]"}


def local_port(url: str) -> int | None:
    """The port of a server on this machine reached over TCP, else ``None``."""
    parsed = urlparse(url)
    if parsed.hostname not in _LOCAL:
        return None
    return parsed.port or 5432


def _socket_inodes(pid: int) -> set[str]:
    inodes = set()
    try:
        for fd in os.scandir(f"/proc/{pid}/fd"):
            try:
                target = os.readlink(fd.path)
            except OSError:
                continue  # closed meanwhile
            if target.startswith("socket:["):
                inodes.add(target[8:-1])
    except OSError:
        pass  # the process ended
    return inodes


def _client_ports(pids: list[int], server_port: int) -> set[int]:
    """The local ports of the processes' TCP connections to ``server_port``."""
    inodes: set[str] = set()
    for pid in pids:
        inodes |= _socket_inodes(pid)
    ports = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            local, remote, inode = fields[1], fields[2], fields[9]
            if inode in inodes and int(remote.rsplit(":", 1)[1], 16) == server_port:
                ports.add(int(local.rsplit(":", 1)[1], 16))
    return ports


def _backends(ports: set[int]) -> dict[int, int]:
    """Backend pid by client port, for the ports given, from the process titles."""
    found = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            title = Path(entry.path, "cmdline").read_bytes()
        except OSError:
            continue
        if not title.startswith(b"postgres: ") or b"(" not in title:
            continue
        # "postgres: 15/main: user db 127.0.0.1(54321) idle": the port in brackets
        rest = title.partition(b"(")[2]
        port = rest.partition(b")")[0]
        if port.isdigit() and int(port) in ports:
            found[int(port)] = int(entry.name)
    return found


def _cpu_s(pid: int) -> float | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat.rpartition(")")[2].split()  # after the command name, which may hold spaces
    return (int(fields[11]) + int(fields[12])) / _TICKS  # utime, stime


class BackendCpu:
    """The CPU seconds of the backends that serve ``clients`` (process ids) between
    :meth:`open` and :meth:`close`."""

    def __init__(self, clients: list[int], server_port: int, interval_s: float = 0.25) -> None:
        self.clients = clients
        self.server_port = server_port
        self.interval_s = interval_s
        self._backend_by_port: dict[int, int] = {}
        self._start: dict[int, float] = {}
        self._last: dict[int, float] = {}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._total: float | None = None

    def _sample(self, opening: bool = False) -> None:
        ports = _client_ports(self.clients, self.server_port)
        if ports - set(self._backend_by_port):  # a new connection: look its backend up
            self._backend_by_port.update(_backends(ports - set(self._backend_by_port)))
        for backend in self._backend_by_port.values():
            cpu = _cpu_s(backend)
            if cpu is None:
                continue  # ended: its last value read stands
            if backend not in self._start:
                self._start[backend] = cpu if opening else 0.0
            self._last[backend] = cpu

    def open(self) -> None:
        """Read every backend's CPU so far and keep reading until :meth:`close`."""
        self._sample(opening=True)
        self._thread = threading.Thread(target=self._run, name="backend-cpu", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            self._sample()

    def close(self) -> None:
        """The last reading; :meth:`seconds` holds the total from here on."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        self._sample()
        self._total = sum(self._last[b] - self._start[b] for b in self._last)

    def seconds(self) -> float | None:
        """The backends' CPU seconds in the window, or ``None`` when none was found (a
        server not on this machine, or reached through a Unix socket)."""
        return self._total if self._last else None
