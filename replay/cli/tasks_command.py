"""``tasktrail tasks STORE``: a store's tasks and their status, filtered as an operator
asks (kind, status, outcome, submission time, how many), under a header line; a line
says so when nothing matched. ``--json`` prints JSON Lines only: no header, no note.

The live tasks come from the latest snapshot and the events after it (the cost follows
the live work); ended ones (``--all``, ``--status terminal``, ``--outcome``) only from
the whole log, folded from position 0. The store is only read.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Iterable, Iterator
from datetime import UTC, date, datetime
from typing import Any

from tasktrail.domain import InvalidArgument, TaskState, open_store
from tasktrail.domain.tasks.describe import format_at

from .common import EXIT_OK, STORE_HELP, emit, report_start, say, warn

STATUSES = ("pending", "running", "waiting", "sleeping", "completing", "terminal")
OUTCOMES = ("completed", "failed", "faulted", "aborted", "orphaned")
TIME_HELP = "ISO-8601 with a zone (2026-01-05T09:00:00Z) or a date (UTC midnight)"
HEADER = f"{'TASK':<36} {'KIND':<12} {'STATUS':<10} PHASE / OUTCOME"

DESCRIPTION = """\
List the tasks of a store, in submission order, one a line under a header:
id, kind, status, and the phase a live task is at (or the outcome it holds),
then its priority where it is not 0 (rule 19; JSON: "priority"), a live
task's flow-control keys (limit=KEY rate=KEY; JSON: "flow"), and what holds a
pending task back now: its limit key's slots all taken (limited, rule 33) or
its rate key's bucket empty (rate_limited, rule 34), with the key (JSON:
"held_back").
By default the live tasks (every task not ended), read from the store's latest
snapshot and the events after it, so the cost follows the live work. --all,
--status terminal and --outcome fold the whole log from position 0 (snapshots
hold only live work). A task parked at the restart limit the log recorded
(rule 9) is shown parked (JSON: "blocked": "restart_limit"). When nothing
matches, a line says so (exit 0). The store is only read.

examples:
  tasktrail tasks trail.db                            the live tasks
  tasktrail tasks trail.db --kind research --status waiting
  tasktrail tasks trail.db --outcome failed --since 2026-01-05 --limit 20
  tasktrail tasks trail.db --all --json | jq -c 'select(.restarts > 0)'
"""


def time_argument(text: str) -> float:
    """A time on the command line, as ms since the epoch: an ISO-8601 time with a zone,
    or a date (midnight UTC). argparse names the flag when this raises."""
    try:
        if len(text) == 10 and text[4] == "-":
            day = date.fromisoformat(text)
            return datetime(day.year, day.month, day.day, tzinfo=UTC).timestamp() * 1000.0
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a time: give ISO-8601 (2026-01-05T09:00:00Z) or a date (2026-01-05)"
        ) from None
    if moment.tzinfo is None:
        raise argparse.ArgumentTypeError(f"{text!r} needs a time zone (say Z for UTC)")
    return moment.timestamp() * 1000.0


def positive_int(text: str) -> int:
    """A count of at least 1 on the command line."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} is not at least 1")
    return value


