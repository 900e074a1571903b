"""The story of one task: the events that made its state, and the rule behind each."""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from typing import Any

from tasktrail.domain import Store, UnknownTask
from tasktrail.domain.tasks.describe import format_at, is_time_field, printable
from tasktrail.domain.tasks.restart_limit import DEFAULT_RESTART_LIMIT, RestartLimitChanged

from .across_archive import ArchiveArg, across_archive, refuse_without_store
from .state import SchedulerState, Until, fold, replay

_LIMIT = RestartLimitChanged.__name__
_CHUNKS = "ChunksEmitted"

_RULE_WORDS = {
    2: "the scheduler was closing",
    3: "an abort mark ends a run invocation",
    6: "an owner's cancellation cascades to live descendants (rule 6)",
    9: "recovery after a crash: running back to pending, one restart counted (rule 9)",
    10: "a close is not a crash: pending again, no restart counted (rule 10)",
    12: "an abort handler cut off restart_limit times ends faulted (rule 12)",
    13: "no definition can take it (rule 13)",
    23: "a failed phase is tried again after its backoff, until its attempts run out (rule 23)",
}


@dataclass(frozen=True)
class Step:
    """One event in a task's story."""

    position: int
    at: float
    event_type: str
    command: str
    rule: int | None
    status_before: str | None
    status_after: str | None
    why: str
    actor: str | None = None
    """Who did it, for an operator's act that said so (submit, abort, retry, fork, a
    setting); ``None`` otherwise, and for events recorded before acts were kept."""
    reason: str | None = None
    """Why, in the actor's words."""

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)

    def __str__(self) -> str:
        move = (
            f"{self.status_before or '-'} -> {self.status_after}"
            if self.status_before != self.status_after
            else f"stays {self.status_after}"
        )
        return printable(
            f"{self.position:>6}  {format_at(self.at)}  {self.event_type:<20} {move:<24} {self.why}"
        )


def explain(
    source: SchedulerState | str | os.PathLike[str] | Store,
    task_id: str,
    *,
    archive: ArchiveArg = None,
) -> list[Step]:
    """Every event of ``task_id``, oldest first, with the command or rule behind it.
    ``archive``: the store's archive folder, its events read in place (a state is
    refused with it: folded already)."""
    if isinstance(source, SchedulerState):
        if archive is not None:
            refuse_without_store(source)
        state = source
    else:
        state = replay(source, archive=archive)
    rows = [r for r in state.audit if r["task_id"] == task_id or r["event_type"] == _LIMIT]
    steps: list[Step] = []
    limit, marked = DEFAULT_RESTART_LIMIT, False
    run: list[dict[str, Any]] = []  # a stream's chunks in a row: one step, summed
    for row in rows:
        if row["event_type"] == _LIMIT:
            limit = _detail(row).get("limit", limit)  # in force from here on
            continue
        if row["event_type"] == _CHUNKS:
            detail = _detail(row)
            if run and _detail(run[0]).get("stream") == detail.get("stream"):
                steps.pop()
            else:
                run = []
            run.append(row)
            steps.append(_chunks_step(run))
            continue
        run = []
        step = _step(row)
        # An abort mark (or abandon_on_restart, marked by the same recovery) is never
        # parked: rule 12 decides it, as recovery's own parked list says.
        marked = marked or row["event_type"] == "AbortMarked"
        if row["event_type"] == "TaskSubmitted" and _detail(row).get("abandon_on_restart"):
            marked = True
        restarts = _detail(row).get("restarts") if row["event_type"] == "TaskRecovered" else None
        if isinstance(restarts, int) and not marked and restarts >= limit:
            # 9. Parked by the limit the log recorded by then, as the scheduler was.
            why = f"{step.why}; restarts {restarts} >= restart_limit {limit}: parked"
            step = replace(step, why=why)
        steps.append(step)
    if not steps:
        raise UnknownTask(task_id)
    return steps


def story(
    source: str | os.PathLike[str] | Store,
    task_id: str,
    until: int | float | str | Until | None = None,
    *,
    archive: ArchiveArg = None,
) -> list[Step]:
    """What :func:`explain` tells of ``task_id``, read from that task's tree only (its
    owners, itself, what it owns and awaited), never the whole log: its cost follows
    the task, not the history. ``until`` (a position or a time) stops within those
    streams, as it would in the whole log. ``archive``: the store's archive folder,
    the tree's archived events read in place."""
    from tasktrail.projections import AuditTrail

    from .report.tree import open_streams, read_tree  # the report imports this module

    with across_archive(archive, source), open_streams(source) as streams:
        read = read_tree(streams, task_id)
    state = fold(read.records, until=Until.parse(until), projections=[AuditTrail()])
    return explain(state, task_id)


