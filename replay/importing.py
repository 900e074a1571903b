"""``import_log``: a JSONL export into a new store, all or nothing, checked like writes.

Every line is read and checked before anything is written: JSON, a known topic,
positions in order, each stream's versions contiguous, the limits every writer holds
an event to (:func:`~tasktrail.domain.tasks.events.event_problem`: NUL, lone
surrogates, lengths; and a JSON value of at most
:data:`~tasktrail.domain.tasks.validation.MAX_VALUE_BYTES`, as a memo, an error's
detail or a run's payload is held to), and every digest of the chain, with the heads
the export recorded (:class:`~tasktrail.domain.store.chain.ChainCheck`). A refused
import writes nothing: no store, no file.

Then the events go in as one transaction. A SQLite store is written whole to a
temporary file in the target's folder (``.NAME.import-*.tmp``), synced and renamed
into place, so that a killed or failed import (SIGKILL, a full disk) leaves no
store at the target: at most that hidden temporary file, after a SIGKILL. On
PostgreSQL the events go in as one transaction: a failed import leaves the
schema's tables empty, never a log cut short. A full disk is a
:class:`~tasktrail.domain.StoreError` (exit 2 on the command line) saying what was
short.
"""

from __future__ import annotations

import contextlib
import errno
import os
import tempfile
from pathlib import Path

import orjson
from eventsourcing.persistence import PersistenceError, StoredEvent

from tasktrail.domain import Store, StoreError, open_store
from tasktrail.domain.store.chain import ChainCheck, unseal
from tasktrail.domain.store.event_view import ensure_event_view
from tasktrail.domain.store.files import companions, is_sqlite_file
from tasktrail.domain.store.keys import KEY_ID_KEY, KEYED_AFTER_KEY, KEYED_MAC_KEY
from tasktrail.domain.store.location import parse_location
from tasktrail.domain.store.meta import CHAINED_AFTER_KEY
from tasktrail.domain.tasks.events import TaskEvent, event_payload, event_problem
from tasktrail.domain.tasks.validation import MAX_VALUE_BYTES

from .export_end import IncompleteExport, missing_end
from .log import Heads, LogError, LogReader, Skipped
from .seal_check import export_keying

_SCALARS = (str, int, float, bool, type(None), tuple)


def import_log(
    path: str | os.PathLike[str],
    store: Store | str | os.PathLike[str],
    *,
    skip_invalid: bool = False,
    skipped: list[Skipped] | None = None,
) -> int:
    """Append a JSONL export's events to a new, empty store, unchanged, all or nothing;
    returns how many. With ``skip_invalid``, ``skipped`` (if given) receives each line
    left out. Each event keeps its digest, so ``verify`` on the new store checks the
    chain the export carried."""
    missing = missing_end(path)  # an export ends with its heads line and its seal
    if missing is not None and not missing.lines_whole:  # its last line cut mid-way
        raise IncompleteExport(os.fspath(path), missing)
    keying = export_keying(path)  # a keyed export's marker comes along
    exported: list[int] = []  # each row's position in the export
    rows, last_unchained = checked_rows(Path(path), skip_invalid, skipped, keying, exported)
    if missing is not None:  # every line good (an edited one is named first), but cut short
        raise IncompleteExport(os.fspath(path), missing)
    marks = _marks(exported, last_unchained, keying)
    if isinstance(store, Store):
        _append_all(store, rows, marks)
        return len(rows)
    location = parse_location(store)
    if location.kind == "sqlite" and location.path is not None and not location.read_only:
        _import_file(Path(location.path), rows, marks)
        return len(rows)
    with open_store(store) as opened:
        _append_all(opened, rows, marks)
    return len(rows)


