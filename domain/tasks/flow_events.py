"""Flow control's events and their folds (rules 33 to 35), and the world's index of
the tasks each limit key holds running.

- :class:`FlowKeysRecorded`, on the task's own stream: the keys its definition's
  ``limit`` and ``rate`` gave it, with their numbers (``TaskState.flow``).
- :class:`LimitSlotTaken`, on the limit key's stream ``limit:[kind, key]``: a
  reservation started a phase under the limit. Every reservation of a limited task
  appends one, at the stream's next version, in the reservation's own append: of two
  workers deciding on the same key from the same log, the store lets one in and
  refuses the other whole (its version is taken), which decides again on the log
  that now holds the first (rule 33 across a fleet, docs/fleet.md).
- :class:`RateTokenTaken`, on the rate key's stream ``rate:[kind, key]``: a reservation
  took a token, leaving ``tokens`` at ``at`` (rule 34); the fold copies what the
  decision computed, so a replay computes nothing.
- :class:`SubmitDebounced` and :class:`SubmitCollapsed`, on the task's stream: a
  debounced submission opened its window (the task sleeps until ``until``), and each
  later one within it moved ``until`` on and gave the task its memos (rule 35);
  :class:`DebounceOpened`, on ``debounce:[kind, key]``: which task the key's latest
  window is, guarded by the stream's version so two writers never open two windows.

How many tasks a limit key holds running is not on its stream (a phase's end,
wait, sleep or recovery would each have to append there): it is the world's index
``flow_running`` (task -> the key's stream id, for each task running a phase under a
limit key), kept from the tasks' own states after every event.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from ..frozen import EMPTY, FrozenDict, frozen
from ..world import World, register_indexer, register_retirer
from .events import TaskEvent, register_event
from .evolve import InvalidTransition, evolves, evolves_stream, step
from .flow import DEBOUNCE_PREFIX, LIMIT_PREFIX, RATE_PREFIX, flow_stream_id
from .state import DebounceWindow, Flow, LimitState, RateState, TaskState

FLOW_RUNNING = "flow_running"
"""The world index: each task running a phase under a limit key, with that key's stream."""
FLOW_COUNTS = "flow_counts"
"""The world index: how many tasks each limit key's stream holds running (none: absent)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class FlowKeysRecorded(TaskEvent):
    """The keys the task's definition gave it (rules 33, 34): ``limit_key`` with
    ``max_running``, ``rate_key`` with ``per_s`` and ``burst`` (``None``: that policy
    does not hold it back). Recorded with its submission (or a collapsed one), or with
    its first reservation when its submitter did not know the definition."""

    command: ClassVar[str] = "flow"
    limit_key: str | None = None
    max_running: int | None = None
    rate_key: str | None = None
    per_s: float | None = None
    burst: int | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class FlowStreamEvent(TaskEvent):
    """Base of the events of a flow key's own stream (``task_id``: the task concerned)."""

    task_stream: ClassVar[bool] = False
    undoable: ClassVar[bool] = True
    """No index follows these streams: a group commit the store refused puts their
    states back in place (``commands/group_append.py``) instead of folding the world
    again from the store."""
    prefix: ClassVar[str] = ""

    kind: str
    key: str

    def stream_id(self) -> str:
        """The key's own stream."""
        return flow_stream_id(self.prefix, self.kind, self.key)


@dataclass(frozen=True, kw_only=True, slots=True)
class LimitSlotTaken(FlowStreamEvent):
    """A reservation started a phase of ``task_id`` under the limit key: ``running``
    tasks of the kind with the key run now, this one included, of ``max_running``."""

    command: ClassVar[str] = "reserve"
    prefix: ClassVar[str] = LIMIT_PREFIX
    running: int
    max_running: int


@dataclass(frozen=True, kw_only=True, slots=True)
class RateTokenTaken(FlowStreamEvent):
    """A reservation of ``task_id`` took a token of the rate key's bucket, leaving
    ``tokens`` at ``at``; it fills at ``per_s`` a second up to ``burst``."""

    command: ClassVar[str] = "reserve"
    prefix: ClassVar[str] = RATE_PREFIX
    tokens: float
    per_s: float
    burst: int


@dataclass(frozen=True, kw_only=True, slots=True)
class DebounceOpened(FlowStreamEvent):
    """A debounced submission opened a new window of the key: ``task_id`` collects the
    submits that come within ``wait_s`` of each other."""

    command: ClassVar[str] = "submit"
    prefix: ClassVar[str] = DEBOUNCE_PREFIX
    wait_s: float


@dataclass(frozen=True, kw_only=True, slots=True)
class SubmitDebounced(TaskEvent):
    """The task's submission was debounced under ``key``: it sleeps until ``until``,
    when it becomes ready unless another submit with the key comes first (rule 35)."""

    command: ClassVar[str] = "submit"
    key: str
    until: float


@dataclass(frozen=True, kw_only=True, slots=True)
class SubmitCollapsed(TaskEvent):
    """A submit with the debounce ``key`` came within the window and collapsed into
    this task: it now sleeps until ``until``, with this submit's ``memos`` (rule 35),
    submitted by ``actor`` because ``why``."""

    command: ClassVar[str] = "submit"
    key: str
    until: float
    memos: Any = None
    actor: str | None = None
    why: str | None = None


