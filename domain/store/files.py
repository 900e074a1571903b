"""A SQLite store's files on disk: what a path holds before SQLite is let near it, and
how a read-only open leaves the directory as it found it.

SQLite treats an empty file as an empty database (and writes one into it), and a
read-only connection to a WAL database creates ``-wal`` and ``-shm`` files it never
removes (with the database's permissions, so a read-only store's leftovers later
break writers). So a read-only open first checks the file (:func:`check_sqlite_file`),
then either promises SQLite that nothing can change it (``immutable=1``, when no
``-wal`` exists and the file or its folder cannot be written: no writer can be at
work) or opens it ``mode=ro`` and, once closed, lets SQLite remove the companions a
read-only open leaves (:func:`remove_read_leftovers`), its own or a killed one's.

Nothing here opens a store's file or a companion other than through SQLite: only
``os.stat`` and SQLite connections. A process's POSIX locks on a file all go when
any descriptor of it is closed (SQLite's "How To Corrupt An SQLite Database File",
2.2); SQLite keeps its own descriptors of a file open while another connection of
the process holds a lock, but an ``open()`` of ours would not: reading the header of
a store this process writes would drop its writer's locks, and another process's
close would then checkpoint and delete the ``-wal`` the writer still appends to.
"""

from __future__ import annotations

import contextlib
import errno
import os
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import IO
from urllib.parse import quote

from ..errors import InvalidArgument, StoreError
from .temporaries import output_temporary

COMPANIONS = ("-wal", "-shm", "-journal")
"""The files SQLite keeps beside a database: written by it, part of it."""


def companions(path: str | os.PathLike[str]) -> list[Path]:
    """The files SQLite may keep beside the database at ``path``."""
    return [Path(f"{os.fspath(path)}{suffix}") for suffix in COMPANIONS]


def companion_of(path: str | os.PathLike[str]) -> tuple[Path, str] | None:
    """The database ``path`` is a companion of, and which (``-wal``, ...): ``None`` when
    it is none (its name does not end so, or no SQLite file is there without the
    suffix)."""
    text = os.path.realpath(path)
    for suffix in COMPANIONS:
        if text.endswith(suffix) and is_sqlite_file(text[: -len(suffix)]):
            return Path(text[: -len(suffix)]), suffix
    return None


def _unlocked_uri(path: str | os.PathLike[str]) -> str:
    """A URI that reads ``path`` with no lock taken and nothing created (a missing
    file is not made): for a look at the file, never for reading a live log."""
    return f"file:{quote(os.path.abspath(path), safe='/')}?mode=ro&immutable=1"


def _sqlite_takes(path: str | os.PathLike[str]) -> bool:
    """Whether SQLite takes the non-empty file at ``path`` for a database: its header
    asked of SQLite itself (``False``: "file is not a database"). A database SQLite
    finds damaged beyond its header is taken: what reads it says the rest. Raises
    :class:`OSError` when SQLite cannot open the file at all."""
    try:
        connection = sqlite3.connect(_unlocked_uri(path), uri=True)
        try:
            connection.execute("PRAGMA schema_version").fetchall()
        finally:
            connection.close()
    except sqlite3.Error as error:
        name = getattr(error, "sqlite_errorname", "")
        if name == "SQLITE_NOTADB":
            return False
        if name.startswith(("SQLITE_CANTOPEN", "SQLITE_PERM", "SQLITE_IOERR")):
            denied = not os.access(path, os.R_OK)
            why = os.strerror(errno.EACCES) if denied else str(error)
            raise OSError(errno.EACCES if denied else errno.EIO, why, os.fspath(path)) from None
    return True


