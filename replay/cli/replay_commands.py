"""The ``tasktrail`` commands that fold a log back into scheduler state without
touching it: ``replay`` shows the state as of a position or time, ``diff`` compares
two states task by task, ``verify`` checks the rules' invariants over a state, and
``explain`` tells one task's story with the rule behind each event. Each command is
a parser builder ``add_<name>`` and a handler ``do_<name>``. Every source is read
read-only; human output is escaped, ``--json`` exact.
"""

from __future__ import annotations

import argparse
from typing import Any

from tasktrail.domain.tasks.describe import format_at, waiting_for_message

from .common import (
    EXIT_BAD_INPUT,
    EXIT_OK,
    EXIT_PROBLEMS,
    EXIT_UNCHECKED,
    SKIP_HELP,
    SOURCE_HELP,
    UNTIL_HELP,
    emit,
    report_start,
    say,
    task_id_argument,
    until_argument,
    warn,
)
from .seal_command import add_key_file, key_argument


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
            "memos, ...), and the digest chain: an edited, removed, reordered or forged "
            "event is reported with its position (events recorded before the chain count "
            "as unchained). Each violation names its positions. Exits 1 on any violation, "
            "2 when the log cannot be read to its end (a corrupt, unknown or newer event), "
            "4 when nothing is wrong but a keyed store's digests (or seals' MACs) could not "
            "be checked for want of its key."
        ),
    )
    verify.add_argument("source", help=SOURCE_HELP)
    verify.add_argument(
        "--against",
        metavar="EXPORT",
        help="an export kept apart: every stream head it recorded must still be in the log",
    )
    verify.add_argument(
        "--seals",
        metavar="FILE",
        help="seals kept apart (tasktrail seal's lines, or an export): the log must extend each",
    )
    add_key_file(verify)
    verify.add_argument("--json", action="store_true", help="the report as JSON")
    verify.add_argument("--skip-invalid", action="store_true", help=SKIP_HELP)


def add_explain(commands: Any) -> None:
    explain = commands.add_parser(
        "explain",
        help="the story of one task: its events and the rule behind each",
        description=(
            "Every event that made a task's state, with the command or rule behind it. "
            "Reads only that task's streams and its owner tree, never the whole log; "
            "--until stops at a position or a time within them. A live task with flow "
            "keys (rules 33, 34) is also said to be held back, if it is, as of now: "
            "that reads the store's live work (its latest snapshot and the tail)."
        ),
    )
    explain.add_argument("source", help=SOURCE_HELP)
    explain.add_argument("task", help="the task id")
    explain.add_argument("--until", metavar="N|TIME", help=UNTIL_HELP)
    explain.add_argument(
        "--json", action="store_true", help="JSON Lines: one JSON object per step, a line each"
    )


def _report_skipped(state: Any) -> None:
    for skipped in getattr(state, "skipped", []):
        # A store's row: the reason names its position ("event at position N: ...").
        where = f" line {skipped.line}:" if skipped.line is not None else ""
        warn(f"skipped{where} {skipped.reason}")


def do_replay(args: argparse.Namespace) -> int:
    from tasktrail.replay import replay

    # Nothing here prints the audit trail: its row per event is not kept. Skipping
    # what cannot be read, it also goes on past what then cannot be applied (a later
    # event of a stream that lost one), and says so.
    lenient = args.skip_invalid
    state = replay(
        args.source,
        until_argument(args.until),
        skip_invalid=lenient,
        strict=not lenient,
        audit=False,
    )
    _report_skipped(state)
    report_start(state.snapshot, state.snapshot_problems, state.position)
    for problem in state.problems:
        at = "" if problem.message.startswith("event at") else f"position {problem.position}: "
        warn(f"not applied: {at}{problem.message}")
    if args.json:
        emit(
            {
                **state.summary(),
                "snapshot": state.snapshot,
                "snapshot_problems": state.snapshot_problems,
                "restart_limit": state.restart_limit,
                "parked": state.parked,
                "live": [t.to_dict() for t in state.live.values()],
                "pending_wakeups": state.pending_wakeups,
                "skipped": [s.__dict__ for s in state.skipped],
                "problems": [p.__dict__ for p in state.problems],
            }
        )
        return EXIT_OK
    summary = state.summary()
    counts = ", ".join(f"{k} {v}" for k, v in summary["by_status"].items()) or "none"
    say(f"as of position {state.position} ({state.events} events): {summary['tasks']} tasks")
    say(f"  {counts}")
    if state.live:
        say(f"live tasks ({len(state.live)}):")
        parked = set(state.parked)
        for task in state.live.values():
            where = _where(task)
            if task.id in parked:
                where += f" parked (restart_limit {state.restart_limit})"
            say(f"  {task.id:<24} {task.kind:<12} {task.status:<10} {where.strip()}")
    return EXIT_OK


def _where(task: Any) -> str:
    if task.status == "waiting" and task.message_topic is not None:
        return f"for {waiting_for_message(task)}"
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

    found = diff(
        replay(args.a, until_argument(args.until_a)), replay(args.b, until_argument(args.until_b))
    )
    if args.json:
        emit(found.to_dict())
    else:
        for line in str(found).splitlines():
            say(line)
    return EXIT_PROBLEMS if found else EXIT_OK


def do_verify(args: argparse.Namespace) -> int:
    from tasktrail.replay import replay, verify

    if args.skip_invalid:
        _report_skipped(replay(args.source, skip_invalid=True, strict=False, audit=False))
    report = verify(
        args.source,
        against=args.against,
        skip_invalid=args.skip_invalid,
        chain_key=key_argument(args),
        seals=args.seals,
    )
    if report.unreadable:
        # Not a finding about the log's history: the log itself cannot be read.
        for violation in report.violations:
            warn(violation.message)
        if args.json:
            emit(report.to_dict())
        return EXIT_BAD_INPUT
    if args.json:
        emit(report.to_dict())
    else:
        for line in report.lines():
            say(line)
    if report.violations:
        return EXIT_PROBLEMS
    return EXIT_UNCHECKED if report.unchecked else EXIT_OK


def do_explain(args: argparse.Namespace) -> int:
    from tasktrail.replay import story
    from tasktrail.replay.explain import held_now

    task_id = task_id_argument(args.task)
    # The task's tree, read stream by stream: the cost follows the task, not the log.
    steps = story(args.source, task_id, until_argument(args.until))
    if args.json:
        for step in steps:
            emit(step.to_dict())
        return EXIT_OK
    say(f"{task_id}: {len(steps)} events")
    for step in steps:
        say(f"  {step}")
    keyed = any(step.event_type == "FlowKeysRecorded" for step in steps)
    if args.until is None and keyed and steps[-1].status_after != "terminal":
        # Rules 33, 34: computed now, never recorded, from the store's live work (its
        # latest snapshot and the tail): only for a live task with flow keys.
        held = held_now(args.source, task_id)
        if held is not None:
            say(f"  now held back, {held}")
    return EXIT_OK
