"""``decide``: the precedence rules of SPEC.md section 1, as pure functions.

Each function takes a :class:`~.world.Draft` and a :class:`Context`, checks the
rules that apply to one command, and emits the events the command produces
into the draft, or raises :class:`~.errors.RuleViolation` (or another
:class:`~.errors.Refused`) naming the rule and the task. The application saves
the draft's events only if the decision returned; a refused command appends
nothing. Nothing here reads the clock, the environment or storage: the clock
reading comes in as ``Context.now``.

Each rule is applied in exactly one place, with its number in a comment above
the branch that applies it.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from ..errors import InvalidArgument, Refused, RuleViolation, UnknownTask
from ..world import Draft
from .definitions import Registry, definition_fit, parked
from .events import (
    AbortMarked,
    CheckpointCommitted,
    MemoRecorded,
    Mode,
    OutcomeHeld,
    OutcomeStatus,
    Policy,
    RestartsCleared,
    SleepStarted,
    TaskEnded,
    TaskMigrated,
    TaskRecovered,
    TaskReserved,
    TaskStopped,
    TaskSubmitted,
    WaitStarted,
)
from .state import Outcome, TaskState

FINISH_STATUSES: tuple[OutcomeStatus, ...] = ("completed", "failed", "aborted", "faulted")
MAX_VALUE_BYTES = 64 * 1024
"""The largest memo value, error message or error detail a task may record, as
JSON (64 KiB): the log keeps every value forever, so large data belongs in a
blob store."""


@dataclass(frozen=True, slots=True)
class Context:
    """What a decision may know besides the tasks: the clock reading and settings."""

    now: float
    restart_limit: int = 3
    closing: bool = False


# ─── helpers ────────────────────────────────────────────────────────────────


def _task(draft: Draft, task_id: str) -> TaskState:
    if not isinstance(task_id, str) or not task_id:
        raise InvalidArgument(f"a task id must be a non-empty string, not {task_id!r}")
    state = draft.get(task_id)
    if state is None:
        raise UnknownTask(task_id)
    return state


def _phase_name(value: object, what: str, task_id: str | None) -> str:
    if not isinstance(value, str) or not value.strip():
        raise InvalidArgument(f"{what} must be a non-empty string, not {value!r}", task_id=task_id)
    return value


def json_value(value: Any, what: str, task_id: str | None) -> Any:
    """Check that ``value`` is JSON the log can keep: encodable, finite, at most
    MAX_VALUE_BYTES. Returns it as the log will read it back (a tuple as a list, a
    date as its ISO text), so the live state is the state a replay folds."""
    try:
        encoded = orjson.dumps(value)
    except TypeError as error:
        raise InvalidArgument(f"{what} must be JSON data: {error}", task_id=task_id) from None
    if len(encoded) > MAX_VALUE_BYTES:
        raise InvalidArgument(
            f"{what} is {len(encoded)} bytes as JSON; the limit is {MAX_VALUE_BYTES}",
            task_id=task_id,
        )
    if not _finite(value):  # orjson would write NaN and infinities as null
        raise InvalidArgument(
            f"{what} must be JSON data: NaN and infinities are not JSON", task_id=task_id
        )
    return orjson.loads(encoded)


def _finite(value: Any) -> bool:
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, dict):
        return all(_finite(item) for item in value.values())
    if isinstance(value, list | tuple):
        return all(_finite(item) for item in value)
    return True


def _not_closing(ctx: Context, task_id: str | None) -> None:
    # 2. A closing scheduler ends every decision without a write.
    if ctx.closing:
        raise RuleViolation(2, "the scheduler is closing; open it again to decide", task_id=task_id)


def _invocation_decision(draft: Draft, ctx: Context, task_id: str) -> TaskState:
    """Rules 2, 1 and 3, in that order, for a decision an invocation takes."""
    _not_closing(ctx, task_id)
    task = _task(draft, task_id)
    # 1. A task that is not running ends the invocation's decision without a write.
    if task.status != "running":
        raise RuleViolation(
            1,
            f"the task is {task.status}, not running; its invocation has ended",
            task_id=task_id,
        )
    # 3. An abort mark ends a run invocation at its next decision.
    if task.mode == "run" and task.abort_requested:
        raise RuleViolation(
            3,
            "the task is abort-marked; its run invocation has ended and its abort "
            "handler runs next",
            task_id=task_id,
        )
    return task


def wait_satisfied(draft: Draft, task: TaskState) -> bool:
    """Rule 7: whether a waiting task may wake: ``all`` once every awaited task has
    ended; ``failFast`` as soon as one holds or ended with an outcome other than
    ``completed``."""
    ended = 0
    for awaited_id in task.on:
        awaited = draft.get(awaited_id)
        if awaited is None:
            continue
        if awaited.status == "terminal":
            ended += 1
        if (
            task.policy == "failFast"
            and awaited.outcome is not None
            and awaited.outcome.status != "completed"
        ):
            return True
    return ended == len(task.on)


def cancelling_ancestor(draft: Draft, task_id: str) -> TaskState | None:
    """The nearest live owner above ``task_id`` with cancellation intent (rule 6)."""
    for ancestor in draft.ancestors(task_id):
        if ancestor.cancelling():
            return ancestor
    return None


def _cascade(draft: Draft, ctx: Context, owner_id: str) -> None:
    # 6. A live owner with an abort mark, or holding an outcome other than
    #    completed, gives every live descendant an abort mark.
    for descendant in list(draft.live_descendants(owner_id)):
        current = draft.get(descendant.id)
        if current is None or not current.live or current.request_marked:
            continue
        draft.emit(AbortMarked(task_id=descendant.id, at=ctx.now, rule=6, by=owner_id))


def _end(draft: Draft, ctx: Context, task: TaskState, outcome: Outcome, rule: int | None) -> None:
    """Decide ``task``'s outcome: hold it while owned work is live, else end it."""
    fields: dict[str, Any] = {
        "status": outcome.status,
        "message": outcome.message,
        "detail": outcome.detail,
        "reason": outcome.reason,
    }
    # 5. Finishing with live owned tasks holds the outcome (completing).
    if draft.live_children(task.id):
        draft.emit(
            OutcomeHeld(task_id=task.id, at=ctx.now, rule=5 if rule is None else rule, **fields)
        )
        if outcome.status != "completed":
            _cascade(draft, ctx, task.id)
        return
    draft.emit(TaskEnded(task_id=task.id, at=ctx.now, rule=rule, **fields))
    _release_owner(draft, ctx, task.owner_id)


