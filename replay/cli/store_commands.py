"""The ``tasktrail`` commands that work on a store as the scheduler keeps it:
``demo`` records a workload into a new file (or over a store a demo made),
``history`` prints one task's events with their positions in the store, and
``project`` folds the log into SQLite read models (with a progress bar on a
terminal). ``history`` and ``project`` open the store read-only (``tasks`` is
:mod:`.tasks_command`).
Each command is a parser builder ``add_<name>`` and a handler ``do_<name>``.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sqlite3
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from tasktrail.domain import InvalidArgument, StoreError, UnknownTask, open_store
from tasktrail.domain.store.files import (
    atomic_output,
    companions,
    disk_full,
    is_sqlite_file,
    sqlite_tables,
)
from tasktrail.domain.tasks.describe import describe, format_at
from tasktrail.domain.tasks.streams import ChunksEmitted
from tasktrail.projections.projector import POSITIONS

from .common import (
    EXIT_OK,
    EXIT_PROBLEMS,
    STORE_HELP,
    ProgressBar,
    check_folder,
    emit,
    local_file,
    refuse_inputs,
    report_start,
    say,
    task_id_argument,
    warn,
)
from .service.stream_command import ChunkRuns, shown_payload


def add_demo(commands: Any) -> None:
    demo = commands.add_parser(
        "demo",
        help="record a realistic workload (with a crash and recovery) and summarize it",
        description=(
            "Record a realistic workload into a fresh SQLite file: owner trees, waits of "
            "both policies, sleeps, an abort cascade, a simulated crash and the recovery "
            "that parks a task, and an operator's retry. Then print what happened."
        ),
    )
    demo.add_argument(
        "--db",
        type=Path,
        default=Path("tasktrail-demo.db"),
        metavar="PATH",
        help="the file: new, or a store a demo made (replaced); any other file is refused",
    )
    demo.add_argument(
        "--tasks",
        type=int,
        default=200,
        metavar="N",
        help="how many tasks, 30 to 50,000 (default 200)",
    )
    demo.add_argument("--quiet", action="store_true", help="no progress bar")


def add_history(commands: Any) -> None:
    history = commands.add_parser(
        "history",
        help="every event of one task, oldest first",
        description=(
            "Print every event of one task with its position in the store, its version in "
            "the task's stream and its time on the scheduler clock. A version missing from "
            "the stream (an event removed) is shown, and exits 1."
        ),
    )
    history.add_argument("store", help=STORE_HELP)
    history.add_argument("task", help="the task id")
    history.add_argument(
        "--json", action="store_true", help="JSON Lines: one JSON object per event, a line each"
    )


def add_project(commands: Any) -> None:
    project = commands.add_parser(
        "project",
        help="build or catch up the read models (live mirror, audit trail, ...)",
        description=(
            "Fold the store's log into SQLite read-model tables (readable with the sqlite3 "
            "shell or Datasette). Catches up from each table's tracked position: a second "
            "run with nothing new is a no-op and reads no event; a run after new events "
            "starts from the store's latest snapshot at or before the tables' position "
            "and folds only what they have not seen. --rebuild starts again from "
            "position 0. The store is only read."
        ),
    )
    project.add_argument("store", help=STORE_HELP)
    project.add_argument(
        "--out",
        type=Path,
        metavar="PATH",
        help="the read-model file (default: STORE-views.db beside it)",
    )
    project.add_argument("--rebuild", action="store_true", help="drop and refold from 0")
    project.add_argument(
        "--checksums",
        action="store_true",
        help="print each table's checksum (reads every row: a rebuild prints them anyway)",
    )
    project.add_argument(
        "--follow", action="store_true", help="keep following the store (Ctrl-C stops)"
    )
    project.add_argument("--quiet", action="store_true", help="no progress bar")


def do_demo(args: argparse.Namespace) -> int:
    from tasktrail.domain.demo.workload import print_report, run_demo

    bar = ProgressBar("demo", enabled=not args.quiet, unit="tasks ended")

    def log(line: str) -> None:
        bar.finish()  # a line of its own, not over the bar
        say(line)

    try:
        report = run_demo(args.db, args.tasks, log=log, progress=bar)
    finally:
        bar.finish()
    print_report(report, log=say)
    return EXIT_OK


def do_history(args: argparse.Namespace) -> int:
    task_id = task_id_argument(args.task)
    with open_store(args.store, read_only=True) as store:
        records = store.stream_records(task_id)
        # Its erasure, if any (issue 45): who erased its values, when, why.
        erasures = store.stream_records(f"erasure:{task_id}") if records else []
    if not records:
        raise UnknownTask(task_id)
    gaps = 0
    expected = 1
    runs = ChunkRuns()  # a stream's chunks as runs and totals, not a line each
    for recorded in records:
        event = recorded.event
        version = recorded.originator_version
        for line in [] if args.json else runs.take(recorded):
            say(line)
        if version != expected:
            # Never hidden: an event removed from the store leaves its version out.
            gaps += 1
            missing = (
                f"version {expected}"
                if version == expected + 1
                else f"versions {expected}-{version - 1}"
            )
            warn(f"task {task_id}: {missing} missing before position {recorded.position}")
            if not args.json:
                say(f"{'':>8}  {'':>4}  ({missing} missing from the store: removed?)")
        expected = version + 1
        if args.json:
            emit(
                {
                    "position": recorded.position,
                    "version": version,
                    "type": type(event).__name__,
                    **shown_payload(event),
                }
            )
        elif not isinstance(event, ChunksEmitted):
            say(f"{recorded.position:>8}  {version:>4}  {format_at(event.at)}  {describe(event)}")
    if not args.json:
        for line in runs.lines() + runs.summary():
            say(line)
    for erased in erasures:
        event = erased.event
        if args.json:
            emit(
                {"position": erased.position, "type": type(event).__name__, **shown_payload(event)}
            )
        else:
            say(f"{erased.position:>8}  {'':>4}  {format_at(event.at)}  {describe(event)}")
    return EXIT_PROBLEMS if gaps else EXIT_OK


@contextlib.contextmanager
def _naming(out: Path) -> Iterator[None]:
    """SQLite's errors on the read models' file, with the file's name (SQLite's own
    words name none: "unable to open database file", "disk I/O error")."""
    try:
        yield
    except sqlite3.Error as error:
        why = _unwritable(out) or disk_full(out) or str(error)
        if "locked" in why:
            why += " (another tasktrail process is writing it: try again)"
        raise StoreError(f"cannot write the read models to {out}: {why}") from None


def check_views_out(out: Path, store: str) -> Path:
    """The read models' file: not the store (nor its companions), not another store,
    not some other kind of file; a new file, or read models ``project`` wrote."""
    refuse_inputs(out, [store], what="the read models need a file of their own")
    check_folder(out)
    unwritable = _unwritable(out)
    if unwritable is not None:
        raise InvalidArgument(f"cannot write the read models to {out}: {unwritable}")
    if not out.exists() or out.stat().st_size == 0:
        return out
    if not is_sqlite_file(out):
        raise InvalidArgument(f"{out} is not a SQLite database: refusing to write read models")
    tables = sqlite_tables(out)
    if "stored_events" in tables:
        raise InvalidArgument(f"{out} is a tasktrail store, not read models: refusing to write")
    if tables and POSITIONS not in tables:
        raise InvalidArgument(f"{out} is a SQLite database of something else: refusing to write")
    return out


def _unwritable(out: Path) -> str | None:
    """Why the read models' file cannot be written (its folder, or itself, read-only:
    SQLite would only say "unable to open database file"), or ``None``."""
    folder = Path(os.path.realpath(out)).parent
    if not os.access(folder, os.W_OK):
        return f"its folder {folder} cannot be written (read-only, or not ours)"
    if out.exists() and not os.access(out, os.W_OK):
        return "the file cannot be written (read-only, or not ours)"
    return None


def do_project(args: argparse.Namespace) -> int:
    from tasktrail.projections import Projector, default_out
    from tasktrail.projections.projector import LEGACY_SUFFIX, is_legacy_out

    beside = local_file(args.store)
    out = check_views_out(args.out or default_out(beside or args.store), args.store)
    if args.out is None and is_legacy_out(out):
        renamed = out.with_name(out.name.removesuffix(LEGACY_SUFFIX) + "-views.db")
        print(
            f"tasktrail: note: catching up {out}, the read-model name of earlier releases; "
            f"rename it to {renamed} (Datasette serves a name with one dot at a plain URL)",
            file=sys.stderr,
        )
    store = open_store(args.store, read_only=True)
    try:
        with _naming(out), _views_file(out) as views, Projector(store, views) as projector:
            bar = ProgressBar("project", enabled=not args.quiet)
            try:
                report = (
                    projector.rebuild(progress=bar)
                    if args.rebuild
                    else projector.catch_up(progress=bar)
                )
            finally:
                bar.finish()
            restored = projector.restored
            if restored is not None:  # it resumed: from a snapshot, or from 0
                report_start(restored.snapshot, restored.problems, restored.position)
            verb = "rebuilt" if args.rebuild else ("no-op" if report.noop else "caught up")
            say(f"{verb}: {out} at position {report.position} ({report.read} events folded)")
            for name, count in report.written.items():
                say(f"  {name:<16} {count} new events")
            if args.rebuild or args.checksums:
                # Every row of every table is read: not for each catch-up, whose cost
                # follows the new events.
                for table, digest in projector.table_checksums().items():
                    say(f"  table {table:<16} checksum {digest}")
            if args.follow and views == out:
                _follow(projector)
        if args.follow and views != out:  # a new file, in place now: followed there
            with _naming(out), Projector(store, out) as projector:
                _follow(projector)
    finally:
        store.close()
    return EXIT_OK


def _follow(projector: Any) -> None:
    warn("following the store; Ctrl-C stops")
    with contextlib.suppress(KeyboardInterrupt):
        projector.follow(on_batch=lambda r: say(f"position {r.position}: +{r.read} events"))


@contextlib.contextmanager
def _views_file(out: Path) -> Iterator[Path]:
    """The file ``project`` folds into. Read models already there are caught up in
    place (batch by batch, each whole with its tracked position). A new file is made
    whole or not at all: under a temporary name beside ``out`` (:func:`atomic_output`),
    renamed into place once the projector closed it, so a refused project leaves none."""
    if any(path.exists() for path in companions(out)) or (out.exists() and out.stat().st_size > 0):
        yield out
        return
    with atomic_output(out) as handle:
        temporary = Path(handle.name)
        try:
            yield temporary
        except BaseException:
            for leftover in companions(temporary):  # SQLite's -wal and -shm, if left
                with contextlib.suppress(OSError):
                    leftover.unlink()
            raise
