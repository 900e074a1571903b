"""Controller passes (SPEC.md section 2, the yui controller): scope, blocking, concurrency, retries.

A pass takes a scope: ``"full"`` (every task with Turn work, plus the
``operator`` lane), or dirty keys: ``task:<id>`` (every role of that task),
``role:<id>/<role>`` (one role) and ``operator`` (scheduler-wide work: due
task-pass retries fire in it). Key parts are URI-encoded
(:func:`task_key`, :func:`role_key`); a malformed key is an
:class:`~.errors.InvalidArgument` naming it, before anything is written.

For each task in scope a pass, in this order:

1. defers it, if one of its projects is under maintenance (deferred, never
   failed, not retried);
2. drains its runtime events (:meth:`Runtime.drain`); if that fails the task is
   **blocked** for the pass (and gets a task-pass retry);
3. runs the per-task pass, serialized per task (a lock per task, across passes
   too) and concurrent across tasks up to ``concurrency`` (default 4, at most
   32): cleanup obligations, deliveries, due completions then liveness, the
   Leader wakeup (:mod:`.turn_rules`);
4. if the per-task pass raised, records it **failed** and retries it with capped
   exponential backoff (``min(2000, base * 2**min(attempt, 3))`` ms) up to the
   limit (defaults 250 ms base, 2 retries: after 250 then 500 ms). A retry fires
   in the ``operator`` lane once due (a full pass includes that lane), with the
   keys that failed. Any pass that covers the task consumes its retry: a success
   clears it, another failure of the same keys counts as the next retry, a
   failure of other keys starts again at attempt 0.

Every decision is an event: ``PassStarted``/``PassFinished`` and the per-task
``PassTaskBlocked``/``PassTaskDeferred``/``PassTaskFailed`` on the pass's own
stream ``pass:<pass id>``; task-pass retries on ``task-pass:<task id>``; and
the Turn, wakeup and cleanup events the rules emit, each carrying the
``pass_id``. Scheduler-wide pass events have ``task_id`` ``""``.
"""

from __future__ import annotations

import re
import threading
import uuid
from collections.abc import Callable, Collection, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, ClassVar, Literal
from urllib.parse import quote, unquote

from ..errors import InvalidArgument, RuleViolation
from ..tasks.context import Context
from ..tasks.events import TaskEvent, register_event
from ..tasks.evolve import InvalidTransition, evolves_stream
from ..world import Draft, World, register_indexer
from .rules import (
    active_turn,
    cleanup_state,
    completed,
    deliver_turn,
    deliveries_due,
    dispatch_wakeup,
    fold_turns,
    require_cleanups,
    settle_cleanup,
    wakeup_deadline,
)
from .state import (
    LEADER,
    DeliveryOutcome,
    TurnSettings,
    WakeupEvent,
    check_concurrency,
    retry_delay_ms,
)

if TYPE_CHECKING:
    from ..app.turn_commands import TurnCommands

SCHEDULER_WIDE = ""
"""The ``task_id`` of pass events that are about no one task."""
OPERATOR_KEY = "operator"
PASS_STREAM_PREFIX = "pass:"
TASK_PASS_STREAM_PREFIX = "task-pass:"
_URI_SAFE = "-_.!~*'()"  # what encodeURIComponent leaves alone


# ─── dirty keys ─────────────────────────────────────────────────────────────


def _encode(part: str) -> str:
    return quote(part, safe=_URI_SAFE)


def task_key(task_id: str) -> str:
    """The dirty key of every role of a task: ``task:<URI-encoded id>``."""
    return f"task:{_encode(task_id)}"


def role_key(task_id: str, role: str) -> str:
    """The dirty key of one role of a task: ``role:<URI-encoded id>/<URI-encoded role>``."""
    return f"role:{_encode(task_id)}/{_encode(role)}"


@dataclass(frozen=True, slots=True)
class DirtyKey:
    """A parsed dirty key: ``operator``, a task, or one role of a task."""

    text: str
    kind: Literal["operator", "task", "role"]
    task_id: str | None = None
    role: str | None = None


def _bad_key(key: object, why: str) -> InvalidArgument:
    return InvalidArgument(
        f"controller key is invalid: {key!r} ({why}); expected 'operator', 'task:<id>' or "
        "'role:<id>/<role>' with URI-encoded parts (see task_key and role_key)"
    )