def _release_owner(draft: Draft, ctx: Context, owner_id: str | None) -> None:
    # 5. The last owned task ending turns the holder terminal (and so on upwards).
    while owner_id is not None:
        owner = draft.get(owner_id)
        if owner is None or owner.status != "completing" or draft.live_children(owner_id):
            return
        assert owner.outcome is not None
        draft.emit(
            TaskEnded(
                task_id=owner_id,
                at=ctx.now,
                rule=5,
                status=owner.outcome.status,
                message=owner.outcome.message,
                detail=owner.outcome.detail,
                reason=owner.outcome.reason,
            )
        )
        owner_id = owner.owner_id


# ─── commands ───────────────────────────────────────────────────────────────


def submit(
    draft: Draft,
    ctx: Context,
    *,
    task_id: str,
    kind: str,
    version: int,
    phase: str,
    owner_id: str | None = None,
    conversation_id: str | None = None,
    project_ids: Sequence[str] = (),
    trace: dict[str, str] | None = None,
    abandon_on_restart: bool = False,
) -> TaskState:
    """Create a task, ``pending`` at ``phase``."""
    _not_closing(ctx, task_id)
    if not isinstance(task_id, str) or not task_id:
        raise InvalidArgument(f"a task id must be a non-empty string, not {task_id!r}")
    if draft.get(task_id) is not None:
        raise Refused("a task with this id already exists", task_id=task_id)
    _phase_name(kind, "kind", task_id)
    _phase_name(phase, "phase", task_id)
    if isinstance(version, bool) or not isinstance(version, int) or version < 1:
        raise InvalidArgument(f"version must be an int >= 1, not {version!r}", task_id=task_id)
    if isinstance(project_ids, str):
        raise InvalidArgument("project_ids must be a list of ids, not a string", task_id=task_id)
    try:
        projects = tuple(project_ids)
    except TypeError:
        raise InvalidArgument(
            f"project_ids must be a list of ids, not {project_ids!r}", task_id=task_id
        ) from None
    if not all(isinstance(p, str) and p for p in projects):
        raise InvalidArgument("project ids must be non-empty strings", task_id=task_id)
    if not isinstance(abandon_on_restart, bool):
        raise InvalidArgument(
            f"abandon_on_restart must be True or False, not {abandon_on_restart!r}",
            task_id=task_id,
        )
    for name, value in (("owner", owner_id), ("conversation_id", conversation_id)):
        if value is not None and (not isinstance(value, str) or not value):
            raise InvalidArgument(
                f"{name} must be a task id string, not {value!r}", task_id=task_id
            )
    if trace is not None and (
        not isinstance(trace, dict)
        or not all(isinstance(k, str) and isinstance(v, str) for k, v in trace.items())
    ):
        raise InvalidArgument("trace must be a dict of strings (a W3C carrier)", task_id=task_id)
    if owner_id is not None:
        owner = _task(draft, owner_id)
        # 4. Terminal is absorbing: a terminal task owns no new work.
        if owner.status == "terminal":
            raise RuleViolation(4, f"owner {owner_id} is terminal", task_id=task_id)
        # 5. A holder waits for its owned work to end; it takes on no more.
        if owner.status == "completing":
            raise RuleViolation(5, f"owner {owner_id} holds its outcome", task_id=task_id)
    state = draft.emit(
        TaskSubmitted(
            task_id=task_id,
            at=ctx.now,
            kind=kind,
            version=version,
            phase=phase,
            owner_id=owner_id,
            conversation_id=conversation_id,
            project_ids=projects,
            trace=trace,
            abandon_on_restart=abandon_on_restart,
        )
    )
    # 6. Work submitted below a cancelling owner is marked at once.
    cancelling = cancelling_ancestor(draft, task_id)
    if cancelling is not None:
        state = draft.emit(AbortMarked(task_id=task_id, at=ctx.now, rule=6, by=cancelling.id))
    return state


