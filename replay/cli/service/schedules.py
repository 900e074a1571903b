"""``tasktrail schedules STORE``: the live schedules (read only), and the write commands
``tasktrail schedule`` and ``unschedule``, which act as ``submit`` does
(:mod:`..act_commands`: a short-lived worker of their own, ``--actor``, ``--reason``)."""

from __future__ import annotations

import argparse
from datetime import UTC, datetime
from typing import Any

from tasktrail.domain import CronSchedule, InvalidArgument, open_store

from ..act_commands import _act, _act_arguments, _memos, _report, _who_and_why, acting
from ..common import EXIT_OK, STORE_HELP, emit, say

HEADER = f"{'NAME':<24} {'KIND':<16} {'CRON':<16} {'TZ':<16} {'NEXT TICK (UTC)':<20} SUBMITTED"


def add_schedules(commands: Any) -> None:
    schedules = commands.add_parser(
        "schedules",
        help="the live schedules: each name, kind, cron, zone and next tick",
        description=(
            "List the live schedules of a store, by name, one a line under a header: "
            "the kind each tick submits, the cron expression and the time zone it is read "
            "in, the next tick (UTC) and the tasks submitted so far. The store is only "
            "read (the latest snapshot and the events after it)."
        ),
    )
    schedules.add_argument("store", help=STORE_HELP)
    schedules.add_argument("--json", action="store_true", help="JSON Lines: a schedule a line")


def add_schedule(commands: Any) -> None:
    schedule = commands.add_parser(
        "schedule",
        help="submit a task of KIND at each tick of a cron expression (rules 26, 27)",
        description=(
            "Record the schedule NAME: a worker of the store submits a task of KIND at "
            "each tick of --cron read in --tz, one a tick across the fleet (its id "
            "sched:NAME:<tick ms>). The command line has no registry: give --phase (and "
            "--version if its definition is newer than 1). Recording the same schedule "
            "again records nothing; a changed one is recorded whole."
        ),
    )
    _act_arguments(schedule)
    schedule.add_argument("name", help="the schedule's name")
    schedule.add_argument("kind", help="the kind of the tasks it submits")
    schedule.add_argument("--cron", default="*/5 * * * *", help="default '*/5 * * * *'")
    schedule.add_argument("--tz", default="UTC", help="an IANA time zone (default UTC)")
    schedule.add_argument("--phase", metavar="P", required=True, help="the phase tasks start at")
    schedule.add_argument("--version", type=int, metavar="N", help="definition version (1)")
    schedule.add_argument(
        "--catch-up",
        action="store_true",
        help="after downtime, submit each missed tick (the latest 100), not only the latest",
    )
    schedule.add_argument(
        "--memo",
        action="append",
        default=[],
        metavar="NAME=JSON",
        help="a memo each task starts with",
    )
    _who_and_why(schedule)


def add_unschedule(commands: Any) -> None:
    unschedule = commands.add_parser(
        "unschedule",
        help="remove a schedule: no tick submits a task after it (rule 27)",
        description="Remove the live schedule NAME; the tasks it submitted stay.",
    )
    _act_arguments(unschedule)
    unschedule.add_argument("name", help="the schedule's name")
    _who_and_why(unschedule)


def _when(at: float) -> str:
    return datetime.fromtimestamp(at / 1000, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _line(schedule: CronSchedule) -> str:
    return (
        f"{schedule.name:<24} {schedule.kind:<16} {schedule.cron:<16} {schedule.tz:<16} "
        f"{_when(schedule.next_at):<20} {schedule.submitted}"
    )


def do_schedules(args: argparse.Namespace) -> int:
    from tasktrail.domain.history import restore
    from tasktrail.domain.schedules.events import schedule_stream_id
    from tasktrail.domain.schedules.state import live_schedules

    with open_store(args.store, read_only=True) as store:
        world = restore(store).world  # read only: nothing appended
        found = [world.stream(schedule_stream_id(name)) for name in sorted(live_schedules(world))]
    if args.json:
        for schedule in found:
            emit(schedule.to_dict())
        return EXIT_OK
    say(HEADER if found else "no live schedule")
    for schedule in found:
        say(_line(schedule))
    return EXIT_OK


def do_schedule(args: argparse.Namespace) -> int:
    actor, reason = _act(args)
    memos = _memos(args.memo)
    if args.version is not None and args.version < 1:
        raise InvalidArgument(f"--version must be 1 or more, not {args.version}")
    with acting(args.store, actor) as scheduler:
        recorded = scheduler.schedule(
            args.name,
            args.kind,
            cron=args.cron,
            tz=args.tz,
            memos=memos or None,
            catch_up=args.catch_up,
            phase=args.phase,
            version=args.version,
            actor=actor,
            reason=reason,
        )
    record = {"act": "schedule", **recorded.to_dict(), "actor": actor, "reason": reason}
    line = f"scheduled {recorded.name}: {recorded.kind} at '{recorded.cron}' ({recorded.tz}), "
    return _report(args, line + f"next tick {_when(recorded.next_at)}", record)


def do_unschedule(args: argparse.Namespace) -> int:
    actor, reason = _act(args)
    with acting(args.store, actor) as scheduler:
        scheduler.unschedule(args.name, actor=actor, reason=reason)
    record = {"act": "unschedule", "name": args.name, "actor": actor, "reason": reason}
    return _report(args, f"unscheduled {args.name} by {actor}", record)
