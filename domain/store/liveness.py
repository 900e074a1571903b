"""Process liveness: a lock a worker holds for its life, which the operating system
(SQLite) or the server (PostgreSQL) lets go the moment the process dies.

A lease says a worker renewed recently; it cannot say that a worker's process is gone
until the lease runs out (30 s by default). So each writing scheduler also holds a
lock of its own for as long as it is open:

- SQLite: an advisory ``flock`` on a file named for the store (the database file's
  device and inode) and the worker, in the temporary folder (``tasktrail-workers/``),
  as the writers' turn files are: every process on the machine finds the same one and
  none is left beside the store. The kernel releases it when the process exits,
  however it exits. (Processes that see different temporary folders, as services with
  a private ``/tmp`` do, cannot see each other's locks: the lease alone decides then.)
- PostgreSQL: a session advisory lock, keyed by the schema and the worker, held on a
  connection of its own. The server releases it when the session ends: the process
  died, or only its connection did (a network blip, a server restart, an idle-session
  timeout). So a thread of the holder's own keeps it: it wakes as soon as the server
  says anything on that connection (it says nothing to a healthy idle one), or every
  second, asks whether the session lives, and, ended, takes the lock again on a new one.

Another process asks :meth:`Liveness.gone` for the workers that hold running tasks:
a worker whose lock is free is gone, and its tasks are recovered at once (rule 9). On
PostgreSQL a free lock alone is not enough, since a live worker's may be free for the
moment it takes to connect again: it must be seen free at two looks ``confirm_s``
apart, none between seeing it held (:mod:`.advisory`). A holder that finds its lock
lost takes no new work; one that has been without it that long is fenced (its
invocations' decisions are refused) and, holding it again, recovers its own running
tasks as a restart would (:mod:`..app.fleet`). A worker whose lock is held is alive,
even when its lease lapsed; the lease still decides for it (a stopped or hung process
holds its lock), so fencing is unchanged. A worker that never held such a lock (an
earlier release) is never called gone here.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import logging
import os
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path

log = logging.getLogger("tasktrail.worker")
FOLDER = "tasktrail-workers"


def _digest(text: str) -> bytes:
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest()


class Liveness:
    """What every kind of store's liveness offers (a store with none: nothing is gone)."""

    unreachable = False
    """The last :meth:`hold` failed for an error (no server connection to be had, no
    folder to write), not because another process holds the lock: worth trying again."""

    def key(self, worker: str) -> str | None:
        """The key recorded on ``worker``'s lease row, telling readers it holds a lock."""
        return None

    def hold(self, worker: str) -> bool:
        """Take ``worker``'s lock for this process's life; ``False`` when another live
        process holds it (a second process under the same name)."""
        return False

    def release(self) -> None:
        """Let go of the lock held here (a clean close)."""

    confirm_s = 0.0
    """How long a lock must be seen free before its worker is called gone."""

    def gone(self, keys: Mapping[str, str], *, wait: bool = False) -> set[str]:
        """Of ``{worker: key}``, the workers whose process is gone (lock free, seen so
        for :attr:`confirm_s`). ``wait``: when a lock is seen
        free for the first time, look again once that can tell (an open, a command)."""
        return set()

    def due(self) -> float | None:
        """When (``time.monotonic()``) a lock seen free can be seen free long enough to
        call its worker gone; ``None`` when no lock is in doubt."""
        return None

    def lost_for(self) -> float | None:
        """Seconds since the lock held here was last known held, once it was found lost
        and not taken again; ``None`` while it is held (or none was taken)."""
        return None

    def take_outage(self) -> float:
        """How long the lock held here was last without it, once it is held again (0:
        none since the last call)."""
        return 0.0

    def forget(self, keys: Mapping[str, str]) -> None:
        """Remove what long-gone workers left (their lock files)."""


class FileLiveness(Liveness):
    """``flock`` on ``$TMPDIR/tasktrail-workers/<device>-<inode>-<digest of worker>.lock``
    (SQLite)."""

    def __init__(self, database: str) -> None:
        self.database = database
        self.folder = Path(tempfile.gettempdir()) / FOLDER
        self._fd: int | None = None
        self._path: Path | None = None

    def key(self, worker: str) -> str:
        info = os.stat(self.database)
        return f"{info.st_dev}-{info.st_ino}-{_digest(worker).hex()}.lock"

    def hold(self, worker: str) -> bool:
        try:
            path = self.folder / self.key(worker)
            self.folder.mkdir(mode=0o777, exist_ok=True)
            with contextlib.suppress(OSError):  # another user's folder: theirs to set
                self.folder.chmod(0o1777)
            for _ in range(10):
                fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o666)
                try:
                    # A peer checking this file holds it for microseconds: wait for it.
                    # A live process under the same name holds it for good: give up.
                    if not _lock(fd, wait_s=1.0):
                        os.close(fd)
                        return False
                    # A peer may have removed the file while we waited (it was stale):
                    # hold the file the path names, not an orphan.
                    if os.fstat(fd).st_ino != os.stat(path).st_ino:
                        raise FileNotFoundError(path)
                except FileNotFoundError:
                    os.close(fd)
                    continue
                self.unreachable = False
                os.ftruncate(fd, 0)
                os.write(fd, f"{worker}\n{os.getpid()}\n".encode("utf-8", "surrogatepass"))
                self._fd, self._path = fd, path
                return True
        except OSError as error:  # no temporary folder to write: the lease alone decides
            log.info("worker %s: no liveness lock (%s)", worker, error)
            self.unreachable = True
        return False

    def release(self) -> None:
        fd, path = self._fd, self._path
        self._fd = self._path = None
        if fd is None or path is None:
            return
        with contextlib.suppress(OSError):
            os.unlink(path)  # while held: a peer that opened it finds it free, as it is
        with contextlib.suppress(OSError):
            os.close(fd)

    def gone(self, keys: Mapping[str, str], *, wait: bool = False) -> set[str]:
        # The kernel lets a flock go only when its process dies: free is gone.
        return {worker for worker, key in keys.items() if self._free(key, remove=False)}

    def forget(self, keys: Mapping[str, str]) -> None:
        for key in keys.values():
            self._free(key, remove=True)

    def _free(self, key: str, *, remove: bool) -> bool:
        if os.sep in key or key.startswith(".") or not key.endswith(".lock"):
            return False  # not a key this class wrote
        path = self.folder / key
        try:
            fd = os.open(path, os.O_RDWR | os.O_CLOEXEC)
        except OSError:
            return False  # no file: a worker that closed, or holds none; the lease decides
        try:
            if not _lock(fd, wait_s=0):
                return False
            if remove:
                with contextlib.suppress(OSError):
                    os.unlink(path)
            return True
        finally:
            os.close(fd)  # closing lets go of the lock


def _lock(fd: int, *, wait_s: float) -> bool:
    """Take an exclusive ``flock`` on ``fd``, waiting up to ``wait_s``."""
    deadline = time.monotonic() + wait_s
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.005)
