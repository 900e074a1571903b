"""Hypothesis strategies that build valid command sequences, for property tests.

Strategies compose: :func:`commands` builds on :func:`lifecycle_commands` and
:func:`run_commands`, which build on :func:`task_slots` and :func:`phases`. A
command names tasks by *slot* (the n-th task submitted so far), so a generated
sequence stays meaningful as it shrinks. :class:`Harness` applies commands to a
real scheduler on a moving :class:`~tasktrail.domain.ManualClock`; a command
the rules refuse appends nothing and is simply not counted.

>>> from hypothesis import given
>>> from tasktrail.replay.strategies import Harness, command_sequences
>>> @given(command_sequences())                                   # doctest: +SKIP
... def test_replay_equals_live(steps):
...     with Harness.temporary() as h:
...         h.run(steps)
...         assert replay(h.store) == h.replayable_state()
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hypothesis import strategies as st

from tasktrail.domain import (
    ManualClock,
    Refused,
    Registry,
    Retry,
    Scheduler,
    TaskDefinition,
)
from tasktrail.domain.runs.memory_executor import InMemoryExecutor
from tasktrail.domain.runs.settings import RunSettings
from tasktrail.domain.tasks.retrying import retry_phase

DEFAULT_SLOTS = 5
START_MS = 1_767_603_600_000  # 2026-01-05T09:00:00Z


@dataclass(frozen=True)
class Command:
    """One generated command: its name and arguments (task slots, values)."""

    name: str
    args: tuple[Any, ...] = ()

    def __repr__(self) -> str:
        return f"{self.name}{self.args!r}"


def task_slots(slots: int = DEFAULT_SLOTS) -> st.SearchStrategy[int]:
    """Which task a command names: the slot of a task submitted so far."""
    return st.integers(0, slots - 1)


def phases() -> st.SearchStrategy[str]:
    """Phase names the harness's definitions know."""
    return st.sampled_from(["a", "b"])


def topics() -> st.SearchStrategy[str]:
    """Message topics (rules 20-22)."""
    return st.sampled_from(["x", "y"])


def message_commands(slots: int = DEFAULT_SLOTS) -> st.SearchStrategy[Command]:
    """Messages: a send, a wait for one (with or without a timeout, in seconds), and a
    read by the invocation running the task (marked read with its next decision)."""
    slot = task_slots(slots)
    return st.one_of(
        st.builds(
            lambda t, topic, v: Command("send", (t, topic, v)), slot, topics(), st.integers(0, 9)
        ),
        st.builds(
            lambda t, topic, timeout: Command("wait_message", (t, topic, timeout)),
            slot,
            topics(),
            st.none() | st.integers(0, 60),
        ),
        st.builds(lambda t, topic: Command("read", (t, topic)), slot, topics()),
    )


def clock_moves() -> st.SearchStrategy[Command]:
    """The clock moving forward, from a millisecond to a minute."""
    return st.builds(lambda ms: Command("advance", (ms,)), st.integers(1, 60_000))


def results() -> st.SearchStrategy[Any]:
    """What a finish answers, sometimes: nothing, a number, text, or a small JSON object."""
    return (
        st.none()
        | st.integers(-1000, 1000)
        | st.text(max_size=8)
        | st.fixed_dictionaries(
            {"n": st.integers(0, 9), "tags": st.lists(st.sampled_from(["a", "b"]), max_size=2)}
        )
    )


def lifecycle_commands(slots: int = DEFAULT_SLOTS) -> st.SearchStrategy[Command]:
    """Commands of SPEC.md section 1: submit, reserve, checkpoint, wait, sleep, finish, ...
    an operator's fork (as of now, or some positions back), and a running phase that
    fails under a retry policy (rule 23)."""
    slot = task_slots(slots)
    return st.one_of(
        st.builds(lambda owner: Command("submit", (owner,)), st.none() | slot),
        keyed_submits(slots),
        st.builds(lambda t: Command("reserve", (t,)), slot),
        st.builds(lambda t, p: Command("checkpoint", (t, p)), slot, phases()),
        st.builds(lambda t, v: Command("memo", (t, v)), slot, st.integers(-1000, 1000)),
        st.builds(
            lambda t, on, policy: Command("wait", (t, tuple(on), policy)),
            slot,
            st.lists(slot, min_size=1, max_size=3),
            st.sampled_from(["all", "failFast"]),
        ),
        st.builds(lambda t, ms: Command("sleep", (t, ms)), slot, st.integers(0, 120_000)),
        st.builds(
            lambda t, status, result: Command("finish", (t, status, result)),
            slot,
            st.sampled_from(["completed", "failed", "aborted"]),
            results(),
        ),
        st.builds(lambda t: Command("abort", (t,)), slot),
        st.builds(lambda t: Command("retry", (t,)), slot),
        st.builds(lambda t: Command("phase_fails", (t,)), slot),
        st.builds(lambda t, back: Command("fork", (t, back)), slot, st.none() | st.integers(0, 30)),
        st.just(Command("run_pass")),
        st.just(Command("crash")),
    )