def reserve(
    draft: Draft,
    ctx: Context,
    task_id: str,
    *,
    registry: Registry,
    failed_migrations: Iterable[str] = (),
    migrated_phase: str | None = None,
) -> Mode | None:
    """Give the task to an invocation: ``run`` mode, or ``abort`` mode once marked.

    Returns the mode, or ``None`` when a rule ended the task instead (an abort
    handler cut off too often, rule 12; an abort-marked task no definition can
    take, rule 13). ``migrated_phase`` is what the newer definition's
    ``migrate`` returned, when the application ran it.
    """
    _not_closing(ctx, task_id)
    task = _task(draft, task_id)
    # 4. Terminal is absorbing.
    if task.status == "terminal":
        raise RuleViolation(4, "the task is terminal; nothing runs it again", task_id=task_id)
    # 5. A held outcome waits for owned work, never for an invocation.
    if task.status == "completing":
        raise RuleViolation(
            5, "the task holds its outcome until its owned tasks end", task_id=task_id
        )
    if task.status == "running" and not (task.mode == "run" and task.abort_requested):
        raise Refused(f"the task is already running in {task.mode} mode", task_id=task_id)
    # 6. A descendant waits for its cascade mark instead of running a phase.
    if not task.request_marked:
        cancelling = cancelling_ancestor(draft, task_id)
        if cancelling is not None:
            task = draft.emit(AbortMarked(task_id=task_id, at=ctx.now, rule=6, by=cancelling.id))
    if task.abort_requested:
        return _reserve_abort(draft, ctx, task, registry, failed_migrations)
    # 7. A waiter stays waiting until its policy is met.
    if task.status == "waiting" and not wait_satisfied(draft, task):
        raise RuleViolation(
            7, f"still waiting ({task.policy}) on {', '.join(task.on)}", task_id=task_id
        )
    # 8. A sleep is due when the clock reaches until.
    if task.status == "sleeping" and task.until is not None and ctx.now < task.until:
        raise RuleViolation(8, f"sleeping until {task.until}, now {ctx.now}", task_id=task_id)
    # 9. Cut off restart_limit times without progress: parked until retry().
    if parked(task, ctx.restart_limit):
        raise RuleViolation(
            9,
            f"parked after {task.restarts} restarts without progress (limit "
            f"{ctx.restart_limit}); call retry() to run it again",
            task_id=task_id,
        )
    # 13. No definition that can take it: blocked.
    fit = definition_fit(task, registry.get(task.kind), failed_migrations)
    if fit not in ("same", "migrate"):
        raise RuleViolation(13, f"blocked: {fit}", task_id=task_id)
    if fit == "migrate":
        definition = registry.get(task.kind)
        assert definition is not None and task.checkpoint is not None
        draft.emit(
            TaskMigrated(
                task_id=task_id,
                at=ctx.now,
                from_version=task.version,
                to_version=definition.version,
                phase=migrated_phase or task.checkpoint.phase,
            )
        )
    draft.emit(TaskReserved(task_id=task_id, at=ctx.now, mode="run"))
    return "run"