def _decode_part(key: str, part: str, what: str) -> str:
    if not part:
        raise _bad_key(key, f"the {what} is empty")
    try:
        decoded = unquote(part, errors="strict")
    except UnicodeDecodeError:
        raise _bad_key(key, f"the {what} is not valid percent-encoded UTF-8") from None
    if not decoded.strip():
        raise _bad_key(key, f"the {what} is blank")
    if decoded != decoded.strip():
        raise _bad_key(key, f"the {what} has surrounding whitespace")
    if "\x00" in decoded:
        raise _bad_key(key, f"the {what} contains NUL")
    if _encode(decoded) != part:
        raise _bad_key(key, f"the {what} is not canonically encoded; use {_encode(decoded)!r}")
    return decoded


def parse_key(key: object) -> DirtyKey:
    """Parse one dirty key, or raise :class:`~.errors.InvalidArgument` naming it."""
    if not isinstance(key, str):
        raise _bad_key(key, "a key is a string")
    if key == OPERATOR_KEY:
        return DirtyKey(key, "operator")
    kind, sep, rest = key.partition(":")
    if not sep or kind not in ("task", "role"):
        raise _bad_key(key, "unknown kind")
    if kind == "task":
        return DirtyKey(key, "task", _decode_part(key, rest, "task id"))
    parts = rest.split("/")
    if len(parts) != 2:
        raise _bad_key(key, "a role key holds exactly one '/' between task id and role")
    return DirtyKey(
        key, "role", _decode_part(key, parts[0], "task id"), _decode_part(key, parts[1], "role")
    )


def natural_key(text: str) -> tuple[tuple[int, int | str], ...]:
    """Numeric-aware ordering (``t2`` before ``t10``), as yui sorts ids."""
    return tuple(
        (0, int(piece)) if piece.isdigit() else (1, piece)
        for piece in re.split(r"(\d+)", text)
        if piece
    )


# ─── events ─────────────────────────────────────────────────────────────────


@dataclass(frozen=True, kw_only=True, slots=True)
class PassEvent(TaskEvent):
    """Base of the events of one controller pass, on its stream ``pass:<pass id>``."""

    task_stream: ClassVar[bool] = False
    pass_id: str

    def stream_id(self) -> str:
        """The pass's own stream."""
        return f"{PASS_STREAM_PREFIX}{self.pass_id}"


@dataclass(frozen=True, kw_only=True, slots=True)
class PassStarted(PassEvent):
    """A pass began: its scope (``full`` or ``dirty``), its keys, the tasks it
    covers (in order), its concurrency bound and the tasks a due retry added."""

    scope: str
    keys: tuple[str, ...]
    task_ids: tuple[str, ...]
    concurrency: int
    retried: tuple[str, ...] = ()


@dataclass(frozen=True, kw_only=True, slots=True)
class PassTaskBlocked(PassEvent):
    """The task's runtime events failed: it is blocked for this pass."""

    error: str


@dataclass(frozen=True, kw_only=True, slots=True)
class PassTaskDeferred(PassEvent):
    """The task's projects ``project_ids`` are under maintenance: deferred, not failed."""

    project_ids: tuple[str, ...]


@dataclass(frozen=True, kw_only=True, slots=True)
class PassTaskFailed(PassEvent):
    """The per-task pass raised ``error``."""

    error: str


@dataclass(frozen=True, kw_only=True, slots=True)
class PassFinished(PassEvent):
    """The pass ended: which tasks it did, blocked, deferred, failed or skipped."""

    done: tuple[str, ...] = ()
    blocked: tuple[str, ...] = ()
    deferred: tuple[str, ...] = ()
    failed: tuple[str, ...] = ()
    skipped: tuple[str, ...] = ()


@dataclass(frozen=True, kw_only=True, slots=True)
class TaskPassEvent(TaskEvent):
    """Base of a task's task-pass retry events, on ``task-pass:<task id>``."""

    task_stream: ClassVar[bool] = False
    pass_id: str | None = None

    def stream_id(self) -> str:
        """The task's retry stream."""
        return f"{TASK_PASS_STREAM_PREFIX}{self.task_id}"