def _marks(
    exported: list[int], last_unchained: int, keying: tuple[str, int, str | None] | None
) -> list[tuple[str, int | str]]:
    """The marker keys the new store needs, as (key, row index or text): where the
    events recorded before the chain end, and a keyed export's key id, where its keyed
    events start and its keyed MAC. A row index is turned into the row's position."""
    marks: list[tuple[str, int | str]] = []
    if last_unchained >= 0:
        marks.append((CHAINED_AFTER_KEY, last_unchained))
    if keying is not None:
        key_id, keyed_after, keyed_mac = keying
        unkeyed = sum(1 for position in exported if position <= keyed_after)
        marks.append((KEY_ID_KEY, key_id))
        marks.append((KEYED_AFTER_KEY, unkeyed - 1 if unkeyed else "0"))
        marks.append((KEYED_MAC_KEY, keyed_mac or ""))
    return marks


def checked_rows(
    path: Path,
    skip_invalid: bool = False,
    skipped: list[Skipped] | None = None,
    keying: tuple[str, int, str | None] | None = None,
    exported: list[int] | None = None,
) -> tuple[list[StoredEvent], int]:
    """Every event of the export at ``path`` as the row to store, each checked as a
    writer checks it and its digest with the chain; and the index of the last row
    recorded before the chain (-1: none). Raises :class:`LogError` naming the line."""
    reader = LogReader(path, skip_invalid=skip_invalid)
    # A keyed export's keyed digests need its key: they are carried, counted unverified.
    chain = ChainCheck(keyed_after=keying[1] if keying is not None else None)
    lines: dict[int, int] = {}  # position -> line, to name where a chain problem is

    def heads_agree(heads: Heads, read: int) -> None:
        for stream_id, head in sorted(heads.heads.items()):
            if chain.heads.get(stream_id) != head:
                raise LogError(
                    str(path),
                    read + 1,
                    f"its heads give stream {stream_id} version {head[0]} with another "
                    "digest than its events: the export was edited or cut short",
                )

    reader.on_heads = heads_agree
    versions: dict[str, int] = {}
    rows: list[StoredEvent] = []
    last_unchained = -1
    for recorded, state, line in reader.rows():
        stream_id = recorded.event.stream_id()
        expected = versions.get(stream_id, 0) + 1
        if recorded.originator_version != expected:
            raise LogError(
                str(path),
                line,
                f"stream {stream_id} version {recorded.originator_version}, expected {expected}",
            )
        problem = writer_problem(recorded.event)
        if problem is not None:
            raise LogError(str(path), line, f"a writer refuses this event: {problem}")
        topic = type(recorded.event).topic
        lines[recorded.position] = line
        chain.add(recorded.position, stream_id, expected, topic, state)
        if chain.problems:
            found = chain.problems[0]
            raise LogError(str(path), line, f"stream {found.stream_id}: {found.message}")
        versions[stream_id] = expected
        if unseal(state)[1] is None:
            last_unchained = len(rows)
        rows.append(StoredEvent(stream_id, expected, topic, state))
        if exported is not None:
            exported.append(recorded.position)
    if skipped is not None:
        skipped.extend(reader.skipped)
    return rows, last_unchained


def writer_problem(event: TaskEvent) -> str | None:
    """What keeps ``event`` out of a store when a writer appends it, or ``None``: the
    stored limits (:func:`event_problem`), and a JSON value (a memo, an error's
    detail, a run's payload) of at most ``MAX_VALUE_BYTES``, as each command holds it."""
    problem = event_problem(event)
    if problem is not None:
        return problem
    for name, value in event_payload(event).items():
        if isinstance(value, str) and name in ("value", "detail", "payload"):
            size = len(orjson.dumps(value))
        elif isinstance(value, _SCALARS):
            continue
        else:
            try:
                size = len(orjson.dumps(value))
            except TypeError as error:
                return f"{type(event).__name__}: {name} is not JSON ({error})"
        if size > MAX_VALUE_BYTES:
            return (
                f"{type(event).__name__}: {name} is {size} bytes as JSON; the limit is "
                f"{MAX_VALUE_BYTES}"
            )
    return None


