"""Starting a task: ``submit`` creates it and ``reserve`` hands it to an invocation.

The ``decide`` functions of SPEC.md section 1 that bring a task into being
(:func:`submit`, rules 4 to 6) and give it to an invocation in ``run`` or
``abort`` mode (:func:`reserve`, rules 3 to 9, 12 and 13). Each takes a
:class:`~..world.Draft` and a :class:`~.context.Context`, emits the events the
command produces into the draft, or raises :class:`~..errors.RuleViolation`
(or another :class:`~..errors.Refused`) naming the rule and the task, which
appends nothing.

Each rule is applied in exactly one place, with its number in a comment above
the branch that applies it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ..errors import InvalidArgument, InvalidFlowPolicy, Refused, RuleViolation, TaskIdTaken
from ..world import Draft
from .asks import close_asks, close_timed_out_ask
from .context import Context
from .definitions import Registry, definition_fit, parked
from .describe import waiting_for_message
from .ending import cancelling_ancestor, end
from .events import AbortMarked, Mode, TaskEvent, TaskMigrated, TaskReserved, TaskSubmitted
from .guards import held_elsewhere, invocation_decision, not_closing
from .keys import KeyClaimed, check_key, key_holder
from .limits import keys_event, recorded_keys, take_flow
from .messages import message_wait_over
from .restart_limit import limit_deciding
from .state import Flow, Outcome, TaskState
from .validation import act_fields, json_value, phase_name, require_task
from .waits import wait_satisfied

PRIORITY_MIN, PRIORITY_MAX = -1000, 1000
"""The priorities a submission may give (rule 19): bounded, so that no number a caller
makes up (a timestamp, say) silently outranks every ordinary priority."""


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
    attempt: int | None = None,
    memos: Mapping[str, Any] | None = None,
    actor: str | None = None,
    why: str | None = None,
    origin: TaskEvent | None = None,
    key: str | None = None,
    priority: int = 0,
    flow: Flow | None = None,
) -> TaskState:
    """Create a task, ``pending`` at the checkpoint ``phase`` (and ``attempt``) with
    ``memos`` (its input: names to JSON values), submitted by ``actor`` because ``why``.

    ``origin``: an event of the new task to record right after its submission (a fork's
    :class:`~.forking.TaskForked`), before any rule reacts to the new task. ``key``: an
    idempotency key (rule 18); ``priority``: the order among ready tasks (rule 19);
    ``flow``: the keys its definition's limit and rate gave it (rules 33, 34), recorded.
    Returns the new task; for a key that names a task already, that task, recording
    nothing (whatever the other arguments).
    """
    not_closing(ctx, task_id)
    if key is not None:
        # 18. A key names one task for as long as its history is kept: a later
        # submission with it is that task, and appends nothing.
        holder = key_holder(draft, check_key(key, task_id))
        if holder is not None:
            return require_task(draft, holder)
    if not isinstance(task_id, str) or not task_id:
        raise InvalidArgument(f"a task id must be a non-empty string, not {task_id!r}")
    if draft.get(task_id) is not None:
        raise TaskIdTaken(task_id)
    phase_name(kind, "kind", task_id)
    phase_name(phase, "phase", task_id)
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
    act = act_fields(actor, why, task_id)
    check_priority(priority, task_id)
    if attempt is not None and (
        isinstance(attempt, bool) or not isinstance(attempt, int) or attempt < 0
    ):
        raise InvalidArgument(f"attempt must be an int >= 0, not {attempt!r}", task_id=task_id)
    given = checked_memos(memos, task_id)
    if owner_id is not None:
        owner = require_task(draft, owner_id)
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
            attempt=attempt,
            memos=given,
            priority=priority,
            key=key,
            **act,
        )
    )
    if origin is not None:
        state = draft.emit(origin)
    if flow is not None:
        state = draft.emit(keys_event(task_id, ctx.now, flow))
    if key is not None:
        # Version 1 of the key's stream: of two writers that decided on the same new key,
        # the store's version check lets one in (domain/service/keys.py reads the winner).
        draft.emit_stream(KeyClaimed(task_id=task_id, at=ctx.now, key=key))
    # 6. Work submitted below a cancelling owner is marked at once.
    cancelling = cancelling_ancestor(draft, task_id)
    if cancelling is not None:
        state = draft.emit(AbortMarked(task_id=task_id, at=ctx.now, rule=6, by=cancelling.id))
    return state


def check_priority(priority: object, task_id: str | None) -> int:
    """Rule 19's argument check: a priority is an int from PRIORITY_MIN to PRIORITY_MAX
    (a bool is not one)."""
    if (
        isinstance(priority, bool)
        or not isinstance(priority, int)
        or not PRIORITY_MIN <= priority <= PRIORITY_MAX
    ):
        raise RuleViolation(
            19,
            f"priority must be an int from {PRIORITY_MIN} to {PRIORITY_MAX}, not {priority!r:.80}",
            task_id=task_id,
        )
    return priority


def submit_owned(draft: Draft, ctx: Context, owner_id: str, **submission: Any) -> TaskState:
    """A task submitted by the invocation running ``owner_id``, which owns it (a phase's
    ``Invocation.submit``): a decision of that invocation, so it is taken only while
    the invocation lasts (rules 2, 1, 9's fencing and 3, as for a checkpoint), then as
    :func:`submit` takes any submission with ``submission``'s arguments."""
    # 1, 3. An invocation that put its task to sleep, made it wait or finished it, or
    # whose run was abort-marked meanwhile, has ended: it submits nothing more.
    invocation_decision(draft, ctx, owner_id)
    return submit(draft, ctx, owner_id=owner_id, **submission)


def checked_memos(memos: object, task_id: str) -> dict[str, Any] | None:
    """A submission's memos as the log will read them back, checked as ``memo`` checks
    each; ``None`` for none."""
    if memos is None:
        return None
    if not isinstance(memos, Mapping):
        raise InvalidArgument(f"memos must be a mapping of names, not {memos!r}", task_id=task_id)
    checked: dict[str, Any] = {}
    for name, value in memos.items():
        phase_name(name, "memo name", task_id)
        checked[name] = json_value(value, f"memo {name!r}", task_id)
    return checked or None


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
    not_closing(ctx, task_id)
    task = require_task(draft, task_id)
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
    if held_elsewhere(task, ctx):
        raise Refused(
            f"the task is running in worker {task.worker}; its invocation there ends it",
            task_id=task_id,
        )
    # 6. A descendant waits for its cascade mark instead of running a phase.
    if not task.request_marked:
        cancelling = cancelling_ancestor(draft, task_id)
        if cancelling is not None:
            task = draft.emit(AbortMarked(task_id=task_id, at=ctx.now, rule=6, by=cancelling.id))
            close_asks(draft, ctx, task_id)  # 22. the mark beats an answer (.asks)
            task = require_task(draft, task_id)
    # 22. An abort mark beats a message, as it ends a wait or a sleep (rules 3, 8): the
    #     mode is the mark's, whatever arrived in the same instant, which stays unread.
    if task.abort_requested:
        return _reserve_abort(draft, ctx, task, registry, failed_migrations, migrated_phase)
    # 21. A message waiter stays waiting until a message on its topic is unread or its
    #     deadline passed.
    if task.message_topic is not None and not message_wait_over(task, ctx.now):
        raise RuleViolation(21, f"still waiting for {waiting_for_message(task)}", task_id=task_id)
    # 7. A waiter stays waiting until its policy is met.
    if task.status == "waiting" and not wait_satisfied(draft, task):
        raise RuleViolation(
            7, f"still waiting ({task.policy}) on {', '.join(task.on)}", task_id=task_id
        )
    # 8. A sleep is due when the clock reaches until.
    if task.status == "sleeping" and task.until is not None and ctx.now < task.until:
        raise RuleViolation(8, f"sleeping until {task.until}, now {ctx.now}", task_id=task_id)
    # 9. Cut off restart_limit times without progress: parked until retry().
    if parked(task, limit_deciding(draft, ctx, task)):
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
    close_timed_out_ask(draft, ctx, task)  # 21. resumed past its deadline: no answer
    try:
        # 36. Keys its submitter did not record (it did not know the definition's limit
        #     or rate) are recorded now, from its memos; a key function failing faults it.
        flow = recorded_keys(draft, ctx.now, task, registry)
    except InvalidFlowPolicy as refusal:
        faulted = Outcome("faulted", str(refusal), None, "flow_key")
        end(draft, ctx, require_task(draft, task_id), faulted, rule=36)
        return None
    # 33, 34. Held back while its limit key's slots are taken or its rate key's bucket
    #         is empty; else the reservation takes a slot and a token, on their streams.
    take_flow(draft, ctx.now, task, flow)
    if fit == "migrate":
        _migrate(draft, ctx, task, registry, migrated_phase)
    draft.emit(TaskReserved(task_id=task_id, at=ctx.now, mode="run", worker=ctx.worker))
    return "run"


def _migrate(
    draft: Draft, ctx: Context, task: TaskState, registry: Registry, phase: str | None
) -> None:
    """Record the task under the newer definition that takes it through ``migrate``."""
    definition = registry.get(task.kind)
    assert definition is not None and task.checkpoint is not None
    draft.emit(
        TaskMigrated(
            task_id=task.id,
            at=ctx.now,
            from_version=task.version,
            to_version=definition.version,
            phase=phase or task.checkpoint.phase,
        )
    )


def _reserve_abort(
    draft: Draft,
    ctx: Context,
    task: TaskState,
    registry: Registry,
    failed_migrations: Iterable[str],
    migrated_phase: str | None,
) -> Mode | None:
    # 12. An abort handler cut off restart_limit times ends faulted, at once: its owned
    #     work, marked already (rule 6), need not end first; the outcome is held (rule 5).
    if task.restarts >= limit_deciding(draft, ctx, task):
        end(
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
    # 3. An abort invocation is reserved only once ordinary owned live work is gone.
    if draft.live_children(task.id):
        raise RuleViolation(
            3,
            "abort-marked; its abort handler waits for the tasks it owns to end",
            task_id=task.id,
        )
    fit = definition_fit(task, registry.get(task.kind), failed_migrations)
    if fit not in ("same", "migrate"):
        # 13. A restart mark waits for a definition, blocked; a request mark that no
        #     definition can take ends orphaned once nothing it owns is live.
        if not task.request_marked:
            raise RuleViolation(13, f"blocked: {fit}", task_id=task.id)
        end(draft, ctx, task, Outcome("orphaned", None, None, fit), rule=13)
        return None
    # The abort handler runs under the definition that takes the task, as a phase would:
    # the migration it ran is recorded first (pi-durable resolves both modes alike).
    if fit == "migrate":
        _migrate(draft, ctx, task, registry, migrated_phase)
    draft.emit(TaskReserved(task_id=task.id, at=ctx.now, mode="abort", worker=ctx.worker))
    return "abort"