@dataclass(frozen=True, kw_only=True, slots=True)
class TaskPassRetryScheduled(TaskPassEvent):
    """The failed per-task pass runs again at ``retry_at`` (``attempt`` earlier retries)."""

    keys: tuple[str, ...]
    attempt: int
    retry_at: float


@dataclass(frozen=True, kw_only=True, slots=True)
class TaskPassRetryAbandoned(TaskPassEvent):
    """The retry limit was reached: no more retries of this failure."""

    keys: tuple[str, ...]
    attempts: int


@dataclass(frozen=True, kw_only=True, slots=True)
class TaskPassRetryCleared(TaskPassEvent):
    """The retry is no longer needed: ``succeeded`` or ``task_ended``."""

    why: str


PASS_EVENT_TYPES: tuple[type[TaskEvent], ...] = (
    PassStarted,
    PassTaskBlocked,
    PassTaskDeferred,
    PassTaskFailed,
    PassFinished,
    TaskPassRetryScheduled,
    TaskPassRetryAbandoned,
    TaskPassRetryCleared,
)
for _cls in PASS_EVENT_TYPES:
    register_event(_cls)


# ─── state and folds ────────────────────────────────────────────────────────


@dataclass(frozen=True, slots=True)
class PassState:
    """One controller pass, as its events recorded it."""

    pass_id: str
    scope: str
    keys: tuple[str, ...]
    task_ids: tuple[str, ...]
    concurrency: int
    started_at: float
    retried: tuple[str, ...] = ()
    blocked: dict[str, str] = field(default_factory=dict)
    deferred: dict[str, tuple[str, ...]] = field(default_factory=dict)
    failed: dict[str, str] = field(default_factory=dict)
    done: tuple[str, ...] = ()
    finished_at: float | None = None


@dataclass(frozen=True, slots=True)
class TaskPassRetry:
    """A task's armed task-pass retry: its keys, earlier retries, and when it is due."""

    task_id: str
    keys: tuple[str, ...]
    attempt: int
    retry_at: float


@evolves_stream(PassStarted, PassTaskBlocked, PassTaskDeferred, PassTaskFailed, PassFinished)
def _pass(state: PassState | None, event: Any) -> PassState:
    if isinstance(event, PassStarted):
        if state is not None:
            raise InvalidTransition(f"pass {event.pass_id} started twice")
        return PassState(
            event.pass_id,
            event.scope,
            event.keys,
            event.task_ids,
            event.concurrency,
            event.at,
            event.retried,
        )
    if state is None or state.finished_at is not None:
        raise InvalidTransition(f"pass {event.pass_id}: {type(event).__name__} outside the pass")
    if isinstance(event, PassTaskBlocked):
        return replace(state, blocked={**state.blocked, event.task_id: event.error})
    if isinstance(event, PassTaskDeferred):
        return replace(state, deferred={**state.deferred, event.task_id: event.project_ids})
    if isinstance(event, PassTaskFailed):
        return replace(state, failed={**state.failed, event.task_id: event.error})
    return replace(state, done=event.done, finished_at=event.at)


@evolves_stream(TaskPassRetryScheduled, TaskPassRetryAbandoned, TaskPassRetryCleared)
def _task_pass_retry(state: TaskPassRetry | None, event: Any) -> TaskPassRetry | None:
    if isinstance(event, TaskPassRetryScheduled):
        return TaskPassRetry(event.task_id, event.keys, event.attempt, event.retry_at)
    return None


def _index(world: World, event: TaskEvent, previous: Any, state: Any) -> None:
    """Keep ``world.indexes``: ``pending_wakeups``, ``task_pass_retries`` and
    ``open_cleanups`` (task id -> open roles), for passes and projections."""
    if isinstance(event, WakeupEvent):
        wakeups: dict[str, Any] = world.indexes.setdefault("pending_wakeups", {})
        if state is None:
            wakeups.pop(event.task_id, None)
        else:
            wakeups[event.task_id] = state
    elif isinstance(event, TaskPassEvent):
        retries: dict[str, TaskPassRetry] = world.indexes.setdefault("task_pass_retries", {})
        if state is None:
            retries.pop(event.task_id, None)
        else:
            retries[event.task_id] = state
    elif event.stream_id().startswith("cleanup:"):
        cleanups: dict[str, list[str]] = world.indexes.setdefault("open_cleanups", {})
        open_roles = state.open_roles()
        if open_roles:
            cleanups[event.task_id] = open_roles
        else:
            cleanups.pop(event.task_id, None)


