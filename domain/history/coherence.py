"""Whether a decoded world is one a fold could have made: each part of its declared
type, and the indexes the world keeps of its tasks the ones its tasks imply.

A fold keeps ``live``, ``sleeping``, ``waiters``, ``live_children`` and the live
statuses' counts from the tasks' states alone (:func:`~..world_fold.index_task`),
and a compacted world still holds every task a live one refers to (its owner, what
it awaits). A snapshot whose parts disagree (an id in ``live`` that no held task
has, a pending task in no count) was not written by a fold: passed over, never
trusted, since the rules read those indexes as the truth (a run pass asserts that
each live id is a task). The checks cost one pass over what the snapshot holds.
"""

from __future__ import annotations

from typing import Any

from ..runs.ledger import Ledger
from ..tasks.ask_inbox import implied_open_asks
from ..tasks.flow_events import FLOW_COUNTS, FLOW_RUNNING, limit_group
from ..tasks.state import LIVE_STATUSES, TaskState
from ..turns.state import TaskPassRetry, WakeupState
from ..world import World
from .typecheck import Check, checker

PART_TYPES: dict[str, Any] = {
    "tasks": dict[str, TaskState],
    "live_children": dict[str, set[str]],
    "waiters": dict[str, set[str]],
    "sleeping": set[str],
    "live": set[str],
    "streams": dict[str, Any],
    "stream_versions": dict[str, int],
    "indexes": dict[str, Any],
    "counts": dict[str, int],
    "folded": int,
}
"""The declared type of each part of a :class:`World` a snapshot keeps."""

INDEX_TYPES: dict[str, Any] = {
    "live_order": dict[str, int],
    "task_seq": int,
    "cancelling": set[str],
    "cleanup_owed": set[str],
    "pending_wakeups": dict[str, WakeupState],
    "task_pass_retries": dict[str, TaskPassRetry],
    "open_cleanups": dict[str, list[str]],
    "ledger": Ledger,
    "live_schedules": dict[str, float],
    "live_priority": dict[str, int],
    "cron_schedules": dict[str, float],
    "open_asks": dict[str, float],
    "flow_running": dict[str, str],
    "flow_counts": dict[str, int],
}
"""The declared type of each index a fold registers (``tests/test_snapshot_trust_resealed.py``
holds this table to the indexes a fold of the reference log makes)."""

_PARTS: dict[str, Check] = {name: checker(kind) for name, kind in PART_TYPES.items()}
_INDEXES: dict[str, Check] = {name: checker(kind) for name, kind in INDEX_TYPES.items()}


def world_problem(world: World) -> str | None:
    """What makes ``world`` one no fold made, or ``None``."""
    for part, fits in _PARTS.items():
        if not fits(getattr(world, part)):
            return f"its {part} is not of its declared type"
    for name, index in world.indexes.items():
        declared = _INDEXES.get(name)
        if declared is None:
            return f"it holds an index {name!r} no fold keeps"
        if not declared(index):
            return f"its index {name} is not of its declared type"
    return _tasks_problem(world) or _streams_problem(world) or _index_problem(world)


def _tasks_problem(world: World) -> str | None:
    tasks = world.tasks
    live: set[str] = set()
    sleeping: set[str] = set()
    waiters: dict[str, set[str]] = {}
    children: dict[str, set[str]] = {}
    held: dict[str, int] = {}
    for task_id, task in tasks.items():
        if task.id != task_id or task.events < 1:
            return f"its task {task_id!r} is held under another id or with no events"
        held[task.status] = held.get(task.status, 0) + 1
        if task.status == "terminal":
            continue
        live.add(task_id)
        if task.status == "sleeping":
            sleeping.add(task_id)
        if task.status == "waiting":
            for awaited in task.on:
                waiters.setdefault(awaited, set()).add(task_id)
        if task.owner_id is not None:
            children.setdefault(task.owner_id, set()).add(task_id)
    implied = {
        "live": live,
        "sleeping": sleeping,
        "waiters": waiters,
        "live_children": children,
    }
    for part, expected in implied.items():
        if getattr(world, part) != expected:
            return f"its {part} are not those its tasks imply"
    for status, count in world.counts.items():
        least = held.get(status, 0)
        exact = status in LIVE_STATUSES  # a live task is never dropped: all are held
        if count < 1 or count < least or (exact and count != least):
            return f"its count of {status} tasks ({count}) is not its tasks'"
    if any(status not in world.counts for status in held):
        return "its counts leave out a status its tasks hold"
    referred = set(waiters) | set(children)
    missing = sorted(task_id for task_id in referred if task_id not in tasks)
    if missing:
        return f"a live task refers to {missing[0]!r}, which it does not hold"
    return None


def _streams_problem(world: World) -> str | None:
    if set(world.streams) != set(world.stream_versions):
        return "its streams and their versions name different streams"
    if any(version < 1 for version in world.stream_versions.values()):
        return "it holds a stream with no events"
    if world.folded < 0:
        return "it says it folded fewer than no events"
    return None


def _index_problem(world: World) -> str | None:
    indexes = world.indexes
    order: dict[str, int] = indexes.get("live_order", {})
    if set(order) != world.live:
        return "its live_order index is not its live tasks"
    if order and max(order.values()) > indexes.get("task_seq", 0):
        return "its task_seq is behind its live_order"
    cancelling: set[str] = indexes.get("cancelling", set())
    if cancelling != {t for t in world.live if world.tasks[t].cancelling()}:
        return "its cancelling index is not its cancelling tasks"
    raised: dict[str, int] = indexes.get("live_priority", {})
    if raised != {t: world.tasks[t].priority for t in world.live if world.tasks[t].priority}:
        return "its live_priority index is not its live tasks' priorities"
    if indexes.get("open_asks", {}) != implied_open_asks(world):
        return "its open_asks index is not its live tasks' open asks"
    running: dict[str, str] = indexes.get(FLOW_RUNNING, {})
    implied = {t: g for t in world.live if (g := limit_group(world.tasks[t])) is not None}
    if running != implied:
        return "its flow_running index is not its tasks running under limit keys"
    counts: dict[str, int] = {}
    for group in running.values():
        counts[group] = counts.get(group, 0) + 1
    if indexes.get(FLOW_COUNTS, {}) != counts:
        return "its flow_counts index does not count its flow_running tasks"
    ledger = indexes.get("ledger")
    if isinstance(ledger, Ledger) and not set(ledger.live) <= set(ledger.runs):
        return "its ledger's live runs are not among its runs"
    return None
