"""Bringing a task into being: ``submit`` by a host or an operator, and ``submit_owned``,
a submission a running task's invocation makes (``Invocation.submit``), which is that
invocation's decision (rules 1 and 3 end it). Mixed into :class:`~.scheduler.Scheduler`
as :class:`SubmitCommands`.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, TypeVar

from ..errors import ConflictError, InvalidArgument, InvalidFlowPolicy, TaskIdTaken
from ..tasks import decide
from ..tasks.definitions import Registry
from ..tasks.flow import Debounce, flow_for
from ..telemetry import live as telemetry
from ..world import World

T = TypeVar("T")
DEBOUNCE_ATTEMPTS = 5
"""How often a debounced submission that lost its key's window to another writer's
append is decided again (each time on the log that holds the winner's)."""


class SubmitCommands:
    """``submit`` and ``submit_owned``, mixed into :class:`~.scheduler.Scheduler`."""

    registry: Registry

    if TYPE_CHECKING:
        world: World

        def _decide_grouped(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T: ...

        def _invocation_decision(
            self, task_id: str, fn: Callable[..., Any], /, *args: Any, **kwargs: Any
        ) -> None: ...

        async def _invocation_decision_async(
            self, task_id: str, fn: Callable[..., Any], /, *args: Any, **kwargs: Any
        ) -> None: ...

        def _keyed_submission(
            self, task_id: str, key: str | None, decide: Callable[[], None]
        ) -> str: ...

        def _key_winner(self, key: str, error: Exception) -> str: ...
        def task_of_key(self, key: str) -> str | None: ...

    def submit(
        self,
        kind: str,
        *,
        version: int | None = None,
        owner: str | None = None,
        phase: str | None = None,
        id: str | None = None,
        conversation_id: str | None = None,
        project_ids: Sequence[str] = (),
        trace: dict[str, str] | None = None,
        abandon_on_restart: bool = False,
        memos: Mapping[str, Any] | None = None,
        actor: str | None = None,
        reason: str | None = None,
        key: str | None = None,
        priority: int = 0,
        debounce: Debounce | None = None,
    ) -> str:
        """Create a ``pending`` task; returns its id.

        ``version`` and ``phase`` default to the registered definition's
        version and first phase. ``owner`` makes it owned work of that task
        (rules 5 and 6). ``abandon_on_restart``: the task does not outlive this
        process; every later open of a scheduler on the store (after a crash or a
        clean close) gives it a ``restart`` abort mark, whatever its status, so it
        runs its abort handler instead of resuming (as pi-durable does). ``memos``: what
        it starts with (its input, read with :meth:`memo`). ``actor`` and ``reason``:
        who submitted it and why, recorded on the event (an operator's act).
        ``key``: an idempotency key (rule 18): the first submission with it creates the
        task, every later one (from any process on the store) returns that task's id and
        records nothing, whatever its other arguments. ``priority``: an int from -1000 to
        1000 (rule 19), default 0; a worker whose slots are scarce starts higher
        priorities first, then in submission order. ``debounce``: a
        :class:`~..tasks.flow.Debounce` (rule 35): submits of ``kind`` with its key within
        its ``wait_s`` of each other are one task, ready ``wait_s`` after the last of
        them with its memos; each returns that task's id. The definition's ``limit`` and
        ``rate`` keys are computed here from ``memos`` and recorded (rule 36 refuses a key
        function that fails, appending nothing).
        """
        if debounce is not None and (key is not None or owner is not None):
            raise InvalidFlowPolicy("debounce= is a host's own submission: no key=, no owner=")
        task_id, submission = self._submission(
            kind,
            version=version,
            phase=phase,
            id=id,
            conversation_id=conversation_id,
            project_ids=project_ids,
            trace=trace,
            abandon_on_restart=abandon_on_restart,
            memos=memos,
            actor=actor,
            reason=reason,
            key=key,
            priority=priority,
        )

        if debounce is not None:
            return self._debounced_submission(task_id, debounce, submission)

        def decided() -> None:
            with claiming(self.world, task_id):
                self._decide_grouped(decide.submit, owner_id=owner, **submission)

        return self._keyed_submission(task_id, key, decided)

    def _debounced_submission(
        self, task_id: str, debounce: Debounce, submission: dict[str, Any]
    ) -> str:
        """A submission under ``debounce`` (rule 35): the task it collapsed into, or the
        new one. A race for the key's window another writer won (its append came first:
        a :class:`~..errors.ConflictError`) is decided again on the log that holds it."""
        for attempt in range(DEBOUNCE_ATTEMPTS):
            try:
                with claiming(self.world, task_id):
                    chosen: str = self._decide_grouped(
                        decide.submit_debounced, debounce=debounce, **submission
                    )
                    return chosen
            except ConflictError:
                if attempt == DEBOUNCE_ATTEMPTS - 1:
                    raise
        raise AssertionError("unreachable")

    def submit_owned(self, owner: str, kind: str, **options: Any) -> str:
        """Submit a task that ``owner`` owns, as ``owner``'s invocation running here
        decides it (what a phase's ``Invocation.submit`` calls); ``options`` are
        :meth:`submit`'s. It is that invocation's decision: once the invocation has
        ended (its task sleeps, waits or finished: rule 1; its run was abort-marked:
        rule 3) it raises :class:`~..errors.RuleViolation`, appends nothing and ends
        the invocation here, as a checkpoint would."""
        task_id, submission = self._submission(kind, **options)

        def decided() -> None:
            with claiming(self.world, task_id):
                self._invocation_decision(owner, decide.submit_owned, **submission)

        return self._keyed_submission(task_id, submission["key"], decided)

    async def submit_owned_async(self, owner: str, kind: str, **options: Any) -> str:
        """:meth:`submit_owned`, its decision queued for the group commit and awaited
        (:mod:`..invoking.loop_commit`). With ``key=``, the key's task is read after it, a moment
        under the lock."""
        task_id, submission = self._submission(kind, **options)
        key = submission["key"]
        try:
            with claiming(self.world, task_id):
                await self._invocation_decision_async(owner, decide.submit_owned, **submission)
        except (ConflictError, TaskIdTaken) as error:
            if key is None:
                raise
            return self._key_winner(key, error)
        return task_id if key is None else (self.task_of_key(key) or task_id)

    def _submission(
        self,
        kind: str,
        *,
        version: int | None = None,
        phase: str | None = None,
        id: str | None = None,
        conversation_id: str | None = None,
        project_ids: Sequence[str] = (),
        trace: dict[str, str] | None = None,
        abandon_on_restart: bool = False,
        memos: Mapping[str, Any] | None = None,
        actor: str | None = None,
        reason: str | None = None,
        key: str | None = None,
        priority: int = 0,
    ) -> tuple[str, dict[str, Any]]:
        """The new task's id and the arguments its :func:`~..tasks.decide.submit` takes
        besides the owner: the definition's version and first phase where not given."""
        definition = self.registry.get(kind) if isinstance(kind, str) else None
        if version is None:
            version = definition.version if definition is not None else 1
        if phase is None:
            if definition is None or not definition.phases:
                raise InvalidArgument(
                    f"submit({kind!r}) needs phase=...: "
                    "no registered definition names a first phase"
                )
            phase = next(iter(definition.phases))
        task_id = self._new_id(id)
        flow = None
        if definition is not None and (memos is None or isinstance(memos, Mapping)):
            # 36. The keys of its definition's limit and rate, from its memos, recorded.
            flow = flow_for(kind, definition.limit, definition.rate, memos, task_id)
        if trace is None:  # submitted while a span is current: keep its carrier
            trace = telemetry.current_carrier()
        return task_id, {
            "task_id": task_id,
            "kind": kind,
            "version": version,
            "phase": phase,
            "conversation_id": conversation_id,
            "project_ids": project_ids,
            "trace": trace,
            "abandon_on_restart": abandon_on_restart,
            "memos": memos,
            "actor": actor,
            "why": reason,
            "key": key,
            "priority": priority,
            "flow": flow,
        }

    def _new_id(self, id: str | None) -> str:
        if id is not None:
            return id
        task_id = uuid.uuid4().hex
        # 122 random bits name no stored task: no read asks the store whether one
        # was dropped from memory (the store's unique key would still refuse it). Not
        # under the lock, which a phase would wait for before it queues its submit: a
        # set's add is atomic, and a world put back meanwhile costs one read, no more.
        self.world.unknown.add(task_id)
        return task_id


@contextmanager
def claiming(world: World, task_id: str) -> Iterator[None]:
    """A command that submits ``task_id``: when the store refused its append because
    another writer's submission of the same id was appended first (both decided before
    either appended: PostgreSQL's writers can), :class:`~..errors.TaskIdTaken`, as the
    decision refuses a taken id it sees, never a :class:`~..errors.ConflictError` that
    deciding again could only turn into that refusal."""
    try:
        yield
    except ConflictError as conflict:
        # The conflict left the world refreshed: the winner's submission is in it.
        if world.get(task_id) is None:
            raise
        raise TaskIdTaken(task_id) from conflict
