"""Rules 33 and 34: a limit and a rate hold a task back from a phase, across a fleet.

A task whose keys say so (``TaskState.flow``, :mod:`.flow`) is *held back*, a computed
pending reason as rule 13's are, never stored: ``limited`` while ``max_running`` tasks
of its kind with its limit key run a phase (the world's ``flow_running`` index), and
``rate_limited`` while its rate key's bucket holds no whole token at the decision's
time (the bucket's stream, filled on the scheduler clock from the last token taken).
:func:`take_flow` is what a reservation in ``run`` mode adds: refused (rule 33, 34)
while held back, else it appends to each key's stream (:class:`~.flow_events.LimitSlotTaken`,
:class:`~.flow_events.RateTokenTaken`) in the reservation's own append, at the stream's
next version; that version is what keeps two workers off the last slot or token at
once (docs/fleet.md). An abort handler is not a phase: neither rule holds it back.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

from ..errors import InvalidFlowPolicy, RuleViolation
from ..world import Draft, World
from .definitions import Registry
from .describe import format_at
from .flow import LIMIT_PREFIX, RATE_PREFIX, flow_for, flow_stream_id
from .flow_events import FlowKeysRecorded, LimitSlotTaken, RateTokenTaken, running_under
from .state import Flow, RateState, TaskState

TOKEN_EPSILON = 1e-9
"""A bucket this close below a whole token holds one: the time :func:`next_token_at`
names must find the token there, whatever the float arithmetic rounded."""

HeldReason = Literal["limited", "rate_limited"]


@dataclass(frozen=True, slots=True)
class HeldBack:
    """Why a task that could otherwise run waits (rules 33, 34): ``limited`` (``running``
    of ``max_running`` run under ``key``) or ``rate_limited`` (no token of ``key`` before
    ``next_at``, on the scheduler clock)."""

    reason: HeldReason
    key: str
    kind: str
    running: int | None = None
    max_running: int | None = None
    next_at: float | None = None

    @property
    def rule(self) -> int:
        """The rule that holds the task back."""
        return 33 if self.reason == "limited" else 34

    def __str__(self) -> str:
        if self.reason == "limited":
            return (
                f"limited: {self.running} of {self.max_running} tasks of kind {self.kind} "
                f"with limit key {self.key!r} run a phase; it starts when one stops"
            )
        until = format_at(self.next_at) if self.next_at is not None else "later"
        return (
            f"rate_limited: the bucket of kind {self.kind}'s rate key {self.key!r} holds no "
            f"token until {until}"
        )

    def to_dict(self) -> dict[str, object]:
        """The reason as plain data, leaving out what does not apply."""
        out: dict[str, object] = {"reason": self.reason, "key": self.key}
        if self.reason == "limited":
            out.update(running=self.running, max_running=self.max_running)
        else:
            out["next_at"] = self.next_at
        return out


def tokens_at(bucket: RateState | None, flow: Flow, now: float) -> float:
    """The tokens ``flow``'s rate bucket holds at ``now``: full (``burst``) before its
    first token is taken, else what the last taking left, filled at ``per_s`` a second."""
    assert flow.per_s is not None and flow.burst is not None
    if bucket is None:
        return float(flow.burst)
    filled = bucket.tokens + max(0.0, now - bucket.at) * flow.per_s / 1000.0
    return min(float(flow.burst), filled)


def next_token_at(bucket: RateState | None, flow: Flow) -> float | None:
    """When ``flow``'s rate bucket holds a whole token again (``None``: it holds one
    already, at any time from its last taking)."""
    assert flow.per_s is not None
    if bucket is None or bucket.tokens >= 1 - TOKEN_EPSILON:
        return None
    return bucket.at + (1 - bucket.tokens) * 1000.0 / flow.per_s


def _world(source: World | Draft) -> World:
    return source.world if isinstance(source, Draft) else source


def bucket_of(source: World | Draft, kind: str, key: str) -> RateState | None:
    """The token bucket of ``kind``'s rate key ``key`` (``None``: no token taken yet)."""
    stream_id = flow_stream_id(RATE_PREFIX, kind, key)
    # A decision's view reads its own events first; a world reads a dropped stream back.
    state = source.get_stream(stream_id) if isinstance(source, Draft) else source.stream(stream_id)
    return state if isinstance(state, RateState) else None


def held_back(
    source: World | Draft, task: TaskState, flow: Flow | None, now: float
) -> HeldBack | None:
    """Whether ``flow``'s limit (rule 33) or rate (rule 34) holds ``task`` back at
    ``now``, as the world (or a decision's view of it) stands; ``None``: neither."""
    if flow is None:
        return None
    if flow.limit_key is not None and flow.max_running is not None:
        group = flow_stream_id(LIMIT_PREFIX, task.kind, flow.limit_key)
        running = running_under(_world(source), group)
        if running >= flow.max_running:
            return HeldBack("limited", flow.limit_key, task.kind, running, flow.max_running)
    if flow.rate_key is not None and flow.per_s is not None:
        bucket = bucket_of(source, task.kind, flow.rate_key)
        if tokens_at(bucket, flow, now) < 1 - TOKEN_EPSILON:
            return HeldBack(
                "rate_limited", flow.rate_key, task.kind, next_at=next_token_at(bucket, flow)
            )
    return None