register_indexer(_index, task_streams=False)  # wakeup, task-pass and cleanup streams


def pending_wakeups(world: World) -> dict[str, Any]:
    """Every pending Leader wakeup, by task id (:class:`~.turns.WakeupState` values)."""
    return dict(world.indexes.get("pending_wakeups", {}))


def task_pass_retries(world: World) -> dict[str, TaskPassRetry]:
    """Every armed task-pass retry, by task id."""
    return dict(world.indexes.get("task_pass_retries", {}))


# ─── decisions of a pass ────────────────────────────────────────────────────


def start_pass(
    draft: Draft,
    ctx: Context,
    pass_id: str,
    scope: str,
    keys: Sequence[str],
    task_ids: Sequence[str],
    concurrency: int,
    retried: Sequence[str],
    ended_retries: Sequence[str],
) -> None:
    """Record a pass's start, clearing the retries of tasks that have ended."""
    if ctx.closing:
        raise RuleViolation(2, "the scheduler is closing; no pass runs")
    for task_id in ended_retries:
        draft.emit_stream(
            TaskPassRetryCleared(task_id=task_id, at=ctx.now, why="task_ended", pass_id=pass_id)
        )
    draft.emit_stream(
        PassStarted(
            task_id=SCHEDULER_WIDE,
            at=ctx.now,
            pass_id=pass_id,
            scope=scope,
            keys=tuple(keys),
            task_ids=tuple(task_ids),
            concurrency=concurrency,
            retried=tuple(retried),
        )
    )


def defer_task(
    draft: Draft, ctx: Context, pass_id: str, task_id: str, project_ids: Sequence[str]
) -> None:
    """A task of a project under maintenance is deferred for the pass (never failed)."""
    draft.emit_stream(
        PassTaskDeferred(
            task_id=task_id, at=ctx.now, pass_id=pass_id, project_ids=tuple(project_ids)
        )
    )


def record_task_failure(
    draft: Draft,
    ctx: Context,
    settings: TurnSettings,
    pass_id: str,
    task_id: str,
    keys: Sequence[str],
    error: str,
    *,
    blocked: bool,
) -> float | None:
    """Record a blocked or failed per-task pass and arm its retry; returns when the
    retry is due, or ``None`` once the retry limit is reached (or the task ended)."""
    event_type = PassTaskBlocked if blocked else PassTaskFailed
    draft.emit_stream(event_type(task_id=task_id, at=ctx.now, pass_id=pass_id, error=error))
    task = draft.get(task_id)
    if task is None or not task.live:
        return None
    retry: TaskPassRetry | None = draft.get_stream(f"{TASK_PASS_STREAM_PREFIX}{task_id}")
    identity = tuple(sorted(keys, key=natural_key))
    # A retry of other keys is another failure: its attempts start again.
    attempt = retry.attempt + 1 if retry is not None and retry.keys == identity else 0
    if attempt >= settings.task_pass_retry_limit:
        draft.emit_stream(
            TaskPassRetryAbandoned(
                task_id=task_id, at=ctx.now, keys=identity, attempts=attempt, pass_id=pass_id
            )
        )
        return None
    retry_at = ctx.now + retry_delay_ms(settings.task_pass_retry_base_ms, attempt)
    draft.emit_stream(
        TaskPassRetryScheduled(
            task_id=task_id,
            at=ctx.now,
            keys=identity,
            attempt=attempt,
            retry_at=retry_at,
            pass_id=pass_id,
        )
    )
    return retry_at


def record_task_success(draft: Draft, ctx: Context, pass_id: str, task_id: str) -> None:
    """A per-task pass that succeeded clears the task's retry."""
    if draft.get_stream(f"{TASK_PASS_STREAM_PREFIX}{task_id}") is not None:
        draft.emit_stream(
            TaskPassRetryCleared(task_id=task_id, at=ctx.now, why="succeeded", pass_id=pass_id)
        )