def add_tasks(commands: Any) -> None:
    tasks = commands.add_parser(
        "tasks",
        help="a store's tasks and their status: live ones, or filtered (--all: every task)",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    tasks.add_argument("store", help=STORE_HELP)
    tasks.add_argument("--kind", metavar="KIND", help="only tasks of this kind")
    tasks.add_argument(
        "--status",
        choices=STATUSES,
        help="only the tasks in this status (terminal: the ended ones, from the whole log)",
    )
    tasks.add_argument(
        "--outcome",
        choices=OUTCOMES,
        help="only the tasks holding this outcome, ended or completing (from the whole log)",
    )
    tasks.add_argument(
        "--since",
        type=time_argument,
        metavar="TIME",
        help=f"only tasks submitted at or after TIME: {TIME_HELP}",
    )
    tasks.add_argument(
        "--until",
        type=time_argument,
        metavar="TIME",
        help="only tasks submitted at or before TIME (the same forms as --since)",
    )
    tasks.add_argument(
        "--limit",
        type=positive_int,
        metavar="N",
        help="at most N tasks, the first submitted; a last line says how many more matched",
    )
    tasks.add_argument(
        "--all",
        action="store_true",
        help="every task, ended ones too (folds the whole log from position 0)",
    )
    tasks.add_argument(
        "--json",
        action="store_true",
        help="JSON Lines: one JSON object per task, a line each (no header, no notes)",
    )


def do_tasks(args: argparse.Namespace) -> int:
    from tasktrail.domain.history import restore
    from tasktrail.domain.tasks.definitions import parked_now
    from tasktrail.domain.tasks.limits import held_back_now
    from tasktrail.domain.tasks.restart_limit import restart_limit_of

    if args.since is not None and args.until is not None and args.since > args.until:
        raise InvalidArgument("--since is after --until: no task could match")
    # Ended tasks are only in the whole log (a snapshot holds live work): fold it from
    # 0 when they are asked for; else the latest snapshot and the tail suffice.
    ended = args.all or args.status == "terminal" or args.outcome is not None
    shown = more = 0
    with open_store(args.store, read_only=True) as store:
        restored = restore(store, snapshots=not ended)  # read only: nothing appended
        report_start(restored.snapshot, restored.problems, restored.position)
        world = restored.world
        limit = restart_limit_of(world)  # the one the log recorded, as the workers decide
        now = time.time() * 1000.0  # a rate's bucket fills on the clock: as of now
        for task in _matching(world.tasks.values(), args, ended):
            if args.limit is not None and shown >= args.limit:
                more += 1
                continue
            if shown == 0 and not args.json:
                say(HEADER)
            shown += 1
            parked = parked_now(task, limit)
            held = held_back_now(world, task, now, limit) if task.flow is not None else None
            if args.json:
                row = task.to_dict()
                if parked:
                    row["blocked"] = "restart_limit"
                if held is not None:
                    row["held_back"] = held.to_dict()
                emit(row)
            else:
                outcome = task.outcome.status if task.outcome else ""
                phase = task.checkpoint.phase if task.checkpoint else ""
                where = f"{phase} parked (restart_limit {limit})" if parked else outcome or phase
                if task.priority:  # rule 19: shown where it is not the normal 0
                    where = f"{where} priority {task.priority}"
                if task.flow is not None and task.live:  # rules 33, 34: its recorded keys
                    keys = task.flow.to_dict()
                    named = " ".join(f"{name}={policy['key']}" for name, policy in keys.items())
                    where = f"{where} {named}" if named else where
                if held is not None:  # computed, as of now
                    where = f"{where} {_held(held)}"
                say(f"{task.id:<36} {task.kind:<12} {task.status:<10} {where.strip()}")
    if more:
        note = f"{more} more matched (raise --limit to see them)"
        if args.json:
            warn(note)  # stdout stays JSON Lines
        else:
            say(f"... {note}")
    elif shown == 0 and not args.json:
        say(_nothing(args, ended))
    return EXIT_OK


def _held(held: Any) -> str:
    """A held-back reason on a task's line: ``limited acme (3/3)``, ``rate_limited gpt``."""
    if held.reason == "limited":
        return f"{held.reason} {held.key} ({held.running}/{held.max_running} running)"
    return f"{held.reason} {held.key} (next token {format_at(held.next_at)})"


def _matching(
    tasks: Iterable[TaskState], args: argparse.Namespace, ended: bool
) -> Iterator[TaskState]:
    for task in tasks:
        if not ended and task.status == "terminal":
            continue  # ended in the tail, not yet dropped by a snapshot
        if args.status is not None and task.status != args.status:
            continue
        if args.kind is not None and task.kind != args.kind:
            continue
        outcome = task.outcome.status if task.outcome is not None else None
        if args.outcome is not None and outcome != args.outcome:
            continue
        if args.since is not None and task.submitted_at < args.since:
            continue
        if args.until is not None and task.submitted_at > args.until:
            continue
        yield task


def _nothing(args: argparse.Namespace, ended: bool) -> str:
    """The line a listing with no task says, naming what was asked."""
    asked = [
        f"--{name} {value}"
        for name, value in (("kind", args.kind), ("status", args.status), ("outcome", args.outcome))
        if value is not None
    ]
    asked += [
        f"--{name} {format_at(getattr(args, name))}"
        for name in ("since", "until")
        if getattr(args, name) is not None
    ]
    scope = "task" if ended else "live task"
    if not asked:
        tail = "" if ended else " (--all lists the ended ones too)"
        return f"no {scope} in this store{tail}"
    return f"no {scope} matches {' '.join(asked)}"
