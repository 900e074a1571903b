"""Writer turns on a SQLite store: the processes whose schedulers write to one file
take turns, one command at a time, through a kernel lock (``flock``) on a small file
of their own.

Why: SQLite's busy handler sleeps 1, 2, 5, ... then 100 ms between tries for the
write lock, so a waiting process sleeps through the moment a writer commits, and
the writer that just committed takes the lock again with its next command. Worse,
the waiter decided (and stamped its events) before it waited: once it gets the lock,
later-stamped events of the others are there and the time guard refuses it, so it
decides and waits again. One writer could starve another (60 commands against 957
in one trial). A command that takes its turn before it reads the store's news waits
in the kernel, is woken at once when the turn is given up, and decides on state no
one changes under it.

The turn is only an aid: correctness rests on SQLite's lock and the store's guards,
so where the turn file cannot be made (a folder that cannot be written), commands go
without turns. The file lives in the temporary folder, named after the database
file's device and inode (every process on a machine finds the same one; none is
left beside the store).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

FOLDER = "tasktrail-turns"


class _Turn:
    """One process's hold on one file's turns, shared by its stores of that file: a
    command that runs another store's command within its turn (in the same thread)
    goes on, where a second ``flock`` of its own would wait for itself forever."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.lock = threading.RLock()
        self.depth = 0
        self.users = 0


_TURNS: dict[str, _Turn] = {}
_TURNS_LOCK = threading.Lock()


class WriterTurns:
    """Turns among the writer processes of one SQLite file (see the module docstring)."""

    def __init__(self, database: str) -> None:
        self.database = database
        self._key: str | None = None
        self._failed = False

    def _open(self) -> _Turn | None:
        if self._key is None and not self._failed:
            try:
                info = os.stat(self.database)
                key = f"{info.st_dev}-{info.st_ino}"
                with _TURNS_LOCK:
                    shared = _TURNS.get(key)
                    if shared is None:
                        folder = Path(tempfile.gettempdir()) / FOLDER
                        folder.mkdir(mode=0o777, exist_ok=True)
                        with contextlib.suppress(OSError):  # another user's: theirs to set
                            folder.chmod(0o1777)
                        flags = os.O_RDWR | os.O_CREAT | os.O_CLOEXEC
                        shared = _TURNS[key] = _Turn(os.open(folder / key, flags, 0o666))
                    shared.users += 1
                self._key = key
            except OSError:
                self._failed = True  # no turns: SQLite's own lock still serializes writes
        return _TURNS.get(self._key) if self._key is not None else None

    @contextlib.contextmanager
    def turn(self) -> Iterator[None]:
        """Hold this process's turn while the block runs."""
        shared = self._open()
        if shared is None:
            yield
            return
        with shared.lock:
            if shared.depth == 0:
                fcntl.flock(shared.fd, fcntl.LOCK_EX)
            shared.depth += 1
            try:
                yield
            finally:
                shared.depth -= 1
                if shared.depth == 0:
                    fcntl.flock(shared.fd, fcntl.LOCK_UN)

    def close(self) -> None:
        """Give up this store's share of the turn file (closed with the last one)."""
        key, self._key = self._key, None
        if key is None:
            return
        with _TURNS_LOCK:
            shared = _TURNS[key]
            shared.users -= 1
            if shared.users == 0:
                del _TURNS[key]
                os.close(shared.fd)
