"""The ``tasktrail`` command line.

Exit codes a script can use: 0 ok, 1 the check found problems, 2 bad input
(an unknown store, task or flag), 3 the store could not be read.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from collections.abc import Sequence
from pathlib import Path

import orjson

from tasktrail.domain import Scheduler, StoreError, TasktrailError, UnknownTask, open_store
from tasktrail.domain.describe import describe, format_at
from tasktrail.domain.events import event_payload

EXIT_OK, EXIT_PROBLEMS, EXIT_BAD_INPUT, EXIT_STORE = 0, 1, 2, 3

EPILOG = """\
examples:
  tasktrail demo                          record a demo workload into tasktrail-demo.db
  tasktrail demo --db /tmp/t.db --tasks 500
  tasktrail tasks tasktrail-demo.db --status terminal
  tasktrail history tasktrail-demo.db fragile-0001
  tasktrail history postgresql://postgres@127.0.0.1/test fragile-0001 --json
  tasktrail project tasktrail-demo.db     read models into tasktrail-demo.views.db

A STORE is a SQLite file path or a postgresql:// URL.
"""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="tasktrail",
        description=(
            "A durable task scheduler kept as an event-sourced state machine: "
            "record work, read its history, replay it."
        ),
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

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
        "--db", type=Path, default=Path("tasktrail-demo.db"), help="the file (replaced)"
    )
    demo.add_argument("--tasks", type=int, default=200, help="how many tasks (default 200)")

    history = commands.add_parser(
        "history",
        help="every event of one task, oldest first",
        description="Print every event of one task with its time on the scheduler clock.",
    )
    history.add_argument("store", help="SQLite path or postgresql:// URL")
    history.add_argument("task", help="the task id")
    history.add_argument("--json", action="store_true", help="one JSON object per line")

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
    tasks.add_argument("--json", action="store_true", help="one JSON object per line")

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
        "--out", type=Path, help="the read-model file (default: STORE.views.db beside it)"
    )
    project.add_argument("--rebuild", action="store_true", help="drop and refold from 0")
    project.add_argument(
        "--follow", action="store_true", help="keep following the store (Ctrl-C stops)"
    )
    project.add_argument("--quiet", action="store_true", help="no progress bar")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return _dispatch(parser, args)
    except BrokenPipeError:
        # The reader (``| head``) went away: not an error of ours.
        sys.stdout = open(os.devnull, "w")  # noqa: SIM115
        return EXIT_OK


def _dispatch(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    try:
        if args.command == "demo":
            return _demo(args)
        if args.command == "history":
            return _history(args)
        if args.command == "tasks":
            return _tasks(args)
        if args.command == "project":
            return _project(args)
    except UnknownTask as error:
        print(f"tasktrail: {error}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except StoreError as error:
        print(f"tasktrail: {error}", file=sys.stderr)
        return EXIT_STORE
    except TasktrailError as error:
        print(f"tasktrail: {error}", file=sys.stderr)
        return EXIT_BAD_INPUT
    parser.error(f"unknown command {args.command}")
    return EXIT_BAD_INPUT


def _demo(args: argparse.Namespace) -> int:
    from tasktrail.domain.demo import print_report, run_demo

    if args.tasks < 20:
        print("tasktrail: --tasks must be at least 20", file=sys.stderr)
        return EXIT_BAD_INPUT
    report = run_demo(args.db, args.tasks)
    print_report(report)
    return EXIT_OK


def _existing(location: str) -> str:
    if "://" not in location and not Path(location).exists():
        raise StoreError(f"no store at {location} (give an existing SQLite file or a URL)")
    return location


def _history(args: argparse.Namespace) -> int:
    with open_store(_existing(args.store)) as store:
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


def _tasks(args: argparse.Namespace) -> int:
    scheduler = Scheduler(open_store(_existing(args.store)))
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


def _project(args: argparse.Namespace) -> int:
    from tasktrail.projections import Projector, default_out

    location = _existing(args.store)
    out = args.out or default_out(location)
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


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