def _append_all(store: Store, rows: list[StoredEvent], marks: list[tuple[str, int | str]]) -> None:
    """The rows into an empty store as one transaction, then its marker and view."""
    if store.head() != 0:
        raise StoreError(f"{store.location} is not empty: import only into a new store")
    if not rows:
        ensure_event_view(store)
        return
    try:
        positions = store.app.recorder.insert_events(rows) or []
    except PersistenceError as error:
        raise StoreError(f"cannot import into {store.location}: {_first_line(error)}") from None
    if len(positions) == len(rows):
        for key, value in marks:
            # A row index becomes its position (events before the chain, or the key).
            store.mark(key, str(positions[value]) if isinstance(value, int) else value)
    ensure_event_view(store)


def _import_file(target: Path, rows: list[StoredEvent], marks: list[tuple[str, int | str]]) -> None:
    """A new SQLite store at ``target``, written whole beside it and renamed into place."""
    _check_target(target)
    folder = target.parent if str(target.parent) else Path(".")
    handle, name = tempfile.mkstemp(dir=folder, prefix=f".{target.name}.import-", suffix=".tmp")
    os.close(handle)
    temporary = Path(name)
    try:
        with open_store(temporary) as store:
            _append_all(store, rows, marks)
        _sync(temporary)
        _into_place(temporary, target)
        _sync(folder)
    except BaseException as error:
        for leftover in (temporary, *companions(temporary)):
            with contextlib.suppress(OSError):
                leftover.unlink()
        if _disk_full(error):
            raise StoreError(_short_of_space(folder, target, rows)) from None
        if isinstance(error, FileExistsError):
            raise StoreError(f"{target} was created while importing: nothing written") from None
        raise


def _into_place(temporary: Path, target: Path) -> None:
    """Rename the finished store to ``target``: over an empty store (_check_target),
    else by a hard link, which never goes over a store made meanwhile (a file system
    without hard links: a plain rename, after looking)."""
    if target.exists():
        os.replace(temporary, target)
        return
    try:
        os.link(temporary, target)
    except OSError as error:
        if error.errno not in (errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EMLINK):
            raise
        if target.exists():
            raise FileExistsError(errno.EEXIST, "made while importing", str(target)) from None
        os.replace(temporary, target)
        return
    os.unlink(temporary)


def _check_target(target: Path) -> None:
    """A new path, an empty file, or an empty store (replaced whole); nothing else."""
    if not target.exists():
        return
    if target.is_dir():
        raise StoreError(f"{target}: is a directory; give a file path for the new store")
    if target.stat().st_size == 0:
        return
    if not is_sqlite_file(target):
        raise StoreError(f"{target} is not a SQLite store: refusing to write into it")
    if any(path.exists() for path in companions(target)):
        raise StoreError(f"{target} is open in another process (its -wal is there): not replaced")
    with open_store(target, read_only=True) as existing:
        if existing.head() != 0:
            raise StoreError(f"{target} is not empty: import only into a new store")


def _sync(path: Path) -> None:
    descriptor = os.open(path, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


def _disk_full(error: BaseException) -> bool:
    if isinstance(error, OSError) and error.errno in (errno.ENOSPC, errno.EDQUOT):
        return True
    text = str(error).lower()
    return "disk is full" in text or "no space left" in text


def _short_of_space(folder: Path, target: Path, rows: list[StoredEvent]) -> str:
    needed = sum(len(row.state) + len(str(row.originator_id)) + 64 for row in rows)
    try:
        stat = os.statvfs(folder)
        free = f"{stat.f_bavail * stat.f_frsize:,} bytes are free"
    except OSError:
        free = "its free space is unknown"
    return (
        f"the disk holding {folder} is full: {len(rows):,} events need about {needed:,} "
        f"bytes there (more with SQLite's pages and journal) and {free}; nothing was "
        f"written to {target}"
    )


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__


__all__ = ["checked_rows", "import_log", "writer_problem"]
