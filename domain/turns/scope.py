"""The scope of a controller pass: which tasks, and which of their roles, it covers.
``"full"`` takes every task with Turn work and the ``operator`` lane, and takes over
every armed task-pass retry (due or not); dirty keys take the tasks and roles they
name (a task key subsumes its role keys), in the order each task was first named; the
operator lane adds the tasks whose task-pass retry is due, with the keys that failed.
A malformed scope or key is refused before anything is written.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from ..errors import InvalidArgument
from ..world import World
from .cleanup import cleanup_owed
from .folds import task_pass_retries
from .keys import DirtyKey, natural_key, parse_key, role_key, task_key
from .wakeups import outcome_decided


@dataclass
class _Plan:
    scope: str
    keys: list[str]
    roles: dict[str, set[str] | None]
    """Task id -> roles in scope (``None``: every role)."""
    task_keys: dict[str, tuple[str, ...]]
    retried: list[str]
    ended_retries: list[str]


def plan(world: World, scope: object, now: float) -> _Plan:
    """Validate a scope and decide which tasks (and roles) a pass covers.

    Raises :class:`~.errors.InvalidArgument` for a malformed scope or key,
    before anything is written.
    """
    if scope == "full":
        parsed: list[DirtyKey] = []
        kind = "full"
    else:
        if isinstance(scope, str) or not isinstance(scope, Iterable):
            raise InvalidArgument(f"a pass scope is 'full' or a list of dirty keys, not {scope!r}")
        parsed = [parse_key(key) for key in scope]
        kind = "dirty"
    keys = list(dict.fromkeys(k.text for k in parsed))
    operator = kind == "full" or any(k.kind == "operator" for k in parsed)
    roles: dict[str, set[str] | None] = {}
    if kind == "full":
        for task_id in _tasks_with_turn_work(world):
            roles[task_id] = None
    retried: list[str] = []
    ended: list[str] = []
    if operator:
        # The operator lane: due task-pass retries fire, with the keys that failed.
        for task_id, retry in sorted(
            task_pass_retries(world).items(), key=lambda item: natural_key(item[0])
        ):
            task = world.get(task_id)
            if task is None or outcome_decided(task):
                # passes.retry_active_only (yui): the retry of a task that ended or
                # holds its outcome is cleared, not run.
                ended.append(task_id)
            elif kind == "full":
                # passes.full_takes_over (yui): a full pass does every armed retry's work
                # now, due or not, over all of the task's roles; its outcome settles it.
                retried.append(task_id)
                roles[task_id] = None
            elif retry.retry_at <= now:
                retried.append(task_id)
                parsed.extend(parse_key(key) for key in retry.keys)
    for key in parsed:
        if key.kind == "operator":
            continue
        assert key.task_id is not None
        if key.kind == "task":
            # A task key subsumes that task's role keys, before or after it.
            roles[key.task_id] = None
        elif key.task_id not in roles:
            roles[key.task_id] = {key.role} if key.role else set()
        else:
            existing = roles[key.task_id]
            if existing is not None and key.role is not None:
                existing.add(key.role)
    known = {t: r for t, r in roles.items() if world.get(t) is not None}
    # passes.dirty_order (yui): a dirty pass takes its tasks in the order their first
    # key was asked for (then the due retries'); a full pass in id order.
    ordered = sorted(known, key=natural_key) if kind == "full" else list(known)
    task_keys: dict[str, tuple[str, ...]] = {}
    for task_id in ordered:
        selected = known[task_id]
        if selected is None:
            task_keys[task_id] = (task_key(task_id),)
        else:
            task_keys[task_id] = tuple(
                sorted((role_key(task_id, r) for r in selected), key=natural_key)
            )
    return _Plan(kind, keys, {t: known[t] for t in ordered}, task_keys, retried, ended)


def _tasks_with_turn_work(world: World) -> list[str]:
    """Tasks with a pending wakeup or an open cleanup, live tasks with roles, and
    terminal completed tasks whose roles still owe a cleanup: only indexes of live
    or owed work are visited, never every task."""
    wakeups = world.indexes.get("pending_wakeups", {})
    cleanups = world.indexes.get("open_cleanups", {})
    out = set(wakeups) | set(cleanups) | cleanup_owed(world)
    for task_id in list(world.live):
        task = world.get(task_id)
        if task is not None and task.roles:
            out.add(task_id)
    return [task_id for task_id in out if world.get(task_id) is not None]