def finish_pass(draft: Draft, ctx: Context, pass_id: str, outcomes: dict[str, str]) -> None:
    """Record the end of a pass with what it did to each task."""

    def having(status: str) -> tuple[str, ...]:
        return tuple(t for t, s in outcomes.items() if s == status)

    draft.emit_stream(
        PassFinished(
            task_id=SCHEDULER_WIDE,
            at=ctx.now,
            pass_id=pass_id,
            done=having("done"),
            blocked=having("blocked"),
            deferred=having("deferred"),
            failed=having("failed"),
            skipped=having("skipped"),
        )
    )


# ─── what a pass asks of the runtime ────────────────────────────────────────


class Runtime:
    """What a controller pass asks of the agent runtime. Override what yours does;
    the defaults do nothing (a pass then only applies the rules to recorded events).

    Hooks run in the pass's worker threads, inside the task's lock: a hook may
    call the scheduler's commands for its own task.
    """

    def drain(self, scheduler: Any, task_id: str) -> None:
        """Apply the task's pending runtime events (exits, completions, progress)
        through the scheduler's commands. Raise if they cannot be applied: the
        task is then blocked for this pass."""

    def deliver(
        self, task_id: str, role: str, turn_id: str, attempt: int
    ) -> DeliveryOutcome | None:
        """Hand a Turn to its runtime and say how that went (``None``: this
        runtime does not deliver; the Turn is left as it is)."""
        return None

    def steer(self, task_id: str, turn_id: str, reasons: tuple[str, ...]) -> None:
        """Inject a forced wakeup's reasons into the busy Leader Turn ``turn_id``."""

    def cleanup(self, task_id: str, role: str) -> bool:
        """Clean up a completed task's role runtime: ``True`` once done (the
        obligation is settled), ``False`` to leave it open; raise on failure."""
        return False


# ─── the pass ───────────────────────────────────────────────────────────────

TaskOutcome = Literal["done", "blocked", "deferred", "failed", "skipped"]


@dataclass
class ControllerPassReport:
    """What one controller pass did, task by task, in scope order."""

    pass_id: str
    scope: str
    keys: tuple[str, ...]
    tasks: list[str] = field(default_factory=list)
    outcomes: dict[str, TaskOutcome] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)
    """Why each blocked or failed task was."""
    deferred: dict[str, tuple[str, ...]] = field(default_factory=dict)
    """Deferred tasks and their projects under maintenance."""
    retries: dict[str, float | None] = field(default_factory=dict)
    """Blocked or failed tasks: when their retry is due (``None``: abandoned)."""
    retried: list[str] = field(default_factory=list)
    """Tasks a due task-pass retry brought into this pass."""
    wakeups: dict[str, str] = field(default_factory=dict)
    """What the wakeup step did per task (``dispatched``, ``steered``, ``dropped``, ``busy``...)."""
    turns: dict[str, dict[str, str]] = field(default_factory=dict)
    """Turns the pass ended, task -> role -> ``completed``/``exited``/``stalled``/``failed``."""

    def having(self, outcome: TaskOutcome) -> list[str]:
        """The tasks with that outcome, in scope order."""
        return [t for t in self.tasks if self.outcomes.get(t) == outcome]

    @property
    def done(self) -> list[str]:
        """Tasks whose per-task pass ran through."""
        return self.having("done")

    @property
    def blocked(self) -> list[str]:
        """Tasks blocked for the pass: their runtime events failed."""
        return self.having("blocked")

    @property
    def failed(self) -> list[str]:
        """Tasks whose per-task pass raised."""
        return self.having("failed")


Maintenance = Collection[str] | Callable[[str], bool]


def _under_maintenance(maintenance: Maintenance, project_ids: Iterable[str]) -> list[str]:
    if callable(maintenance):
        return [p for p in project_ids if maintenance(p)]
    return [p for p in project_ids if p in maintenance]


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
            if task is None or not task.live:
                ended.append(task_id)
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
    ordered = sorted(known, key=natural_key)
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
    wakeups = world.indexes.get("pending_wakeups", {})
    cleanups = world.indexes.get("open_cleanups", {})
    out = []
    for task_id, task in list(world.tasks.items()):
        if task_id in wakeups or task_id in cleanups:
            out.append(task_id)
        elif task.roles and (task.live or completed(task)):
            if task.live:
                out.append(task_id)
                continue
            # A completed terminal task has work while a role still lacks its obligation.
            state = cleanup_state(world, task_id)
            known = state.obligations if state is not None else {}
            if any(role not in known for role in task.roles):
                out.append(task_id)
    return out