def _reserve_abort(
    draft: Draft,
    ctx: Context,
    task: TaskState,
    registry: Registry,
    failed_migrations: Iterable[str],
) -> Mode | None:
    # 3. An abort invocation is reserved only once ordinary owned live work is gone.
    if draft.live_children(task.id):
        raise RuleViolation(
            3,
            "abort-marked; its abort handler waits for the tasks it owns to end",
            task_id=task.id,
        )
    # 12. An abort handler cut off restart_limit times ends faulted.
    if task.restarts >= ctx.restart_limit:
        _end(
            draft,
            ctx,
            task,
            Outcome(
                "faulted",
                f"abort handler of task {task.id} was cut off {task.restarts} times",
                None,
                "restart_limit",
            ),
            rule=12,
        )
        return None
    fit = definition_fit(task, registry.get(task.kind), failed_migrations)
    if fit not in ("same", "migrate"):
        # 13. A restart mark waits for a definition, blocked; a request mark that no
        #     definition can take ends orphaned once nothing it owns is live.
        if not task.request_marked:
            raise RuleViolation(13, f"blocked: {fit}", task_id=task.id)
        _end(draft, ctx, task, Outcome("orphaned", None, None, fit), rule=13)
        return None
    draft.emit(TaskReserved(task_id=task.id, at=ctx.now, mode="abort"))
    return "abort"


def checkpoint(
    draft: Draft, ctx: Context, task_id: str, phase: str, attempt: int | None = None
) -> TaskState:
    """The running task commits where it resumes: progress unless it is the same checkpoint."""
    _invocation_decision(draft, ctx, task_id)
    _phase_name(phase, "phase", task_id)
    if attempt is not None and (
        isinstance(attempt, bool) or not isinstance(attempt, int) or attempt < 0
    ):
        raise InvalidArgument(f"attempt must be an int >= 0, not {attempt!r}", task_id=task_id)
    return draft.emit(
        CheckpointCommitted(task_id=task_id, at=ctx.now, phase=phase, attempt=attempt)
    )


def memo(draft: Draft, ctx: Context, task_id: str, name: str, value: Any) -> TaskState:
    """The running task remembers ``value`` under ``name`` until its outcome (rule 14)."""
    _invocation_decision(draft, ctx, task_id)
    _phase_name(name, "memo name", task_id)
    value = json_value(value, f"memo {name!r}", task_id)
    return draft.emit(MemoRecorded(task_id=task_id, at=ctx.now, name=name, value=value))


def wait(
    draft: Draft,
    ctx: Context,
    task_id: str,
    on: Sequence[str],
    policy: Policy = "all",
    phase: str | None = None,
) -> TaskState:
    """The running task waits on other tasks, to resume at ``phase`` (default: its current one)."""
    task = _invocation_decision(draft, ctx, task_id)
    if isinstance(on, str):
        raise InvalidArgument("on must be a list of task ids, not a string", task_id=task_id)
    try:
        awaited = tuple(dict.fromkeys(on))
    except TypeError:  # not iterable, or holding something that cannot be a task id
        raise InvalidArgument(
            f"on must be a list of task ids, not {on!r}", task_id=task_id
        ) from None
    if policy not in ("all", "failFast"):
        raise InvalidArgument(
            f"policy must be 'all' or 'failFast', not {policy!r}", task_id=task_id
        )
    # 7. A wait names existing tasks...
    if not awaited:
        raise RuleViolation(7, "a wait must name at least one task", task_id=task_id)
    for awaited_id in awaited:
        if not isinstance(awaited_id, str) or draft.get(awaited_id) is None:
            raise RuleViolation(7, f"cannot wait on {awaited_id!r}: no such task", task_id=task_id)
    # 7. ... failFast names only tasks the waiter owns ...
    if policy == "failFast":
        foreign = [a for a in awaited if _task(draft, a).owner_id != task_id]
        if foreign:
            raise RuleViolation(
                7,
                f"failFast may wait only on tasks it owns; not on {', '.join(foreign)}",
                task_id=task_id,
            )
    # 7. ... and a wait that would close a cycle in the wait-for graph is refused.
    cycle = _wait_cycle(draft, task_id, awaited)
    if cycle:
        raise RuleViolation(
            7, f"waiting would close a cycle: {' -> '.join(cycle)}", task_id=task_id
        )
    resume = phase if phase is not None else (task.checkpoint.phase if task.checkpoint else None)
    resume = _phase_name(resume, "phase", task_id)
    return draft.emit(
        WaitStarted(task_id=task_id, at=ctx.now, on=awaited, policy=policy, phase=resume)
    )