FLOW_STREAM_EVENTS = (LimitSlotTaken, RateTokenTaken, DebounceOpened)
for _cls in (FlowKeysRecorded, SubmitDebounced, SubmitCollapsed, *FLOW_STREAM_EVENTS):
    register_event(_cls)


# ─── the folds ─────────────────────────────────────────────────────────────


@evolves(FlowKeysRecorded)
def _keys_recorded(state: TaskState, event: FlowKeysRecorded) -> TaskState:
    if state.status == "completing":  # terminal is refused by evolve itself
        raise InvalidTransition(f"task {state.id}: FlowKeysRecorded while completing")
    flow = Flow(event.limit_key, event.max_running, event.rate_key, event.per_s, event.burst)
    return step(state, event, flow=flow)


def _never_started(state: TaskState, event: TaskEvent, status: str) -> None:
    if state.status != status or state.started_version is not None:
        raise InvalidTransition(
            f"task {state.id}: {type(event).__name__} while {state.status}"
            + (" (it has run)" if state.started_version is not None else "")
        )


@evolves(SubmitDebounced)
def _debounced(state: TaskState, event: SubmitDebounced) -> TaskState:
    _never_started(state, event, "pending")
    return step(state, event, status="sleeping", until=event.until)


@evolves(SubmitCollapsed)
def _collapsed(state: TaskState, event: SubmitCollapsed) -> TaskState:
    _never_started(state, event, "sleeping")
    memos: Any = EMPTY
    if event.memos is not None:
        if not isinstance(event.memos, dict) or not all(isinstance(k, str) for k in event.memos):
            raise InvalidTransition(f"task {event.task_id}: memos must be a JSON object")
        memos = FrozenDict({name: frozen(value) for name, value in event.memos.items()})
    return step(state, event, until=event.until, memos=memos)


@evolves_stream(*FLOW_STREAM_EVENTS)
def evolve_flow_stream(state: Any, event: FlowStreamEvent) -> Any:
    """A flow key's stream after ``event`` (``state`` ``None`` before its first)."""
    if isinstance(event, LimitSlotTaken):
        taken = state.taken if isinstance(state, LimitState) else 0
        return LimitState(event.kind, event.key, taken + 1, event.task_id, event.at, event.running)
    if isinstance(event, RateTokenTaken):
        taken = state.taken if isinstance(state, RateState) else 0
        return RateState(
            event.kind, event.key, event.tokens, event.at, event.per_s, event.burst, taken + 1
        )
    if isinstance(event, DebounceOpened):
        opened = state.opened if isinstance(state, DebounceWindow) else 0
        return DebounceWindow(event.kind, event.key, event.task_id, opened + 1, event.at)
    raise InvalidTransition(f"no evolve for {type(event).__name__}")


# ─── the index of running tasks by limit key ───────────────────────────────


def limit_group(state: TaskState | None) -> str | None:
    """The limit key stream of a task that runs a phase under a limit key, else ``None``
    (an abort handler is not a phase: it neither counts nor waits, rule 33)."""
    if state is None or state.status != "running" or state.mode != "run":
        return None
    flow = state.flow
    if flow is None or flow.limit_key is None:
        return None
    return flow_stream_id(LIMIT_PREFIX, state.kind, flow.limit_key)


def index_running(world: World, event: TaskEvent, previous: Any, state: Any) -> None:
    """Keep :data:`FLOW_RUNNING` and :data:`FLOW_COUNTS` current after a task event
    (``state`` ``None``: the task is gone from this world, as when a refused group is
    undone). Called for every event, whatever its class, so that a new event that
    takes a task out of ``running`` needs nothing here."""
    if not type(event).task_stream:
        return
    task_id = event.task_id
    running: dict[str, str] | None = world.indexes.get(FLOW_RUNNING)
    had = running.get(task_id) if running else None
    if had is None and (state is None or state.flow is None):
        return  # the common case: a task without limit keys
    group = limit_group(state)
    if group == had:
        return
    if running is None:
        running = world.indexes[FLOW_RUNNING] = {}
    counts: dict[str, int] = world.indexes.setdefault(FLOW_COUNTS, {})
    if had is not None:
        del running[task_id]
        left = counts[had] - 1
        if left:
            counts[had] = left
        else:
            del counts[had]
    if group is not None:
        running[task_id] = group
        counts[group] = counts.get(group, 0) + 1


# Every task event: any of them may take a task out of running (a wait, a sleep, an end,
# a recovery, and whatever event a later rule adds), and one that need not costs a look.
register_indexer(index_running, restorable=True, reacts_to=(TaskEvent,))


def running_under(world: World, group: str) -> int:
    """How many tasks run a phase under the limit key stream ``group`` in ``world``."""
    counts: dict[str, int] | None = world.indexes.get(FLOW_COUNTS)
    return counts.get(group, 0) if counts else 0


def _retired(world: World, stream_id: str, state: Any) -> bool | None:
    """A limit key's stream is finished with once nothing runs under it (its count is
    the index's, and a reservation reads its version back from the store); a debounce
    key's once its window's task has run or ended. A rate key's bucket is kept: a read
    without the store (``tasks``, a snapshot) needs its tokens, one small state a key."""
    if isinstance(state, LimitState):
        return running_under(world, stream_id) == 0
    if isinstance(state, RateState):
        return False
    if isinstance(state, DebounceWindow):
        task = world.tasks.get(state.task_id)
        return task is None or task.status != "sleeping" or task.started_version is not None
    return None


register_retirer(_retired)