def run_pass(
    host: TurnCommands,
    scope: object = "full",
    *,
    runtime: Runtime | None = None,
    concurrency: int | None = None,
    maintenance: Maintenance = (),
) -> ControllerPassReport:
    """Run one controller pass for ``host`` (a Scheduler); see the module docstring."""
    settings = host.turn_settings
    bound = check_concurrency(
        settings.task_concurrency if concurrency is None else concurrency, "concurrency"
    )
    with host._lock:
        the_plan = plan(host.world, scope, host.clock())
    pass_id = uuid.uuid4().hex
    tasks = list(the_plan.roles)
    report = ControllerPassReport(pass_id, the_plan.scope, tuple(the_plan.keys), tasks)
    report.retried = list(the_plan.retried)
    host._decide(
        start_pass,
        pass_id,
        the_plan.scope,
        the_plan.keys,
        tasks,
        bound,
        the_plan.retried,
        the_plan.ended_retries,
    )
    work: list[str] = []
    for task_id in tasks:
        task = host.world.get(task_id)
        fenced = _under_maintenance(maintenance, task.project_ids) if task is not None else []
        if fenced:
            host._decide(defer_task, pass_id, task_id, fenced)
            report.outcomes[task_id] = "deferred"
            report.deferred[task_id] = tuple(fenced)
        else:
            work.append(task_id)
    if work:
        worker = _TaskPass(host, settings, pass_id, runtime, report)
        with ThreadPoolExecutor(
            max_workers=min(bound, len(work)), thread_name_prefix="tasktrail-pass"
        ) as pool:
            futures = {
                task_id: pool.submit(
                    worker.run, task_id, the_plan.roles[task_id], the_plan.task_keys[task_id]
                )
                for task_id in work
            }
            for task_id in work:  # merged in scope order
                report.outcomes[task_id] = futures[task_id].result()
    if not host.closing:
        host._decide(finish_pass, pass_id, {t: report.outcomes.get(t, "skipped") for t in tasks})
    return report