def _wait_cycle(draft: Draft, waiter_id: str, awaited: Sequence[str]) -> list[str] | None:
    """A path in the wait-for graph from an awaited task back to the waiter, if any."""
    stack: list[tuple[str, list[str]]] = [(a, [waiter_id, a]) for a in awaited]
    seen: set[str] = set()
    while stack:
        node, path = stack.pop()
        if node == waiter_id:
            return path
        if node in seen:
            continue
        seen.add(node)
        state = draft.get(node)
        if state is not None and state.status == "waiting":
            stack.extend((nxt, [*path, nxt]) for nxt in state.on)
    return None


def sleep(
    draft: Draft, ctx: Context, task_id: str, until: float, phase: str | None = None
) -> TaskState:
    """The running task sleeps until the clock reaches ``until``, to resume at ``phase``."""
    task = _invocation_decision(draft, ctx, task_id)
    # 8. A sleep needs a finite until >= 0, and an abort invocation cannot sleep.
    if (
        isinstance(until, bool)
        or not isinstance(until, int | float)
        or not math.isfinite(until)
        or until < 0
    ):
        raise RuleViolation(
            8, f"until must be a finite time >= 0 in ms, not {until!r}", task_id=task_id
        )
    if task.mode == "abort":
        raise RuleViolation(8, "an abort handler cannot sleep", task_id=task_id)
    resume = phase if phase is not None else (task.checkpoint.phase if task.checkpoint else None)
    resume = _phase_name(resume, "phase", task_id)
    return draft.emit(SleepStarted(task_id=task_id, at=ctx.now, until=until, phase=resume))


def finish(
    draft: Draft,
    ctx: Context,
    task_id: str,
    status: OutcomeStatus,
    *,
    message: str | None = None,
    detail: Any = None,
    reason: str | None = None,
) -> TaskState:
    """The running task decides its outcome; held while it owns live tasks (rule 5)."""
    task = _invocation_decision(draft, ctx, task_id)
    if status not in FINISH_STATUSES:
        raise InvalidArgument(
            f"status must be one of {', '.join(FINISH_STATUSES)}, not {status!r}", task_id=task_id
        )
    detail = json_value(detail, "error detail", task_id)
    if message is not None and not isinstance(message, str):
        raise InvalidArgument(f"error message must be a string, not {message!r}", task_id=task_id)
    json_value(message, "error message", task_id)
    if reason is not None and not isinstance(reason, str):
        raise InvalidArgument(f"reason must be a string, not {reason!r}", task_id=task_id)
    _end(draft, ctx, task, Outcome(status, message, detail, reason), rule=None)
    state = draft.get(task_id)
    assert state is not None
    return state


def fault(draft: Draft, ctx: Context, task_id: str, message: str, reason: str) -> TaskState:
    """The scheduler ends a running task ``faulted`` (a phase threw, a handler gave no outcome)."""
    task = _task(draft, task_id)
    if task.status != "running":
        raise RuleViolation(1, f"the task is {task.status}, not running", task_id=task_id)
    _end(draft, ctx, task, Outcome("faulted", message, None, reason), rule=None)
    state = draft.get(task_id)
    assert state is not None
    return state