def is_sqlite_file(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` is an existing, non-empty file SQLite takes for a database, or a
    file SQLite keeps beside one (part of it: never to be written over, nor opened but
    by SQLite as the database's own)."""
    if companion_of(path) is not None:
        return True
    try:
        if os.stat(path).st_size == 0 or Path(path).is_dir():
            return False
        return _sqlite_takes(path)
    except OSError:
        return False


def check_sqlite_file(path: str | os.PathLike[str]) -> None:
    """Refuse, untouched, a path that is not an existing SQLite database: missing, a
    folder, empty, unreadable, or some other kind of file."""
    target = Path(path)
    try:
        size = target.stat().st_size
    except FileNotFoundError:
        raise StoreError(f"no store at {target} (give an existing SQLite file or a URL)") from None
    except OSError as error:
        raise StoreError(f"cannot read {target}: {error.strerror or error}") from None
    if target.is_dir():
        raise StoreError(f"{target}: is a directory; give a file path for a SQLite store")
    if size == 0:
        raise StoreError(f"{target} is empty (0 bytes): not a tasktrail store")
    part = companion_of(target)
    if part is not None:  # opened as a database, even by SQLite, it would lose its locks
        raise StoreError(
            f"{target} is SQLite's {part[1][1:]} file of the store {part[0]}: give the store"
        )
    try:
        taken = _sqlite_takes(target)
    except OSError as error:
        raise StoreError(f"cannot read {target}: {error.strerror or error}") from None
    if not taken:
        raise StoreError(
            f"{target} is not a SQLite database (SQLite: file is not a database): "
            "not a tasktrail store"
        )


def read_only_mode(path: str | os.PathLike[str]) -> str:
    """The SQLite URI parameter that reads ``path`` without writing: ``immutable=1`` when
    no ``-wal`` exists and the file or its folder is not writable (no writer can be
    at work, and SQLite could not create its companions anyway), else ``mode=ro``."""
    check_sqlite_file(path)
    target = Path(path)
    folder = target.parent if str(target.parent) else Path(".")
    writable = os.access(target, os.W_OK) and os.access(folder, os.W_OK)
    if not Path(f"{target}-wal").exists() and not writable:
        return "immutable=1"
    _probe(target)
    if not Path(f"{target}-shm").exists():
        # mode=ro makes the -shm a WAL reader needs: on a full disk SQLite would only
        # say "disk I/O error" of an intact store.
        full = disk_full(target)
        if full is not None:
            raise StoreError(f"cannot open store {target}: {full}")
    return "mode=ro"


def _probe(path: Path) -> None:
    """Read the schema without creating anything (``immutable=1``) before a ``mode=ro``
    open creates companions: a damaged file is refused here, while nothing is left
    that only a readable schema would let SQLite remove again."""
    try:
        connection = sqlite3.connect(_unlocked_uri(path), uri=True)
        try:
            connection.execute("SELECT count(*) FROM sqlite_master").fetchall()
        finally:
            connection.close()
    except (sqlite3.Error, UnicodeError) as error:  # a damaged file's bytes in a message
        if Path(f"{path}-wal").exists() and isinstance(error, sqlite3.DatabaseError):
            # immutable=1 reads the main file alone: with a -wal beside it (a writer at
            # work, or one a full disk stopped before its checkpoint), committed pages
            # may be only there. The mode=ro open reads both and judges.
            return
        full = disk_full(path)
        if full is not None:
            raise StoreError(f"{path}: {full}") from None
        raise StoreError(f"{path}: cannot read it as a SQLite database ({error})") from None


FULL_BELOW = 64 * 1024
"""Free bytes under which the disk holding a SQLite store counts as full: SQLite needs
a page or more beside the store (its -wal, and 32 KiB for its -shm) to read or write."""


def disk_full(path: str | os.PathLike[str]) -> str | None:
    """If the disk holding the SQLite file at ``path`` is full, say so (what SQLite then
    reports, "disk I/O error" or "database disk image is malformed", is no damage to
    the store); else ``None``."""
    folder = Path(os.path.abspath(path)).parent
    try:
        stat = os.statvfs(folder)
    except OSError:
        return None
    free = stat.f_bavail * stat.f_frsize
    if free >= FULL_BELOW:
        return None
    return (
        f"disk is full: the disk holding {folder} has {free:,} bytes free, and SQLite cannot "
        "make or grow the files it keeps beside the store (-wal, -shm); the store is not "
        "damaged. Free some space (to read it now, copy it elsewhere)"
    )


def existing_companions(path: str | os.PathLike[str]) -> frozenset[Path]:
    """The companions of ``path`` that exist now."""
    return frozenset(p for p in companions(path) if p.exists())


def remove_read_leftovers(path: str | os.PathLike[str], before: frozenset[Path]) -> None:
    """Let SQLite remove the ``-wal``/``-shm`` a read-only open leaves: those this open
    created, and those an earlier read left when it was killed before its close (an
    empty ``-wal``, a ``-shm``; ``before``: the companions there before this open).

    A read-write connection opened and closed is what removes them: SQLite's last
    connection to close checkpoints an empty WAL (the database's bytes do not
    change) and deletes both; if another connection has the store open (a writer at
    work, another reader, in this process or another), it is not the last, and
    leaves them to that one, which is exactly right. A ``-wal`` that was there with
    frames in it is no read's leftover: committed pages may wait in it for their
    checkpoint, which is a writer's to make (the next one opened does); nor is a
    ``-journal`` (a rollback a read must not make).
    """
    now = existing_companions(path)
    wal, journal = Path(f"{os.fspath(path)}-wal"), Path(f"{os.fspath(path)}-journal")
    if not (now - before) and not (now and _empty(wal) and journal not in now):
        return
    # Best effort: the store was only read, and any failure here leaves what SQLite left.
    with contextlib.suppress(sqlite3.Error, OSError):
        connection = sqlite3.connect(os.fspath(path), timeout=1)
        try:
            connection.execute("SELECT 1 FROM sqlite_master LIMIT 1").fetchall()
        finally:
            connection.close()


def _empty(wal: Path) -> bool:
    """Whether a ``-wal`` holds no frame: missing, or 0 bytes (a read-only open's)."""
    try:
        return wal.stat().st_size == 0
    except FileNotFoundError:
        return True
    except OSError:
        return False


def refuse_store_input(path: str | os.PathLike[str], what: str) -> None:
    """Refuse to read ``path`` as ``what`` (an export, seals, a key: a plain file) when
    it is a SQLite store in use (a ``-wal`` or ``-shm`` beside it) or a file SQLite
    keeps beside one: opening it outside SQLite would drop the locks this process's
    connections hold on it (see the module docstring). Looks with ``os.stat`` only."""
    part = companion_of(path)
    if part is not None:
        raise InvalidArgument(
            f"{os.fspath(path)} is SQLite's {part[1][1:]} file of the store {part[0]}, not {what}"
        )
    text = os.path.realpath(path)
    for suffix in COMPANIONS[:2]:
        if os.path.exists(f"{text}{suffix}"):
            raise InvalidArgument(
                f"{os.fspath(path)} is a SQLite store in use (its {suffix} is beside it), "
                f"not {what}"
            )


@contextlib.contextmanager
def atomic_output(path: str | os.PathLike[str]) -> Iterator[IO[bytes]]:
    """Write a file whole or not at all: a temporary file beside ``path`` (same folder,
    same file system), synced and renamed over ``path`` once the block ends; if the
    block raises (a full disk, an interrupt), the temporary file is removed and
    ``path`` is as it was. A symbolic link at ``path`` is followed: its target is
    what gets replaced. Errors name the path (:class:`OSError` with its filename)."""
    target = Path(os.path.realpath(path))
    if target.is_dir():
        raise IsADirectoryError(errno.EISDIR, "is a directory", os.fspath(path))
    folder = target.parent
    if not folder.is_dir():
        raise FileNotFoundError(errno.ENOENT, "no such folder", os.fspath(folder))
    descriptor, name = output_temporary(target)  # a killed output's is removed first
    try:
        # Written through its name (``handle.name``: a writer such as SQLite may reopen
        # it); the descriptor holds the file's lock until the rename.
        with open(descriptor, "wb"), open(name, "wb") as handle:
            yield handle
            handle.flush()
            os.fsync(handle.fileno())
        with contextlib.suppress(FileNotFoundError):
            os.chmod(name, _mode_for(target))
        os.replace(name, target)
    except OSError as error:
        with contextlib.suppress(OSError):
            os.unlink(name)
        if error.filename is None:  # a write (a full disk): say which file it was
            raise type(error)(error.errno, error.strerror, os.fspath(path)) from None
        raise
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(name)
        raise


def _mode_for(target: Path) -> int:
    """The permissions the replaced file had, or 0644 for a new one: not the 0600 of a
    temporary file."""
    try:
        return target.stat().st_mode & 0o7777
    except OSError:
        return 0o644


def sqlite_tables(path: str | os.PathLike[str]) -> set[str]:
    """The tables of the SQLite database at ``path``, read without writing anything
    (``-wal``/``-shm`` an open creates are removed again)."""
    before = existing_companions(path)
    uri = f"file:{quote(os.path.abspath(path), safe='/')}?{read_only_mode(path)}"
    try:
        connection = sqlite3.connect(uri, uri=True)
        try:
            rows = connection.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
            return {str(row[0]) for row in rows}
        finally:
            connection.close()
    except (sqlite3.Error, UnicodeError) as error:  # a damaged file's bytes in a message
        raise StoreError(f"{path}: cannot read it as a SQLite database ({error})") from None
    finally:
        remove_read_leftovers(path, before)