def held_back_now(world: World, task: TaskState, now: float, restart_limit: int) -> HeldBack | None:
    """What a reader without the registry (``tasks``, ``explain``) can tell: whether
    ``task``, pending (or asleep past its time) with no abort mark and not parked, is
    held back by the keys the log recorded for it at ``now``."""
    if task.abort_requested or task.restarts >= restart_limit:
        return None
    if task.status == "sleeping" and (task.until is None or now < task.until):
        return None
    if task.status not in ("pending", "sleeping"):
        return None
    return held_back(world, task, task.flow, now)


def keys_of(task: TaskState, registry: Registry | None) -> Flow | None:
    """The task's recorded keys; for a task recorded without them, what its definition in
    ``registry`` gives it from its memos now (``None`` when it has no limit or rate, or
    its key function fails: the reservation records that fault, :func:`recorded_keys`)."""
    if task.flow is not None or registry is None:
        return task.flow
    definition = registry.get(task.kind)
    if definition is None or (definition.limit is None and definition.rate is None):
        return None
    try:
        return flow_for(task.kind, definition.limit, definition.rate, task.memos, task.id)
    except InvalidFlowPolicy:
        return None


def recorded_keys(draft: Draft, ctx_now: float, task: TaskState, registry: Registry) -> Flow | None:
    """The task's keys, recorded first (``FlowKeysRecorded``, in the reservation's own
    append) when its submitter did not know its definition's limit or rate. A key
    function that fails here raises :class:`~..errors.InvalidFlowPolicy` (rule 36)."""
    if task.flow is not None:
        return task.flow
    definition = registry.get(task.kind)
    if definition is None:
        return None
    flow = flow_for(task.kind, definition.limit, definition.rate, task.memos, task.id)
    if flow is not None:
        draft.emit(keys_event(task.id, ctx_now, flow))
    return flow


def keys_event(task_id: str, at: float, flow: Flow) -> FlowKeysRecorded:
    """The event that records ``flow`` as the task's keys."""
    return FlowKeysRecorded(
        task_id=task_id,
        at=at,
        limit_key=flow.limit_key,
        max_running=flow.max_running,
        rate_key=flow.rate_key,
        per_s=flow.per_s,
        burst=flow.burst,
    )


def take_flow(draft: Draft, now: float, task: TaskState, flow: Flow | None) -> None:
    """A run reservation under ``flow``: refused while held back, else a slot of its
    limit key and a token of its rate key taken, each on its key's stream."""
    held = held_back(draft, task, flow, now)
    if held is not None:
        # 33. At most max_running of the kind with the key run a phase at once.
        # 34. A phase starts only with a token of its rate key's bucket.
        raise RuleViolation(held.rule, str(held), task_id=task.id)
    if flow is None:
        return
    if flow.limit_key is not None and flow.max_running is not None:
        group = flow_stream_id(LIMIT_PREFIX, task.kind, flow.limit_key)
        draft.emit_stream(
            LimitSlotTaken(
                task_id=task.id,
                at=now,
                kind=task.kind,
                key=flow.limit_key,
                running=running_under(draft.world, group) + 1,
                max_running=flow.max_running,
            )
        )
    if flow.rate_key is not None and flow.per_s is not None and flow.burst is not None:
        left = tokens_at(bucket_of(draft, task.kind, flow.rate_key), flow, now) - 1
        draft.emit_stream(
            RateTokenTaken(
                task_id=task.id,
                at=now,
                kind=task.kind,
                key=flow.rate_key,
                tokens=max(0.0, left),
                per_s=flow.per_s,
                burst=flow.burst,
            )
        )


def admitted(
    world: World,
    now: float,
    candidates: Iterable[str],
    registry: Registry | None,
    limit: int | None = None,
) -> list[str]:
    """``candidates`` (ready tasks, in the order a worker starts them) without those
    their limit's free slots or their rate's whole tokens cannot take now: each key's
    room is shared by its candidates in order, so a worker does not send reservations
    the rules would refuse. ``limit``: the first that many kept (no more are asked)."""
    room: dict[str, float] = {}
    kept: list[str] = []
    for task_id in candidates:
        if limit is not None and len(kept) >= limit:
            break
        task = world.tasks.get(task_id)
        flow = keys_of(task, registry) if task is not None and not task.abort_requested else None
        if flow is None or task is None:
            kept.append(task_id)
            continue
        asks = []
        if flow.limit_key is not None and flow.max_running is not None:
            group = flow_stream_id(LIMIT_PREFIX, task.kind, flow.limit_key)
            if group not in room:
                room[group] = flow.max_running - running_under(world, group)
            asks.append(group)
        if flow.rate_key is not None and flow.per_s is not None:
            bucket_id = flow_stream_id(RATE_PREFIX, task.kind, flow.rate_key)
            if bucket_id not in room:
                tokens = tokens_at(bucket_of(world, task.kind, flow.rate_key), flow, now)
                room[bucket_id] = math.floor(tokens + TOKEN_EPSILON)
            asks.append(bucket_id)
        if all(room[ask] >= 1 for ask in asks):
            for ask in asks:
                room[ask] -= 1
            kept.append(task_id)
    return kept
