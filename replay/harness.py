"""The harness property tests drive: generated commands (:mod:`.strategies`) applied to a
real scheduler on a store, on a moving :class:`~tasktrail.domain.ManualClock`; a command
the rules refuse appends nothing and is simply not counted."""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from tasktrail.domain import (
    Debounce,
    Limit,
    ManualClock,
    Rate,
    Refused,
    Registry,
    Retry,
    Scheduler,
    TaskDefinition,
)
from tasktrail.domain.runs.memory_executor import InMemoryExecutor
from tasktrail.domain.runs.settings import RunSettings
from tasktrail.domain.tasks.retrying import retry_phase

from .strategies import START_MS, Command

HARNESS_RETRY = Retry(max_attempts=2, base_s=1.0, jitter=0.5)
"""The retry policy of the harness's failing phases: one retry after about a second."""


def harness_registry() -> Registry:
    """Definitions the harness's tasks use: kind ``a`` runs a then b; ``b`` fails, and
    its phase b (reached by a checkpoint) raises, retried once after a jittered backoff
    (rule 23); ``c`` runs as ``a`` does, one at a time per ``tenant`` memo and one start
    every two seconds at most (a bucket of one token filling at 0.5 a second, rules 33, 34)."""
    return Registry(
        [
            TaskDefinition(
                "a", 1, {"a": lambda inv: "b", "b": lambda inv: inv.finish("completed")}
            ),
            TaskDefinition(
                "b",
                1,
                {"a": lambda inv: inv.finish("failed", "b always fails"), "b": _raises},
                phase_retries={"b": HARNESS_RETRY},
            ),
            TaskDefinition(
                "c",
                1,
                {"a": lambda inv: "b", "b": lambda inv: inv.finish("completed")},
                limit=Limit(key=lambda memos: memos.get("tenant"), max_running=1),
                rate=Rate(key=lambda memos: "model", per_s=0.5, burst=1),
            ),
        ]
    )


def _raises(invocation: Any) -> None:
    raise ConnectionError("the harness's flaky call failed")


def crash(scheduler: Scheduler) -> None:
    """Drop ``scheduler`` as a killed process would be: nothing more written (no close, no
    stop events), its store's connections and its liveness lock let go as the process's
    end lets them go (on PostgreSQL a session's lock and connection outlive the object, and
    a suite of many such crashes would fill the server's connection slots)."""
    liveness = getattr(scheduler, "_liveness", None)
    if liveness is not None:
        liveness.release()
    scheduler.store.close()


