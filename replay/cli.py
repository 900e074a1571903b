"""The ``tasktrail`` command line.

Exit codes a script can use: 0 ok, 1 violations (or differences) found, 2 bad
input (an unknown or unreadable store, a bad log line, an unknown task or flag).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import orjson

from tasktrail.domain import Scheduler, StoreError, TasktrailError, UnknownTask, open_store
from tasktrail.domain.tasks.describe import describe, format_at
from tasktrail.domain.tasks.events import event_payload

EXIT_OK, EXIT_PROBLEMS, EXIT_BAD_INPUT = 0, 1, 2

EPILOG = """\
examples:
  tasktrail demo                          record a demo workload into tasktrail-demo.db
  tasktrail demo --db /tmp/t.db --tasks 500
  tasktrail tasks tasktrail-demo.db --status terminal
  tasktrail history tasktrail-demo.db fragile-0001
  tasktrail history postgresql://postgres@127.0.0.1/test fragile-0001 --json
  tasktrail project tasktrail-demo.db     read models into tasktrail-demo.views.db
  tasktrail replay tasktrail-demo.db --until 300
  tasktrail verify tasktrail-demo.db
  tasktrail explain tasktrail-demo.db fragile-0001
  tasktrail export tasktrail-demo.db demo.jsonl && tasktrail replay demo.jsonl
  tasktrail diff tasktrail-demo.db tasktrail-demo.db --until-a 300 --until-b 320
  tasktrail trace tasktrail-demo.db fragile-0001 --out fragile.json

A STORE is a SQLite file path or a postgresql:// URL; a SOURCE may also be a
.jsonl export. Exit codes: 0 ok, 1 violations or differences, 2 bad input.
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
    _replay_commands(commands)
    return parser


SOURCE_HELP = "SQLite path, postgresql:// URL, or .jsonl export"
UNTIL_HELP = "stop after this position (an integer) or at this time (ISO-8601, e.g. ...Z)"


def _replay_commands(commands: Any) -> None:
    replay = commands.add_parser(
        "replay",
        help="fold a log into scheduler state, as of a position or time",
        description=(
            "Fold a log into scheduler state without touching it, and show the tasks "
            "that were live then. --until stops after a position or at a clock time."
        ),
    )
    replay.add_argument("source", help=SOURCE_HELP)
    replay.add_argument("--until", help=UNTIL_HELP)
    replay.add_argument("--json", action="store_true", help="the state as JSON")
    replay.add_argument("--skip-invalid", action="store_true", help=SKIP_HELP)

    diff = commands.add_parser(
        "diff",
        help="what differs between two states, task by task",
        description=(
            "Compare two logs, or one log at two points (--until-a, --until-b). "
            "Exits 1 when they differ, like diff(1)."
        ),
    )
    diff.add_argument("a", help=SOURCE_HELP)
    diff.add_argument("b", help=SOURCE_HELP)
    diff.add_argument("--until-a", help=UNTIL_HELP)
    diff.add_argument("--until-b", help=UNTIL_HELP)
    diff.add_argument("--json", action="store_true", help="the differences as JSON")

    verify = commands.add_parser(
        "verify",
        help="check the rules' invariants over a log's state",
        description=(
            "Fold a log leniently and check every invariant stated over state (no event "
            "after terminal, one invocation a task, held outcomes, cascades, waits, sleeps, "
            "memos, ...). Each violation names its positions. Exits 1 on any violation."
        ),
    )
    verify.add_argument("source", help=SOURCE_HELP)
    verify.add_argument("--json", action="store_true", help="the report as JSON")
    verify.add_argument("--skip-invalid", action="store_true", help=SKIP_HELP)

    export = commands.add_parser(
        "export",
        help="write a store's log as JSONL (byte-stable)",
        description="Write every event as one JSON line: position, topic, stream, version, at.",
    )
    export.add_argument("store", help="SQLite path or postgresql:// URL")
    export.add_argument("out", type=Path, help="the .jsonl file to write")
    export.add_argument("--json", action="store_true", help="report as JSON")

    imp = commands.add_parser(
        "import",
        help="append a JSONL export to a new, empty store",
        description="Check every line, then append the events unchanged to an empty store.",
    )
    imp.add_argument("log", type=Path, help="the .jsonl export")
    imp.add_argument("store", help="SQLite path or postgresql:// URL (must be empty)")
    imp.add_argument("--json", action="store_true", help="report as JSON")
    imp.add_argument("--skip-invalid", action="store_true", help=SKIP_HELP)

    explain = commands.add_parser(
        "explain",
        help="the story of one task: its events and the rule behind each",
        description="Every event that made a task's state, with the command or rule behind it.",
    )
    explain.add_argument("source", help=SOURCE_HELP)
    explain.add_argument("task", help="the task id")
    explain.add_argument("--until", help=UNTIL_HELP)
    explain.add_argument("--json", action="store_true", help="one JSON object per step")

    trace = commands.add_parser(
        "trace",
        help="rebuild phase spans from the log as OTLP/JSON (for a tracing UI)",
        description=(
            "Rebuild the tasktrail.phase spans from the log, with their original start and end "
            "times on the scheduler clock, and write them as OTLP/JSON. With TASK, only the "
            "trace that task belongs to. Phases a crash cut off end where recovery found them."
        ),
    )
    trace.add_argument("source", help=SOURCE_HELP)
    trace.add_argument("task", nargs="?", help="the task id (default: every task)")
    trace.add_argument("--out", type=Path, help="the .json file to write (default: stdout)")


