"""The decisions of schedules, each a pure ``fn(draft, ctx, ...)`` (rules 26 and 27).

Rule 26: a schedule reads as a cron expression cronsim parses and that ever ticks, in
a time zone ``zoneinfo`` knows; else it is refused and nothing is appended.
Rule 27: one task a tick, across a fleet: a tick's task has the id
:func:`~.events.tick_task_id` (the schedule's name and the tick's time), so a worker
that submits a tick another has submitted finds the id taken and submits nothing; the
tick and its tasks are one append, guarded by the schedule stream's version. After
downtime, ``catch_up`` off submits the latest missed tick, on each of them, the latest
:data:`~.cron.CATCH_UP_LIMIT` at most. ``unschedule`` names a live schedule.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from ..errors import InvalidArgument, RuleViolation
from ..frozen import thawed
from ..tasks.context import Context
from ..tasks.fields import MAX_NAME_BYTES
from ..tasks.guards import not_closing
from ..tasks.starting import submit
from ..tasks.validation import act_fields, json_value, phase_name
from ..world import Draft
from .cron import check_cron, due_ticks, next_tick, zone
from .events import (
    ScheduleRecorded,
    ScheduleRemoved,
    ScheduleTicked,
    schedule_stream_id,
    tick_task_id,
)
from .state import CronSchedule

MAX_SCHEDULE_NAME_BYTES = MAX_NAME_BYTES - 32
"""A name leaves room in a task id for ``sched:`` and the tick's time."""


def schedule_name(name: object) -> str:
    """``name`` if it can name a schedule (and, with a tick's time, a task id)."""
    checked = phase_name(name, "schedule name", None)
    if len(checked.encode()) > MAX_SCHEDULE_NAME_BYTES:
        raise InvalidArgument(
            f"a schedule name is at most {MAX_SCHEDULE_NAME_BYTES} bytes, not {checked!r}"
        )
    return checked


def schedule_of(draft: Draft, name: str) -> CronSchedule | None:
    """The schedule named ``name`` as the decision sees it (a removed one included)."""
    state = draft.get_stream(schedule_stream_id(name))
    return state if isinstance(state, CronSchedule) else None


def _memos(memos: object) -> dict[str, Any] | None:
    if memos is None:
        return None
    if not isinstance(memos, Mapping):
        raise InvalidArgument(f"memos must be a mapping of names, not {memos!r}")
    return {
        phase_name(key, "memo name", None): json_value(value, f"memo {key!r}", None)
        for key, value in memos.items()
    } or None


def record_schedule(
    draft: Draft,
    ctx: Context,
    *,
    name: str,
    kind: str,
    phase: str,
    version: int,
    cron: str,
    tz: str,
    catch_up: bool,
    memos: Mapping[str, Any] | None = None,
    actor: str | None = None,
    why: str | None = None,
) -> bool:
    """Record the schedule ``name`` (rule 26 checks ``cron`` and ``tz``): nothing when a
    live schedule of that name is recorded the same way already. Returns whether it
    recorded it."""
    not_closing(ctx, None)
    name = schedule_name(name)
    phase_name(kind, "kind", None)
    phase_name(phase, "phase", None)
    if isinstance(version, bool) or not isinstance(version, int) or version < 1:
        raise InvalidArgument(f"version must be an int >= 1, not {version!r}")
    if not isinstance(catch_up, bool):
        raise InvalidArgument(f"catch_up must be True or False, not {catch_up!r}")
    # 26. A cron expression cronsim reads and that ever ticks, in a zone zoneinfo knows.
    check_cron(cron, tz)
    checked = _memos(memos)
    act = act_fields(actor, why, None)
    fields: dict[str, Any] = {"kind": kind, "phase": phase, "version": version, "cron": cron}
    fields.update(tz=tz, catch_up=catch_up, memos=checked)
    known = schedule_of(draft, name)
    if known is not None and known.live:
        same = {k: getattr(known, k) for k in fields}
        if {**same, "memos": thawed(known.memos)} == fields:
            return False  # a service recording its schedules at each start: appends nothing
    at = ctx.now
    draft.emit_stream(
        ScheduleRecorded(
            task_id="", at=at, name=name, next_at=next_tick(cron, tz, at), **fields, **act
        )
    )
    return True


def remove_schedule(
    draft: Draft, ctx: Context, name: str, *, actor: str | None = None, why: str | None = None
) -> None:
    """Remove the live schedule ``name`` (rule 27: one that is not live is refused)."""
    not_closing(ctx, None)
    name = schedule_name(name)
    act = act_fields(actor, why, None)
    known = schedule_of(draft, name)
    if known is None or not known.live:
        raise RuleViolation(
            27, f"no live schedule named {name!r} (tasktrail schedules STORE lists them)"
        )
    draft.emit_stream(ScheduleRemoved(task_id="", at=ctx.now, name=name, **act))


def tick_schedule(draft: Draft, ctx: Context, name: str) -> list[str]:
    """Submit a task for each due tick of the schedule ``name`` (rule 27): none when it
    is not due (another worker ticked it). Returns the ids submitted."""
    not_closing(ctx, None)
    schedule = schedule_of(draft, name)
    if schedule is None or not schedule.live or schedule.next_at > ctx.now:
        return []
    ticks = due_ticks(
        schedule.cron, schedule.tz, schedule.next_at, ctx.now, catch_up=schedule.catch_up
    )
    submitted = []
    for tick in ticks:
        task_id = tick_task_id(name, tick)
        # 27. A tick submitted already (its id taken) is not submitted again.
        if draft.get(task_id) is not None:
            continue
        local = datetime.fromtimestamp(tick / 1000, UTC).astimezone(zone(schedule.tz))
        submit(
            draft,
            ctx,
            task_id=task_id,
            kind=schedule.kind,
            version=schedule.version,
            phase=schedule.phase,
            memos=thawed(schedule.memos),
            actor=f"schedule:{name}",
            why=f"the tick of {schedule.cron!r} at {local.isoformat()}",
        )
        submitted.append(task_id)
    draft.emit_stream(
        ScheduleTicked(
            task_id="",
            at=ctx.now,
            name=name,
            due_at=schedule.next_at,
            tick_at=ticks[-1],
            submitted=len(submitted),
            next_at=next_tick(schedule.cron, schedule.tz, max(ticks[-1], ctx.now)),
        )
    )
    return submitted