def held_now(source: str | os.PathLike[str] | Store, task_id: str) -> Any:
    """What holds ``task_id`` back now (rules 33, 34: a :class:`~tasktrail.domain.HeldBack`),
    from the store's live work (its latest snapshot and the events after it) and the
    keys the log recorded for the task, on the wall clock; ``None`` when nothing does,
    the task ended, or ``source`` is an export (a record of the past, not a store)."""
    import time

    from tasktrail.domain import open_store
    from tasktrail.domain.history import restore
    from tasktrail.domain.tasks.limits import held_back_now
    from tasktrail.domain.tasks.restart_limit import restart_limit_of

    from .log import is_jsonl

    if not isinstance(source, Store) and is_jsonl(source):
        return None
    store = source if isinstance(source, Store) else open_store(source, read_only=True)
    try:
        world = restore(store).world
    finally:
        if store is not source:
            store.close()
    task = world.tasks.get(task_id)
    if task is None or task.flow is None:
        return None
    return held_back_now(world, task, time.time() * 1000.0, restart_limit_of(world))


def _detail(row: dict[str, Any]) -> dict[str, Any]:
    detail = row.get("detail") or {}
    if isinstance(detail, str):
        import orjson

        detail = orjson.loads(detail)
    return dict(detail)


def _step(row: dict[str, Any]) -> Step:
    rule = row["rule"]
    detail = _detail(row)
    if rule == 5 and row["event_type"] == "OutcomeHeld":
        why = f"finish(status={detail.get('status')}): held while it owns live tasks (rule 5)"
    elif rule == 5 and row["event_type"] == "TaskEnded":
        why = f"its last owned task ended: the held {detail.get('status')} stands (rule 5)"
    elif rule is not None:
        why = _RULE_WORDS.get(rule, f"rule {rule}")
        if rule == 6 and detail.get("by"):
            why += f", from {detail['by']}"
    elif row["event_type"] == "TaskForked":
        why = _forked(detail)
    else:
        why = (
            f"{row['command']}("
            + ", ".join(
                f"{k}={format_at(v) if is_time_field(k) else v}"
                for k, v in detail.items()
                if v not in (None, [], {}, False)
            )
            + ")"
        )
    actor, reason = row.get("actor"), row.get("reason")
    if actor is not None or reason is not None:
        why += f" by {actor or 'someone unnamed'}" + (f": {reason}" if reason else "")
    if row.get("refused"):
        why = f"refused, not applied: {why}"
    return Step(
        position=row["position"],
        at=row["at"],
        event_type=row["event_type"],
        command=row["command"],
        rule=rule,
        status_before=row["status_before"],
        status_after=row["status_after"],
        why=why,
        actor=actor if isinstance(actor, str) else None,
        reason=reason if isinstance(reason, str) else None,
    )


def _chunks_step(run: list[dict[str, Any]]) -> Step:
    """A run of one stream's :class:`ChunksEmitted` rows as one step: the stream is
    summarized (offsets, chunks, bytes, events), never listed chunk by chunk."""
    details = [_detail(row) for row in run]
    chunks = sum(len(d.get("values") or ()) for d in details)
    size = sum(d.get("size") or 0 for d in details)
    first, stream = details[0].get("first", 0), details[0].get("stream")
    events = f" in {len(run)} events" if len(run) > 1 else ""
    plural = "" if chunks == 1 else "s"
    return Step(
        position=run[0]["position"],
        at=run[0]["at"],
        event_type=_CHUNKS,
        command="emit",
        rule=None,
        status_before=run[0]["status_before"],
        status_after=run[-1]["status_after"],
        why=(
            f"emit to stream {stream!r}: {chunks} chunk{plural} at offsets {first}-"
            f"{first + chunks - 1}, {size} bytes{events}"
        ),
    )


def _forked(detail: dict[str, Any]) -> str:
    """A fork's lineage in words."""
    return (
        f"fork of {detail.get('source_id')}: its checkpoint and memos as it stood at "
        f"position {detail.get('source_position')}"
    )