def keyed_submits(slots: int = DEFAULT_SLOTS) -> st.SearchStrategy[Command]:
    """A submission with one of three idempotency keys (rule 18; a key used before names
    its task, and nothing is recorded) and a priority (rule 19), owned or not."""
    return st.builds(
        lambda key, owner, priority: Command("submit_keyed", (key, owner, priority)),
        st.integers(0, 2),
        st.none() | task_slots(slots),
        st.sampled_from([0, 0, 1, -1, 1000]),
    )


def run_commands(slots: int = DEFAULT_SLOTS) -> st.SearchStrategy[Command]:
    """Commands of SPEC.md section 3: mint runs, jobs ending, reconcile."""
    slot = task_slots(slots)
    return st.one_of(
        st.builds(lambda t: Command("mint_run", (t,)), slot),
        st.builds(
            lambda t, outcome: Command("job_ends", (t, outcome)),
            slot,
            st.sampled_from(["completed", "failed", "canceled", "interrupted"]),
        ),
        st.just(Command("reconcile")),
    )


def schedule_commands() -> st.SearchStrategy[Command]:
    """Schedules (rules 26, 27): one of two per-minute schedules recorded (with or without
    catch-up), removed, or ticked after the clock moved some minutes."""
    name = st.sampled_from(["s0", "s1"])
    return st.one_of(
        st.builds(lambda n, c: Command("schedule", (n, c)), name, st.booleans()),
        st.builds(lambda n: Command("unschedule", (n,)), name),
        st.builds(lambda m: Command("tick_schedules", (m,)), st.integers(0, 3)),
    )


def roles() -> st.SearchStrategy[str]:
    """Agent roles: the Leader and one worker."""
    return st.sampled_from(["leader", "worker"])


def turn_commands(slots: int = DEFAULT_SLOTS) -> st.SearchStrategy[Command]:
    """Commands of SPEC.md section 2: Turns, their completions and exits, wakeups, passes."""
    slot = task_slots(slots)
    return st.one_of(
        st.builds(lambda t, r: Command("start_turn", (t, r)), slot, roles()),
        st.builds(
            lambda t, r, stale, delay: Command("complete_turn", (t, r, stale, delay)),
            slot,
            roles(),
            st.booleans(),
            st.sampled_from([0, 0, 500]),
        ),
        st.builds(lambda t, r: Command("observe_exit", (t, r)), slot, roles()),
        st.builds(
            lambda t, reason: Command("request_wakeup", (t, reason)),
            slot,
            st.sampled_from(["mail", "review", "ping"]),
        ),
        st.just(Command("controller_pass")),
    )


def commands(
    slots: int = DEFAULT_SLOTS, *, runs: bool = True, turns: bool = True, schedules: bool = True
) -> st.SearchStrategy[Command]:
    """Any command, the clock moving in between."""
    options = [lifecycle_commands(slots), message_commands(slots), clock_moves()]
    if schedules:
        options.append(schedule_commands())
    if runs:
        options.append(run_commands(slots))
    if turns:
        options.append(turn_commands(slots))
    return st.one_of(*options)


def command_sequences(
    slots: int = DEFAULT_SLOTS,
    *,
    min_size: int = 1,
    max_size: int = 40,
    runs: bool = True,
    turns: bool = True,
) -> st.SearchStrategy[list[Command]]:
    """Sequences that start with a few submitted tasks, then any commands."""
    opening = [
        Command("submit", (None,)),
        Command("submit", (None,)),
        Command("submit", (0,)),
        Command("reserve", (0,)),
        Command("reserve", (1,)),
    ]
    steps = commands(slots, runs=runs, turns=turns)
    return st.lists(steps, min_size=min_size, max_size=max_size).map(lambda rest: opening + rest)


HARNESS_RETRY = Retry(max_attempts=2, base_s=1.0, jitter=0.5)
"""The retry policy of the harness's failing phases: one retry after about a second."""


def harness_registry() -> Registry:
    """Definitions the harness's tasks use: kind ``a`` runs a then b; ``b`` fails, and
    its phase b (reached by a checkpoint) raises, retried once after a jittered backoff
    (rule 23)."""
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
        ]
    )


def _raises(invocation: Any) -> None:
    raise ConnectionError("the harness's flaky call failed")


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
                s.store.close()  # dropped without close(): recovery runs at open
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
