"""The ``tasktrail`` commands that fold a log back into scheduler state without
touching it: ``replay`` shows the state as of a position or time, ``diff`` compares
two states task by task, ``verify`` checks the rules' invariants over a state, and
``explain`` tells one task's story with the rule behind each event. Each command is
a parser builder ``add_<name>`` and a handler ``do_<name>``.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from tasktrail.domain.tasks.describe import format_at

from .common import EXIT_OK, EXIT_PROBLEMS, SKIP_HELP, SOURCE_HELP, UNTIL_HELP, emit, existing


def add_replay(commands: Any) -> None:
    replay = commands.add_parser(
        "replay",
        help="fold a log into scheduler state, as of a position or time",
        description=(
            "Fold a log into scheduler state without touching it, and show the tasks "
            "that were live then. --until stops after a position or at a clock time."
        ),
    )
    replay.add_argument("source", help=SOURCE_HELP)
    replay.add_argument("--until", metavar="N|TIME", help=UNTIL_HELP)
    replay.add_argument("--json", action="store_true", help="the state as JSON")
    replay.add_argument("--skip-invalid", action="store_true", help=SKIP_HELP)


def add_diff(commands: Any) -> None:
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
    diff.add_argument("--until-a", metavar="N|TIME", help=UNTIL_HELP)
    diff.add_argument("--until-b", metavar="N|TIME", help=UNTIL_HELP)
    diff.add_argument("--json", action="store_true", help="the differences as JSON")


def add_verify(commands: Any) -> None:
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


def add_explain(commands: Any) -> None:
    explain = commands.add_parser(
        "explain",
        help="the story of one task: its events and the rule behind each",
        description="Every event that made a task's state, with the command or rule behind it.",
    )
    explain.add_argument("source", help=SOURCE_HELP)
    explain.add_argument("task", help="the task id")
    explain.add_argument("--until", metavar="N|TIME", help=UNTIL_HELP)
    explain.add_argument(
        "--json", action="store_true", help="JSON Lines: one JSON object per step, a line each"
    )


def _report_skipped(state: Any) -> None:
    for skipped in getattr(state, "skipped", []):
        print(f"tasktrail: skipped line {skipped.line}: {skipped.reason}", file=sys.stderr)


def do_replay(args: argparse.Namespace) -> int:
    from tasktrail.replay import replay

    state = replay(args.source, args.until, skip_invalid=args.skip_invalid)
    _report_skipped(state)
    if args.json:
        emit(
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


def do_diff(args: argparse.Namespace) -> int:
    from tasktrail.replay import diff, replay

    found = diff(replay(args.a, args.until_a), replay(args.b, args.until_b))
    if args.json:
        emit(found.to_dict())
    else:
        print(found)
    return EXIT_PROBLEMS if found else EXIT_OK


def do_verify(args: argparse.Namespace) -> int:
    from tasktrail.replay import replay, verify

    if args.skip_invalid:
        state = replay(args.source, skip_invalid=True, strict=False)
        _report_skipped(state)
        report = verify(state)
    else:
        report = verify(existing(args.source))
    if args.json:
        emit(report.to_dict())
    else:
        print(report)
    return EXIT_OK if report.ok else EXIT_PROBLEMS


def do_explain(args: argparse.Namespace) -> int:
    from tasktrail.replay import explain, replay

    steps = explain(replay(args.source, args.until), args.task)
    if args.json:
        for step in steps:
            emit(step.to_dict())
        return EXIT_OK
    print(f"{args.task}: {len(steps)} events")
    for step in steps:
        print(f"  {step}")
    return EXIT_OK
