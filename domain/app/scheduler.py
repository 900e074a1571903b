"""The Scheduler application: commands in, events out, phases run.

Every command reads the scheduler's :class:`~.world.World`, lets a pure function of
:mod:`.decide` emit events into a draft, appends the draft's events to the store in one
transaction, and only then folds them into the world. A refused command raises and appends
nothing; a command that lost a race with another writer raises :class:`~.errors.ConflictError`,
appends nothing, and leaves the scheduler refreshed so that deciding again sees the winner's.

This module holds opening (with recovery), closing and the reads; the decision cycle
and the command groups are mixed in (:mod:`.assembly` lists them).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Collection
from typing import Any, TypeVar

from ..clock import Clock, system_clock
from ..commands.arguments import check_open_arguments
from ..commands.group_commit import DecisionQueue
from ..commands.sealing import take_seal
from ..commands.task_commands import _task_id
from ..errors import ConflictError, UnknownTask
from ..history import DEFAULT_EVERY, stream_loader
from ..retention.commands import history_across
from ..store.event_view import ensure_event_view
from ..store.seals import Seal
from ..store.store import Durability, Store, open_store
from ..tasks import decide
from ..tasks.definitions import BlockedReason, Registry, TaskDefinition, blocked_reason
from ..tasks.events import TaskEvent
from ..tasks.invocation import Invocation
from ..tasks.restart_limit import DEFAULT_RESTART_LIMIT as DEFAULT_RESTART_LIMIT
from ..tasks.restart_limit import restart_limit_of
from ..tasks.state import TaskState
from ..telemetry import live as telemetry
from ..world import Draft, World
from .assembly import CommandGroups
from .changes import Selected
from .fleet import DEFAULT_LEASE_MS, lease_ms, worker_name

T = TypeVar("T")


class Scheduler(CommandGroups):
    """A durable task scheduler kept as an event-sourced state machine.

    Open one with :meth:`open`; it loads the store's tasks and runs recovery (rule 9).
    Commands append events and return once they are recorded. Several schedulers may
    share a store, each a worker of a fleet (:mod:`.fleet`).

    Every public method may be called from any thread while a Worker runs, taking the
    lock for one command; an asyncio host uses ``asyncio.to_thread`` (docs/fleet.md).
    """

    def __init__(
        self,
        store: Store,
        *,
        clock: Clock = system_clock,
        registry: Registry | None = None,
        worker: str | None = None,
        lease: float = DEFAULT_LEASE_MS,
        snapshot_every: int | None = DEFAULT_EVERY,
    ) -> None:
        self.worker = worker_name(worker)
        """This scheduler's name in the fleet; reservations record it on the task."""
        self.lease_ms = lease_ms(lease)
        """How long (ms, scheduler clock) the lease lasts without a renewal."""
        self.store = store
        self.clock = clock
        self.registry = registry if registry is not None else Registry()
        self.judges_definitions = registry is not None  # else its abort only marks
        self._world = World()
        self._world.loader = stream_loader(store, lambda: self.position)
        self.position = 0
        """The last store position folded into :attr:`world`."""
        self.snapshot_every = snapshot_every
        """Events between two snapshots this scheduler takes (``None``: only at close)."""
        self.snapshot_at = 0  # the position of the latest snapshot read or taken here
        self.snapshot_problems: list[str] = []
        """Snapshots the open found but could not use, and why (each was passed over)."""
        self.parked: list[str] = []
        """Tasks recoveries parked at the restart limit (rule 9) since this scheduler
        opened, in order: each recovery appends its own, a task parked again after
        ``retry`` too, and nothing is taken out."""
        self.events_written = 0
        self.conflicts = 0
        """Appends this scheduler lost to another writer (each appended nothing)."""
        self.closing = False
        self._closed = False
        self._invocations: dict[str, Invocation] = {}
        self._failed_migrations: dict[str, TaskDefinition] = {}
        """Each live task whose migration failed here, with the definition it failed
        under (one that ended is dropped: see ``_forget_ended_migrations``)."""
        self._timed = Selected(lambda task: task.until is not None or task.flow is not None)
        self._rank_of: dict[str, bytes] = {}  # rendezvous ranks (PhaseCommands._ranks)
        self._resumed: set[str] = set()
        self._drained: set[str] = set()
        """Tasks whose invocation a worker's stop ended after a decision, still running
        here until the close returns them (rule 10)."""
        self._lock = threading.RLock()
        """Serializes decisions and folds (invocations, heartbeats, a host's threads)."""
        self._decision_queue = DecisionQueue()  # for the next group commit's leader

    # ─── opening and closing ────────────────────────────────────────────────

    @classmethod
    def open(
        cls,
        location: str | os.PathLike[str] | Store,
        *,
        clock: Clock = system_clock,
        registry: Registry | None = None,
        restart_limit: int | None = None,
        durability: Durability = "full",
        worker: str | None = None,
        lease: float = DEFAULT_LEASE_MS,
        snapshot_every: int | None = DEFAULT_EVERY,
        chain_key: bytes | str | None = None,
        pool_size: int | None = None,
    ) -> Scheduler:
        """Open the store at a SQLite path or ``postgresql://`` URL, load it, recover.

        Recovery (rule 9) puts every task a crash left ``running`` back to
        ``pending``, counting a restart; a task at the restart limit
        without an abort mark is parked (listed in :attr:`parked`) until
        :meth:`retry` or a raised limit. The limit is the store's, recorded: by
        default (``restart_limit=None``) the last one any writer recorded, else 3;
        a ``restart_limit`` that differs from it is recorded first (as
        :meth:`configure_restarts` does), and every worker decides with it from then
        on. In a fleet it recovers only the running tasks of this
        ``worker`` name (default ``$TASKTRAIL_WORKER``, else a fresh unique name)
        and of workers whose ``lease`` (ms of the scheduler clock) expired; a task
        another live worker holds is left alone.

        Opening folds the latest snapshot and the events after it, and holds the
        live work (:mod:`..history`): ended tasks are read back from the store when
        a command names one. A snapshot is taken every ``snapshot_every`` events
        (``None``: only at close) and at :meth:`close`. ``chain_key`` (else
        ``$TASKTRAIL_CHAIN_KEY``) keys the digest chain (:mod:`..store.keys`): a keyed
        store refuses a writer without its key. ``pool_size``: the server connections a
        PostgreSQL store keeps (default 1, or the URL's ``?pool_size=``); a writer holds
        one more for its liveness lock (:mod:`..store.liveness`).
        """
        check_open_arguments(clock, registry, restart_limit, snapshot_every)
        store = (
            location
            if isinstance(location, Store)
            else open_store(
                location, durability=durability, chain_key=chain_key, pool_size=pool_size
            )
        )
        scheduler: Scheduler | None = None
        try:
            scheduler = cls(
                store,
                clock=clock,
                registry=registry,
                worker=worker,
                lease=lease,
                snapshot_every=snapshot_every,
            )
            scheduler._restore()
            scheduler._resumed = set(scheduler.world.live)
            scheduler._warn_if_name_is_live()
            telemetry.opened(scheduler)  # the live tasks it loaded count as active
            scheduler._lease_optional = True  # a read-only store still opens for reading
            scheduler._hold_liveness()  # before the lease row that names its key
            scheduler._renew_lease(force=True)
            scheduler._beat_at = scheduler._renewed_at  # open looks for lost workers too
            scheduler._lease_optional = scheduler._renewed_at is None
            if restart_limit is not None:
                # Before recovery, which parks by it: recorded only when it differs.
                scheduler.configure_restarts(restart_limit)
            scheduler.parked = scheduler._recover_lost(at_open=True).parked
            ensure_event_view(store)  # a writer's open: the store's readable view of its log
        except BaseException:
            if scheduler is not None and scheduler._liveness is not None:
                scheduler._liveness.release()
            if not isinstance(location, Store):
                store.close()
            raise
        return scheduler

    def close(self) -> None:
        """Stop: tasks this scheduler was running go back to ``pending`` with no
        restart counted (rule 10); later commands are refused (rule 2)."""
        if self._closed or self._closed_writing_nothing():  # the log gone or replaced
            return
        for attempt in range(5):
            try:
                # Only what this worker holds now: another may have taken a task of ours.
                # Its invocations' tasks, and those a drained invocation left running here
                # (a stopping worker's, which ended after its phase's decision).
                self.refresh()
                held = [
                    *self._invocations,
                    *(t for t in self._drained if t not in self._invocations),
                ]
                running = [tid for tid in held if self._is_running(tid)]
                self._decide(decide.stop, running)
                break
            except ConflictError:
                if attempt == 4:
                    raise
        for invocation in self._invocations.values():
            invocation.ended = True
        self._invocations.clear()
        self.closing = True
        self._closed = True
        self._append_at_close()  # closed inside a batch: what it decided is appended first
        if self.position > self.snapshot_at and not self.store.read_only:
            self._snapshot_quietly()
        telemetry.closed(self)  # what this process counted as active, it takes back
        try:
            self._release_lease()
        finally:
            self.store.close()

    def __enter__(self) -> Scheduler:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def configure_telemetry(self, tracer_provider: Any = None, meter_provider: Any = None) -> None:
        """Send phase spans and metrics to these providers (``None``: the defaults)."""
        telemetry.configure_telemetry(self, tracer_provider, meter_provider)

    # ─── reading ────────────────────────────────────────────────────────────

    def now(self) -> float:
        """The scheduler clock."""
        return self.clock()

    def task(self, task_id: str) -> TaskState:
        """The current state of one task (with what other writers appended folded in)."""
        _task_id(task_id)
        with self._lock:  # a command of another thread may be folding meanwhile
            self._catch_up()
            state = self.world.get(task_id)
        if state is None:
            raise UnknownTask(task_id)
        return state

    def tasks(self, status: str | None = None) -> list[TaskState]:
        """The tasks this scheduler holds (or those with ``status``), in submission
        order: every live task, and the ended ones not yet dropped from memory (a
        snapshot drops them; :meth:`task` reads any back). The whole history is
        the read models' and :func:`tasktrail.replay.replay`'s."""
        with self._lock:  # a command of another thread may be folding meanwhile
            held = list(self.world.tasks.values())
        return [t for t in held if status is None or t.status == status]

    def history(
        self, task_id: str, *, archive: str | os.PathLike[str] | None = None
    ) -> list[TaskEvent]:
        """Every event of one task, oldest first, as stored; with ``archive`` (the store's
        archive folder, ``tasktrail archive --to DIR``) a task whose tree was archived
        too, read from its segment (one that fails its check warns, its events left out)."""
        if archive is not None:
            _task_id(task_id)
            events = history_across(self.store, task_id, os.fspath(archive))
            if not events:
                raise UnknownTask(task_id)
            return events
        self.task(task_id)
        return self.store.stream(task_id)

    @property
    def failed_migrations(self) -> frozenset[str]:
        """Tasks whose migration to the newer definition registered now failed here
        (rule 13); registering another definition of its kind tries it again. Those of
        tasks that ended are forgotten here (a Worker asks at every tick)."""
        self._forget_ended_migrations()
        return frozenset(
            task_id
            for task_id, definition in self._failed_migrations.items()
            if (task := self.world.get(task_id)) is not None
            and self.registry.get(task.kind) is definition
        )

    def blocked_reason(self, task_id: str) -> BlockedReason | None:
        """Rule 13: why the task cannot run here, or ``None``."""
        task = self.task(task_id)  # folds what other writers appended, the limit too
        return blocked_reason(
            task, self.registry, restart_limit_of(self.world), self._failed_migrations
        )

    def wake(self) -> dict[str, Any]:
        """Rule 15: ``{"active": bool, "at": ms | None}``.

        ``active`` while some task can run now or is running (a task a limit or a rate
        holds back cannot, rules 33-34); ``at`` is the earliest sleep (or message wait's
        deadline, or the next token of a rate that holds a task back) not yet due.
        Answered from the log as it stands: what other writers appended is folded in
        first, as for :meth:`task`.
        """
        with self._lock:  # the world may be folded from a heartbeat thread
            self._catch_up()
            return self._wake_now()

    def seal(self) -> Seal:
        """A seal of the log as it stands (:mod:`..store.seals`), MAC'd when keyed:
        keep its line (``to_json()``) outside the store; ``verify --seals`` reads it.
        It reads the whole log up to its head, through the store alone: not under the
        scheduler's lock, so the invocations in flight go on deciding meanwhile."""
        return take_seal(self.store)

    def _catch_up(self) -> None:
        """:meth:`refresh` for a read or a plan, which must see the log as it stands;
        not inside a batch (its reads see its own view, which folds nothing of other
        writers') nor once closed."""
        if self._batch is None and not self._closed:
            self.refresh()

    def refresh(self) -> int:
        """Fold in events other writers appended since the last read; returns how many."""
        return self._fold_new()

    def _fold_new(self, own: Collection[int] = ()) -> int:
        """:meth:`refresh`; events at the positions ``own`` are this scheduler's, just
        appended and not folded yet (telemetry took them in as committed): then up to
        the last of them only (the append brought the others' back: no round trip)."""
        folded = 0
        with self._lock:
            # Telemetry takes in other writers' events of tasks it follows: a recovery
            # of one this process was running tells it another worker took the task.
            follows = telemetry.follows(self)
            seen: list[tuple[TaskEvent, int, TaskState]] = []
            until = max(own) if own else None
            for recorded in self.store.read(after=self.position, until=until, heads=True):
                event = recorded.event
                stream_id, task_stream = event.stream_id(), type(event).task_stream
                version = recorded.originator_version
                # The scheduler's world (from inside a batch too: never the batch's view).
                have = self._world.held_version(stream_id, task_stream)
                if have == 0 and version > 1:
                    have = self._world.version_of(stream_id, task_stream)  # dropped: read back
                # An event at or below the version we hold is our own, folded when appended.
                if version > have:
                    _, after = self._world.apply_stored(recorded.position, event, version)
                    folded += 1
                    if (
                        follows is not None
                        and task_stream
                        and follows(stream_id)
                        and recorded.position not in own
                    ):
                        seen.append((event, version, after))
                self.position = recorded.position
            if seen:
                telemetry.folded(self, seen)  # never raises
        return folded

    def retrying(self, command: Callable[[], T], attempts: int = 5) -> T:
        """Run ``command`` again, on fresh state, each time it loses a race (up to ``attempts``)."""
        for attempt in range(attempts):
            try:
                return command()
            except ConflictError:
                if attempt == attempts - 1:
                    raise
        raise AssertionError("unreachable")

    # ─── what the commands ask of the world ─────────────────────────────────

    def _readiness(self, draft: Draft, ctx: decide.Context, task: TaskState) -> str:
        if task.status == "running" and task.id in self._invocations:
            return "running"
        return decide.readiness(draft, ctx, task, self.registry, self._failed_migrations)

    def _is_running(self, task_id: str) -> bool:
        """Whether the task is running here (not in another worker of the fleet)."""
        task = self.world.get(task_id)
        return task is not None and task.status == "running" and task.worker in (None, self.worker)
