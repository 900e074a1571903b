"""The ``tasktrail`` commands that work on a store as the scheduler keeps it:
``demo`` records a workload into a fresh file, ``tasks`` lists a store's tasks,
``history`` prints one task's events, and ``project`` folds the log into SQLite read
models (with the progress bar it shows on stderr). Each command is a parser builder
``add_<name>`` and a handler ``do_<name>``.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from pathlib import Path
from typing import Any

import orjson

from tasktrail.domain import Scheduler, UnknownTask, open_store
from tasktrail.domain.demo.workload import MIN_TASKS
from tasktrail.domain.tasks.describe import describe, format_at
from tasktrail.domain.tasks.events import event_payload

from .common import EXIT_BAD_INPUT, EXIT_OK, existing


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
        help="the file (replaced; default tasktrail-demo.db)",
    )
    demo.add_argument(
        "--tasks",
        type=int,
        default=200,
        metavar="N",
        help=f"how many tasks (default 200, at least {MIN_TASKS})",
    )


def add_history(commands: Any) -> None:
    history = commands.add_parser(
        "history",
        help="every event of one task, oldest first",
        description="Print every event of one task with its time on the scheduler clock.",
    )
    history.add_argument("store", help="SQLite path or postgresql:// URL")
    history.add_argument("task", help="the task id")
    history.add_argument(
        "--json", action="store_true", help="JSON Lines: one JSON object per event, a line each"
    )


def add_tasks(commands: Any) -> None:
    tasks = commands.add_parser(
        "tasks",
        help="the tasks of a store and their status",
        description="List the tasks of a store, in submission order.",
    )
    tasks.add_argument("store", help="SQLite path or postgresql:// URL")
    tasks.add_argument(
        "--status",
        choices=["pending", "running", "waiting", "sleeping", "completing", "terminal"],
    )
    tasks.add_argument(
        "--json", action="store_true", help="JSON Lines: one JSON object per task, a line each"
    )


def add_project(commands: Any) -> None:
    project = commands.add_parser(
        "project",
        help="build or catch up the read models (live mirror, audit trail, ...)",
        description=(
            "Fold the store's log into SQLite read-model tables (readable with the sqlite3 "
            "shell or Datasette). Catches up from each table's tracked position: a second "
            "run with nothing new is a no-op. --rebuild starts again from position 0."
        ),
    )
    project.add_argument("store", help="SQLite path or postgresql:// URL")
    project.add_argument(
        "--out",
        type=Path,
        metavar="PATH",
        help="the read-model file (default: STORE-views.db beside it)",
    )
    project.add_argument("--rebuild", action="store_true", help="drop and refold from 0")
    project.add_argument(
        "--follow", action="store_true", help="keep following the store (Ctrl-C stops)"
    )
    project.add_argument("--quiet", action="store_true", help="no progress bar")


def do_demo(args: argparse.Namespace) -> int:
    from tasktrail.domain.demo.workload import print_report, run_demo

    if args.tasks < MIN_TASKS:
        print(f"tasktrail: --tasks must be at least {MIN_TASKS}", file=sys.stderr)
        return EXIT_BAD_INPUT
    report = run_demo(args.db, args.tasks)
    print_report(report)
    return EXIT_OK


def do_history(args: argparse.Namespace) -> int:
    with open_store(existing(args.store)) as store:
        events = store.stream(args.task)
        if not events:
            raise UnknownTask(args.task)
        for version, event in enumerate(events, start=1):
            if args.json:
                row = {"version": version, "type": type(event).__name__, **event_payload(event)}
                sys.stdout.write(orjson.dumps(row).decode() + "\n")
            else:
                print(f"{version:>4}  {format_at(event.at)}  {describe(event)}")
    return EXIT_OK


def do_tasks(args: argparse.Namespace) -> int:
    scheduler = Scheduler(open_store(existing(args.store)))
    try:
        scheduler.refresh()  # read only: no recovery, nothing appended
        for task in scheduler.tasks(args.status):
            if args.json:
                sys.stdout.write(orjson.dumps(task.to_dict()).decode() + "\n")
            else:
                outcome = task.outcome.status if task.outcome else ""
                phase = task.checkpoint.phase if task.checkpoint else ""
                print(f"{task.id:<36} {task.kind:<12} {task.status:<10} {outcome or phase}")
    finally:
        scheduler.store.close()
    return EXIT_OK


class ProgressBar:
    """A one-line progress bar on stderr, for long work."""

    def __init__(self, label: str, *, enabled: bool = True) -> None:
        self.label = label
        self.enabled = enabled
        self.shown = False

    def __call__(self, done: int, total: int) -> None:
        if not self.enabled or total <= 0:
            return
        width = 30
        filled = min(width, width * done // total)
        percent = min(100, 100 * done // total)
        bar = "#" * filled + "." * (width - filled)
        sys.stderr.write(f"\r{self.label} [{bar}] {percent:3d}% {done:,}/{total:,} events")
        sys.stderr.flush()
        self.shown = True

    def finish(self) -> None:
        if self.shown:
            sys.stderr.write("\n")


def do_project(args: argparse.Namespace) -> int:
    from tasktrail.projections import Projector, default_out
    from tasktrail.projections.projector import LEGACY_SUFFIX, is_legacy_out

    location = existing(args.store)
    out = args.out or default_out(location)
    if args.out is None and is_legacy_out(out):
        renamed = out.with_name(out.name.removesuffix(LEGACY_SUFFIX) + "-views.db")
        print(
            f"tasktrail: note: catching up {out}, the read-model name of earlier releases; "
            f"rename it to {renamed} (Datasette serves a name with one dot at a plain URL)",
            file=sys.stderr,
        )
    with Projector(location, out) as projector:
        bar = ProgressBar("project", enabled=not args.quiet)
        report = (
            projector.rebuild(progress=bar) if args.rebuild else projector.catch_up(progress=bar)
        )
        bar.finish()
        verb = "rebuilt" if args.rebuild else ("no-op" if report.noop else "caught up")
        print(f"{verb}: {out} at position {report.position} ({report.read} events folded)")
        for name, count in report.written.items():
            print(f"  {name:<16} {count} new events")
        for table, digest in projector.table_checksums().items():
            print(f"  table {table:<16} checksum {digest}")
        if args.follow:
            print("following the store; Ctrl-C stops", file=sys.stderr)
            with contextlib.suppress(KeyboardInterrupt):
                projector.follow(
                    on_batch=lambda r: print(f"position {r.position}: +{r.read} events")
                )
    return EXIT_OK
