"""The decision cycle of every command, mixed into :class:`~.scheduler.Scheduler`.

A command decides through :meth:`DecisionCycle._decide`: under the scheduler's lock
(and, outside a batch, the store's writer turn), it folds in what other writers
appended, lets a pure function of :mod:`..tasks.decide` emit events into a
:class:`~..world.Draft`, appends the draft's events (in a group commit, or in this
context's batch: queues them), and only then folds them into the world it decided on
(a batch's: its own view). A refused decision raises and appends nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from ..clock import Clock
from ..errors import ClockConflict, ConflictError, RuleViolation, StoreError, UnknownTask
from ..store.store import Store
from ..tasks import decide
from ..tasks.events import TaskEvent
from ..tasks.live_index import LIVE_ORDER
from ..tasks.restart_limit import restart_limit_of
from ..telemetry import live as telemetry
from ..world import Draft, World
from .arguments import checked_reading
from .batch import OpenBatch
from .group_append import Group

T = TypeVar("T")
CLOCK_RETRIES = 10
"""How often a command whose only conflict was its time is decided again."""


class DecisionCycle:
    """:meth:`_decide` and what it runs, mixed into :class:`~.scheduler.Scheduler`."""

    store: Store
    world: World
    clock: Clock
    position: int
    events_written: int
    conflicts: int
    closing: bool
    worker: str
    _closed: bool
    _resumed: set[str]
    _lock: Any
    _group: Group | None
    _last_context: decide.Context | None = None

    if TYPE_CHECKING:

        def refresh(self) -> int: ...
        def _fold_new(self, own: Collection[int] = ()) -> int: ...
        def _renew_lease(self, *, force: bool = False) -> None: ...
        def _snapshot_due(self) -> None: ...
        def _take_view_again(self, batch: OpenBatch) -> bool: ...
        def _deciding_on(self) -> tuple[World, OpenBatch | None]: ...
        @property
        def _batch(self) -> OpenBatch | None: ...

    def _reading(self) -> float:
        """The clock's reading, checked (:func:`.arguments.checked_reading`)."""
        return checked_reading(self.clock())

    def _context(self, world: World | None = None) -> decide.Context:
        # Times never run backwards from what a decision read: a reading behind the
        # latest time the store holds is moved up to it (Store.stamp counts it).
        now = self.store.stamp(self._reading())
        # Rules 9 and 12 decide with the limit the world recorded (any writer's), never
        # a per-process option: every worker parks the same tasks at the same position.
        limit = restart_limit_of(world if world is not None else self.world)
        last = self._last_context
        if (
            last is not None
            # The same time, to the bit: an int and a float, or 0.0 and -0.0, are
            # recorded apart (an event's ``at`` is ``now``).
            and (last.now is now or (last.now.__class__ is now.__class__ and last.now == now != 0))
            and last.closing is self.closing
            and last.restart_limit == limit
            and last.worker == self.worker
        ):
            return last  # immutable: the one made for the same reading serves again
        self._last_context = context = decide.Context(
            now=now, restart_limit=limit, closing=self.closing, worker=self.worker
        )
        return context

    def _decide(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        with self._lock:
            if self._closed:
                raise RuleViolation(2, "the scheduler is closed; open the store again")
            world, batch = self._deciding_on()
            if batch is not None:
                # Nothing is appended before the batch exits: no turn, no refresh, and
                # no clock conflict to decide again for; for a task the batch's view
                # does not know, once more on the view taken again with what other
                # writers appended since.
                try:
                    return self._decide_on(world, batch, fn, args, kwargs)
                except UnknownTask:
                    if not self._take_view_again(batch):
                        raise
                    return self._decide_once(fn, *args, **kwargs)
            with self.store.turn():
                # Decide on the store's current state: fold what other writers appended.
                self.refresh()
                self._renew_lease()
                self._snapshot_due()
                for attempt in range(CLOCK_RETRIES):
                    try:
                        return self._decide_known(fn, *args, **kwargs)
                    except ClockConflict:
                        # Only the time lost a race (another writer's clock is ahead): the
                        # store is folded in by now, so decide again, stamped no earlier.
                        if attempt == CLOCK_RETRIES - 1:
                            raise
                raise AssertionError("unreachable")

    def _decide_known(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """:meth:`_decide_once`; for a task this world does not know, once more after
        a refresh that folded something (another writer may have submitted it since)."""
        try:
            return self._decide_once(fn, *args, **kwargs)
        except UnknownTask:
            if self.refresh() == 0:
                raise
            return self._decide_once(fn, *args, **kwargs)

    def _decide_once(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        # The world and batch are looked up once a decision (each is a context lookup).
        world, batch = self._deciding_on()
        return self._decide_on(world, batch, fn, args, kwargs)

    def _decide_on(
        self, world: World, batch: OpenBatch | None, fn: Callable[..., T], args: Any, kw: Any
    ) -> T:
        """``fn``'s decision on ``world`` (``batch``'s view, if given), committed."""
        draft = Draft(world)
        result = fn(draft, self._context(world), *args, **kw)
        if draft.events:
            self._commit(draft.events, draft.states, draft.guards(), draft.across, (world, batch))
        return result

    def _commit(
        self,
        events: list[TaskEvent],
        states: Sequence[Any] | None = None,
        guards: dict[str, int] | None = None,
        across: set[str] | None = None,
        deciding_on: tuple[World, OpenBatch | None] | None = None,
    ) -> None:
        """Append ``events`` (in a group or a :meth:`batch`: queue them), then fold
        them into the world; ``states`` are the draft's states after each, folded already;
        ``guards`` the tasks the decision read, at the versions it read them;
        ``across`` the topics it counted in every stream (``Draft.read_across``);
        ``deciding_on``: the world and batch the decision was taken on, if known."""
        if not events:
            return
        world, open_batch = deciding_on if deciding_on is not None else self._deciding_on()
        versions = []
        next_version: dict[str, int] = {}
        for event in events:
            stream_id = event.stream_id()
            current = next_version.get(stream_id)
            if current is None:
                # The draft read every stream it writes (a dropped one is held again by then).
                current = world.held_version(stream_id, type(event).task_stream)
            next_version[stream_id] = current + 1
            versions.append(current + 1)
        group = self._group  # set only while this thread leads a group, under the lock
        batch = group if group is not None else open_batch
        if batch is not None:
            batch.add(events, versions, guards, across)  # appended when it is done
        else:
            # Every event up to self.position is folded into the world it decided on.
            unseen = (self.position, across) if across else None
            try:
                positions = self.store.append(
                    events, versions, guards=guards, unseen=unseen, since=self.position
                )
            except ConflictError:
                self.conflicts += 1
                self.refresh()
                raise
        if group is not None:
            # A group's: telemetry sees them once appended, and a refused group is put
            # back from the state of each task before the group first wrote it.
            order = world.indexes.get(LIVE_ORDER, {})
            for event in events:
                if type(event).task_stream and event.task_id not in group.before:
                    group.before[event.task_id] = world.get(event.task_id)
                    if event.task_id in order:
                        group.order[event.task_id] = order[event.task_id]
                elif not type(event).task_stream:
                    group.keep_stream(world, event.stream_id())
        else:
            telemetry.committed(self, events, versions)  # never raises
        if batch is None:
            self.events_written += len(events)
            if not self._follows_on(positions):
                # Other writers' events landed first: fold them, then ours, from the
                # store, so the world holds the log's order (its indexes number tasks by
                # it, and a snapshot of it must equal the fold). Ours are appended
                # already: should the read fail, they are applied here, out of order.
                try:
                    self._fold_new(positions)
                    return
                except StoreError:
                    pass
            else:
                self.position = positions[-1]
        if states is not None:
            for event, state in zip(events, states, strict=True):
                world.apply(event, state)
        else:
            for event in events:
                world.apply(event)

    def _follows_on(self, positions: Sequence[int]) -> bool:
        """Whether ``positions`` come right after :attr:`position` (no other writer
        appended between the world this scheduler holds and its append)."""
        return positions[0] == self.position + 1 and positions[-1] == self.position + len(positions)