class Harness:
    """Applies generated commands to a scheduler on a store, on a manual clock."""

    def __init__(
        self,
        location: str | os.PathLike[str],
        *,
        restart_limit: int = 2,
        start_ms: float = START_MS,
    ) -> None:
        self.location = os.fspath(location)
        self.clock = ManualClock(start_ms)
        self.registry = harness_registry()
        self.restart_limit = restart_limit
        self.executor = InMemoryExecutor()
        self.ids: list[str] = []
        self.keys: dict[str, str] = {}
        """Each idempotency key a keyed submission used, with the task it returned."""
        self.accepted: list[Command] = []
        self.refused: list[tuple[Command, Refused]] = []
        self.scheduler = self._open()

    @classmethod
    @contextlib.contextmanager
    def temporary(cls, **options: Any) -> Iterator[Harness]:
        """A harness on a SQLite file in a temporary folder, removed afterwards."""
        with tempfile.TemporaryDirectory() as folder:
            harness = cls(Path(folder) / "trail.db", **options)
            try:
                yield harness
            finally:
                harness.scheduler.store.close()

    @property
    def store(self) -> Any:
        """The scheduler's store."""
        return self.scheduler.store

    def _open(self) -> Scheduler:
        scheduler = Scheduler.open(
            self.location,
            clock=self.clock,
            registry=self.registry,
            restart_limit=self.restart_limit,
            worker="harness",  # a crash restarts the same worker: recovery runs at once
        )
        scheduler.configure_runs(
            executor=self.executor, settings=RunSettings(reconcile_per_tick=50)
        )
        scheduler.retry_random.seed(0)  # a retry's delay is drawn: the same on each run
        return scheduler

    def task(self, slot: int) -> str:
        """The id of the task in ``slot`` (slots wrap around the tasks submitted so far)."""
        return self.ids[slot % len(self.ids)] if self.ids else "no-task-yet"

    def run(self, steps: Sequence[Command]) -> None:
        """Apply every command in order."""
        for step in steps:
            self.apply(step)

    def apply(self, command: Command) -> bool:
        """Apply one command; returns whether the rules accepted it."""
        try:
            self._apply(command)
        except Refused as refusal:
            self.refused.append((command, refusal))
            return False
        self.accepted.append(command)
        return True

    def _apply(self, command: Command) -> None:
        s, args = self.scheduler, command.args
        match command.name:
            case "submit":
                owner = self.task(args[0]) if args[0] is not None and self.ids else None
                kind = "a" if len(self.ids) % 3 else "b"
                task_id = f"t{len(self.ids):03d}"
                s.submit(kind, owner=owner, phase="a", id=task_id)
                self.ids.append(task_id)
            case "submit_keyed":  # a new task, or the one the key named before
                owner = self.task(args[1]) if args[1] is not None and self.ids else None
                kind = "a" if len(self.ids) % 3 else "b"
                task_id, key = f"t{len(self.ids):03d}", f"key{args[0]}"
                got = s.submit(kind, owner=owner, phase="a", id=task_id, key=key, priority=args[2])
                self.keys[key] = got
                if got == task_id:
                    self.ids.append(task_id)
            case "submit_flow":  # a task of a limited, rate-limited kind (rules 33, 34)
                task_id = f"t{len(self.ids):03d}"
                s.submit("c", phase="a", id=task_id, memos={"tenant": f"t{args[0]}"})
                self.ids.append(task_id)
            case "submit_debounced":  # a new task, or the window's it collapsed into
                task_id = f"t{len(self.ids):03d}"
                debounce = Debounce(key=f"d{args[0]}", wait_s=args[1])
                got = s.submit("c", phase="a", id=task_id, memos={"n": args[2]}, debounce=debounce)
                if got == task_id:
                    self.ids.append(task_id)
            case "reserve":
                s.reserve(self.task(args[0]))
            case "checkpoint":
                s.checkpoint(self.task(args[0]), args[1])
            case "memo":
                s.memo(self.task(args[0]), "m", args[1])
            case "wait":
                s.wait(self.task(args[0]), [self.task(a) for a in args[1]], args[2])
            case "sleep":
                s.sleep(self.task(args[0]), self.clock.now + args[1])
            case "finish":  # a result sometimes (a command from before results: none)
                s.finish(self.task(args[0]), args[1], result=args[2] if len(args) > 2 else None)
            case "abort":
                s.abort(self.task(args[0]), actor="harness", reason="generated")
            case "retry":
                s.retry(self.task(args[0]))
            case "fork":  # as of now, or ``back`` positions before the log's end
                at = None if args[1] is None else max(0, s.store.head() - args[1])
                task_id = f"t{len(self.ids):03d}"
                s.fork(self.task(args[0]), at=at, id=task_id, actor="harness")
                self.ids.append(task_id)
            case "send":
                s.send(self.task(args[0]), args[1], args[2], actor="harness", reason="generated")
            case "wait_message":
                s.wait_message(self.task(args[0]), args[1], timeout_s=args[2])
            case "read":  # as its invocation's phase would: inv.message(topic)
                invocation = s._invocations.get(self.task(args[0]))
                if invocation is None or invocation.ended:
                    raise Refused("no invocation runs it here", task_id=self.task(args[0]))
                invocation.message(args[1])
            case "ask":  # as its invocation's phase would: inv.ask(...) (rules 30-32)
                assignees = ["ana"] if args[3] else None
                s.ask(self.task(args[0]), args[1], args[0], timeout_s=args[2], assignees=assignees)
            case "answer":
                s.answer(self.task(args[0]), args[1], args[2], actor=args[3], reason="generated")
            case "emit" | "close_stream":  # as its invocation's phase would, recorded now
                invocation = s._invocations.get(self.task(args[0]))
                if invocation is None or invocation.ended:
                    raise Refused("no invocation runs it here", task_id=self.task(args[0]))
                if command.name == "emit":
                    invocation.emit(args[2], stream=args[1])
                else:
                    invocation.close_stream(args[1])
                invocation.flush()
            case "run_pass":
                s.run_pass()
            case "phase_fails":  # what a raising phase's invocation decides (rule 23)
                s._decide(
                    retry_phase,
                    self.task(args[0]),
                    retry=HARNESS_RETRY,
                    message="ConnectionError: generated",
                    cause="threw",
                    draw=s.retry_random.random(),
                )
            case "advance":
                self.clock.advance(args[0])
            case "crash":
                crash(s)  # dropped without close(): recovery runs at open
                self.scheduler = self._open()
            case "mint_run":
                s.mint_run(self.task(args[0]))
            case "job_ends":
                self._job_ends(self.task(args[0]), args[1])
            case "reconcile":
                s.reconcile()
            case "start_turn":
                s.start_turn(self.task(args[0]), args[1])
            case "complete_turn":
                self._complete_turn(self.task(args[0]), args[1], stale=args[2], delay=args[3])
            case "observe_exit":
                s.observe_exit(self.task(args[0]), args[1])
            case "request_wakeup":
                s.request_wakeup(self.task(args[0]), args[1])
            case "controller_pass":
                s.controller_pass(concurrency=1)
            case "schedule":
                s.schedule(args[0], "a", cron="* * * * *", phase="a", catch_up=args[1])
            case "unschedule":
                s.unschedule(args[0])
            case "tick_schedules":  # the tasks a tick submits take the next slots
                self.clock.advance(args[0] * 60_000)
                self.ids.extend(s.submit_due_schedules())
            case other:
                raise ValueError(f"unknown command {other!r}")

    def _complete_turn(self, task_id: str, role: str, *, stale: bool, delay: int) -> None:
        active = self.scheduler.active_turn(task_id, role)
        turns = self.scheduler.task(task_id).roles.get(role)
        if stale or active is None:
            # A completion naming a Turn that is not the active one: refused and audited.
            number = turns.turns if turns is not None else 0
            self.scheduler.complete_turn(task_id, role, f"{role}.{max(number - 1, 0)}")
            return
        due = self.clock.now + delay if delay else None
        self.scheduler.complete_turn(task_id, role, active.turn_id, due_at=due)

    def _job_ends(self, task_id: str, outcome: str) -> None:
        for run in self.scheduler.runs(task_id):
            if run.live and run.job_id is not None:
                self.executor.finish(run.job_id, outcome)
                return