class _TaskPass:
    """The per-task pass, run in a worker thread under the task's lock."""

    def __init__(
        self,
        host: TurnCommands,
        settings: TurnSettings,
        pass_id: str,
        runtime: Runtime | None,
        report: ControllerPassReport,
    ) -> None:
        self.host = host
        self.settings = settings
        self.pass_id = pass_id
        self.runtime = runtime
        self.report = report
        self._report_lock = threading.Lock()

    def run(self, task_id: str, roles: set[str] | None, keys: tuple[str, ...]) -> TaskOutcome:
        host = self.host
        with host._task_lock(task_id):
            if host.closing:
                return "skipped"
            # Tasks whose runtime events failed are blocked for the pass.
            if self.runtime is not None:
                try:
                    self.runtime.drain(host, task_id)
                except Exception as error:
                    return self._failure(task_id, keys, error, blocked=True)
            try:
                self._work(task_id, roles)
                host._decide(record_task_success, self.pass_id, task_id)
            except Exception as error:
                if host.closing:
                    return "skipped"
                return self._failure(task_id, keys, error, blocked=False)
            return "done"

    def _failure(
        self, task_id: str, keys: tuple[str, ...], error: Exception, *, blocked: bool
    ) -> TaskOutcome:
        message = _describe(error)
        retry_at: float | None = None
        try:
            retry_at = self.host._decide(
                record_task_failure,
                self.settings,
                self.pass_id,
                task_id,
                keys,
                message,
                blocked=blocked,
            )
        except Exception as recording:
            # The store refused the record too (closing, gone): the report still says why.
            message = f"{message} (not recorded: {_describe(recording)})"
        with self._report_lock:
            self.report.errors[task_id] = message
            self.report.retries[task_id] = retry_at
        return "blocked" if blocked else "failed"

    def _ended(self, task_id: str, role: str, how: str) -> None:
        with self._report_lock:
            self.report.turns.setdefault(task_id, {})[role] = how

    def _work(self, task_id: str, roles: set[str] | None) -> None:
        host, settings, pass_id, runtime = self.host, self.settings, self.pass_id, self.runtime
        # Runtime-cleanup obligations of a completed task's roles.
        host._decide(require_cleanups, settings, task_id, roles, pass_id=pass_id)
        state = cleanup_state(host.world, task_id)
        if runtime is not None and state is not None:
            for role in state.open_roles():
                if roles is not None and role not in roles:
                    continue
                try:
                    cleaned = runtime.cleanup(task_id, role)
                except Exception as error:
                    host._decide(
                        settle_cleanup,
                        settings,
                        task_id,
                        role,
                        error=_describe(error),
                        pass_id=pass_id,
                    )
                    continue
                if cleaned:
                    host._decide(settle_cleanup, settings, task_id, role, pass_id=pass_id)
        # Deliveries of active Turns; delivery-uncertain ones are exempt from exit liveness.
        unsettled: set[str] = set()
        if runtime is not None:
            for turn in deliveries_due(host.world.get(task_id), host.clock(), roles):
                outcome = runtime.deliver(task_id, turn.role, turn.turn_id, turn.delivery_attempts)
                if outcome is None:
                    continue
                decision = host._decide(
                    deliver_turn,
                    settings,
                    task_id,
                    turn.role,
                    turn.turn_id,
                    outcome,
                    pass_id=pass_id,
                )
                if outcome == "delivery-uncertain":
                    unsettled.add(turn.turn_id)
                if decision.status in ("failed", "completed"):
                    self._ended(task_id, turn.role, decision.status)
        # Due completions, then liveness: a completion meeting an exit or stall wins.
        ended = host._decide(
            fold_turns, settings, task_id, roles, unsettled=unsettled, pass_id=pass_id
        )
        for role, how in ended.items():
            self._ended(task_id, role, how)
        # The Leader wakeup, once the Leader's Turns are settled for this pass.
        if roles is None or LEADER in roles:
            wakeup = host._decide(dispatch_wakeup, settings, task_id, pass_id=pass_id)
            if wakeup.status != "none":
                with self._report_lock:
                    self.report.wakeups[task_id] = wakeup.status
            if wakeup.status == "steered" and runtime is not None and wakeup.turn_id is not None:
                runtime.steer(task_id, wakeup.turn_id, wakeup.reasons)


def _describe(error: BaseException) -> str:
    text = str(error).strip()
    return f"{type(error).__name__}: {text}" if text else type(error).__name__


# ─── deadlines ──────────────────────────────────────────────────────────────


def next_deadline(world: World, settings: TurnSettings) -> float | None:
    """The earliest time a controller pass has Turn work: a delivery retry, a
    completion coming due, a stall window ending, a wakeup's aggregation or force
    window, a task-pass retry. A time in the past means: due now."""
    times: list[float] = []
    for task in list(world.tasks.values()):
        if task.status == "terminal":
            continue
        for role in task.roles.values():
            turn = role.active
            if turn is None:
                continue
            if turn.status == "started" and not turn.delivery_held and turn.retry_at is not None:
                times.append(turn.retry_at)
            if turn.completion_due_at is not None:
                times.append(turn.completion_due_at)
            times.append(turn.progress_at + settings.stall_window_ms)
    for task_id, wakeup in pending_wakeups(world).items():
        busy = active_turn(world.get(task_id), LEADER) is not None
        times.append(wakeup_deadline(wakeup, busy, settings))
    times.extend(retry.retry_at for retry in task_pass_retries(world).values())
    return min(times) if times else None


__all__ = [
    "OPERATOR_KEY",
    "SCHEDULER_WIDE",
    "ControllerPassReport",
    "DirtyKey",
    "PassEvent",
    "PassFinished",
    "PassStarted",
    "PassState",
    "PassTaskBlocked",
    "PassTaskDeferred",
    "PassTaskFailed",
    "Runtime",
    "TaskPassRetry",
    "TaskPassRetryAbandoned",
    "TaskPassRetryCleared",
    "TaskPassRetryScheduled",
    "next_deadline",
    "parse_key",
    "pending_wakeups",
    "role_key",
    "run_pass",
    "task_key",
    "task_pass_retries",
]