def abort(draft: Draft, ctx: Context, task_id: str) -> bool:
    """Put a request abort mark on the task and cascade it. Returns whether anything changed."""
    _not_closing(ctx, task_id)
    task = _task(draft, task_id)
    # 4. An abort mark on a terminal task is a no-op.
    if task.status == "terminal":
        return False
    # 12. A request mark replaces a restart mark; a second request changes nothing.
    changed = False
    if not task.request_marked:
        draft.emit(AbortMarked(task_id=task_id, at=ctx.now))
        changed = True
    before = len(draft.events)
    _cascade(draft, ctx, task_id)
    return changed or len(draft.events) > before


def recover(draft: Draft, ctx: Context) -> list[str]:
    """Rule 9, at open after a crash: every running task back to pending, one restart
    counted. Returns the tasks that the restart limit now parks.

    Also derives what a crash (or another writer) may have left undone: cascade
    marks below cancelling owners (rule 6) and held outcomes whose owned work is
    gone (rule 5).
    """
    parked_ids: list[str] = []
    world = draft.world
    for task_id in sorted(world.live):
        task = draft.get(task_id)
        if task is None or task.status != "running":
            continue
        # 9. Recovery: running becomes pending, and its restarts grow by one.
        task = draft.emit(
            TaskRecovered(task_id=task_id, at=ctx.now, rule=9, restarts=task.restarts + 1)
        )
        if task.abandon_on_restart and not task.abort_requested:
            draft.emit(AbortMarked(task_id=task_id, at=ctx.now, rule=9, reason="restart"))
        elif parked(task, ctx.restart_limit):
            parked_ids.append(task_id)
    for task_id in sorted(world.live):
        task = draft.get(task_id)
        if task is not None and task.cancelling():
            _cascade(draft, ctx, task_id)
    for task_id in sorted(world.live):
        task = draft.get(task_id)
        if task is not None and task.status == "completing" and not draft.live_children(task_id):
            _release_owner(draft, ctx, task_id)
    return parked_ids


def stop(draft: Draft, ctx: Context, task_ids: Iterable[str]) -> None:
    """Rule 10, at close: tasks the close stops go back to pending, no restart counted."""
    for task_id in task_ids:
        task = draft.get(task_id)
        if task is not None and task.status == "running":
            # 10. Close is not a crash.
            draft.emit(TaskStopped(task_id=task_id, at=ctx.now, rule=10))


def retry(draft: Draft, ctx: Context, task_id: str) -> bool:
    """Rule 9: clear a parked task's restart count. Returns whether it was parked."""
    _not_closing(ctx, task_id)
    task = _task(draft, task_id)
    # 9. retry of a non-parked task does nothing.
    if task.status in ("terminal", "completing", "running") or not parked(task, ctx.restart_limit):
        return False
    draft.emit(RestartsCleared(task_id=task_id, at=ctx.now))
    return True


Readiness = str
"""``ready``, ``running``, ``held``, ``waiting``, ``sleeping``, ``owned_work``,
``cascade`` or a blocked reason (rule 13)."""


def readiness(
    draft: Draft,
    ctx: Context,
    task: TaskState,
    registry: Registry,
    failed_migrations: Iterable[str] = (),
) -> Readiness:
    """Whether a live task can be reserved now, and if not, what it waits for.

    ``ready`` means a pass would reserve it (or end it by rule 12 or 13);
    ``running`` that an invocation owns it. Rules 15 and 13 are answered from
    this.
    """
    if task.status == "completing":
        return "held"
    if task.status == "running" and not (task.mode == "run" and task.abort_requested):
        return "running"
    if not task.request_marked and cancelling_ancestor(draft, task.id) is not None:
        return "ready"  # its cascade mark is due (rule 6), which is work
    if task.abort_requested:
        if draft.live_children(task.id):
            return "owned_work"
        if not task.request_marked:
            fit = definition_fit(task, registry.get(task.kind), failed_migrations)
            if fit not in ("same", "migrate"):
                return fit
        return "ready"
    if task.status == "waiting" and not wait_satisfied(draft, task):
        return "waiting"
    if task.status == "sleeping" and task.until is not None and ctx.now < task.until:
        return "sleeping"
    if parked(task, ctx.restart_limit):
        return "restart_limit"
    fit = definition_fit(task, registry.get(task.kind), failed_migrations)
    return fit if fit not in ("same", "migrate") else "ready"