SKIP_HELP = "skip log lines that cannot be read, and report each one (never the default)"


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
    handlers = {
        "demo": _demo,
        "history": _history,
        "tasks": _tasks,
        "project": _project,
        "replay": _replay,
        "diff": _diff,
        "verify": _verify,
        "export": _export,
        "import": _import,
        "explain": _explain,
        "trace": _trace,
    }
    handler = handlers.get(args.command)
    if handler is None:
        parser.error(f"unknown command {args.command}")
    try:
        return handler(args)
    except (TasktrailError, ValueError) as error:
        print(f"tasktrail: {error}", file=sys.stderr)
        return EXIT_BAD_INPUT


def _demo(args: argparse.Namespace) -> int:
    from tasktrail.domain.demo.workload import MIN_TASKS, print_report, run_demo

    if args.tasks < MIN_TASKS:
        print(f"tasktrail: --tasks must be at least {MIN_TASKS}", file=sys.stderr)
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


def _emit(value: Any) -> None:
    sys.stdout.write(orjson.dumps(value, default=repr).decode() + "\n")


def _report_skipped(state: Any) -> None:
    for skipped in getattr(state, "skipped", []):
        print(f"tasktrail: skipped line {skipped.line}: {skipped.reason}", file=sys.stderr)


def _replay(args: argparse.Namespace) -> int:
    from tasktrail.replay import replay

    state = replay(args.source, args.until, skip_invalid=args.skip_invalid)
    _report_skipped(state)
    if args.json:
        _emit(
            {
                **state.summary(),
                "live": [t.to_dict() for t in state.live.values()],
                "pending_wakeups": state.pending_wakeups,
                "skipped": [s.__dict__ for s in state.skipped],
            }
        )
        return EXIT_OK
    summary = state.summary()
    counts = ", ".join(f"{k} {v}" for k, v in summary["by_status"].items()) or "none"
    print(f"as of position {state.position} ({state.events} events): {summary['tasks']} tasks")
    print(f"  {counts}")
    if state.live:
        print(f"live tasks ({len(state.live)}):")
        for task in state.live.values():
            print(f"  {task.id:<24} {task.kind:<12} {task.status:<10} {_where(task)}")
    return EXIT_OK


def _where(task: Any) -> str:
    if task.status == "waiting":
        return f"on {','.join(task.on)} ({task.policy})"
    if task.status == "sleeping":
        return f"until {format_at(task.until)}"
    if task.status == "completing" and task.outcome is not None:
        return f"holding {task.outcome.status}"
    parts = [task.checkpoint.phase if task.checkpoint else ""]
    if task.mode:
        parts.append(f"mode={task.mode}")
    if task.abort_requested:
        parts.append("abort-marked")
    if task.restarts:
        parts.append(f"restarts={task.restarts}")
    return " ".join(p for p in parts if p)


def _diff(args: argparse.Namespace) -> int:
    from tasktrail.replay import diff, replay

    found = diff(replay(args.a, args.until_a), replay(args.b, args.until_b))
    if args.json:
        _emit(found.to_dict())
    else:
        print(found)
    return EXIT_PROBLEMS if found else EXIT_OK


def _verify(args: argparse.Namespace) -> int:
    from tasktrail.replay import replay, verify

    if args.skip_invalid:
        state = replay(args.source, skip_invalid=True, strict=False)
        _report_skipped(state)
        report = verify(state)
    else:
        report = verify(_existing(args.source))
    if args.json:
        _emit(report.to_dict())
    else:
        print(report)
    return EXIT_OK if report.ok else EXIT_PROBLEMS


def _export(args: argparse.Namespace) -> int:
    from tasktrail.replay import export

    count = export(_existing(args.store), args.out)
    if args.json:
        _emit({"events": count, "out": str(args.out)})
    else:
        print(f"exported {count} events to {args.out}")
    return EXIT_OK


def _import(args: argparse.Namespace) -> int:
    from tasktrail.replay import import_log

    count = import_log(args.log, args.store, skip_invalid=args.skip_invalid)
    if args.json:
        _emit({"events": count, "store": args.store})
    else:
        print(f"imported {count} events into {args.store}")
    return EXIT_OK


def _explain(args: argparse.Namespace) -> int:
    from tasktrail.replay import explain, replay

    steps = explain(replay(args.source, args.until), args.task)
    if args.json:
        for step in steps:
            _emit(step.to_dict())
        return EXIT_OK
    print(f"{args.task}: {len(steps)} events")
    for step in steps:
        print(f"  {step}")
    return EXIT_OK


def _trace(args: argparse.Namespace) -> int:
    from tasktrail.projections.trace import rebuild, to_otlp_json, write_otlp_json

    spans = rebuild(args.source, args.task)
    if args.out is None:
        _emit(to_otlp_json(spans))
        return EXIT_OK
    write_otlp_json(spans, args.out)
    traces = len({span.context.trace_id for span in spans if span.context is not None})
    print(f"wrote {len(spans)} spans ({traces} traces) to {args.out}")
    return EXIT_OK


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
