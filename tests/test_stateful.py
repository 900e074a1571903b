"""A stateful test: after every step, replay(log) == the projections == a small model.

The model below is written from SPEC.md section 1 alone, without the domain's
``evolve`` or ``decide``: it follows the commands the scheduler accepted and
predicts each task's status, abort mark, outcome and restart count.
"""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pytest
from conftest import examples
from helpers.checks import folded_rows
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from tasktrail.projections import Projector
from tasktrail.replay import replay
from tasktrail.replay.strategies import HARNESS_RETRY, Command, Harness, phases, task_slots

RESTART_LIMIT = 2


@dataclass
class ModelTask:
    status: str = "pending"
    owner: str | None = None
    marked: bool = False
    outcome: str | None = None
    restarts: int = 0
    phase: str = "a"
    attempts: int = 0
    """The checkpoint's attempt: the failed tries of its phase so far (rule 23)."""


class Model:
    """Task statuses as SPEC.md section 1 describes them, command by command."""

    def __init__(self) -> None:
        self.tasks: dict[str, ModelTask] = {}

    def live(self, task_id: str) -> bool:
        return self.tasks[task_id].status != "terminal"

    def children(self, task_id: str) -> list[str]:
        return [t for t, m in self.tasks.items() if m.owner == task_id and self.live(t)]

    def cancelling(self, task_id: str) -> bool:
        task = self.tasks[task_id]
        if task.status == "terminal":
            return False
        return task.marked or (task.status == "completing" and task.outcome != "completed")

    def cascade(self, task_id: str) -> None:
        for child in self.children(task_id):
            if not self.tasks[child].marked:
                self.tasks[child].marked = True
                self.tasks[child].restarts = 0  # an abort mark resets restarts (rule 12)
            self.cascade(child)

    def submit(self, task_id: str, owner: str | None) -> None:
        self.tasks[task_id] = ModelTask(owner=owner)
        node = owner
        while node is not None:
            if self.cancelling(node):
                self.tasks[task_id].marked = True
            node = self.tasks[node].owner

    def end(self, task_id: str, outcome: str) -> None:
        task = self.tasks[task_id]
        if self.children(task_id):
            task.status, task.outcome, task.restarts = "completing", outcome, 0
            if outcome != "completed":
                self.cascade(task_id)
            return
        task.status, task.outcome, task.restarts = "terminal", outcome, 0
        owner = task.owner
        while owner is not None:
            holder = self.tasks[owner]
            if holder.status != "completing" or self.children(owner):
                break
            holder.status = "terminal"
            owner = holder.owner

    def reserve(self, task_id: str) -> None:
        task = self.tasks[task_id]
        if task.marked and task.restarts >= RESTART_LIMIT:
            self.end(task_id, "faulted")  # rule 12
            return
        task.status = "running"

    def checkpoint(self, task_id: str, phase: str) -> None:
        task = self.tasks[task_id]
        if phase != task.phase or task.attempts:
            task.restarts = 0
        task.phase, task.attempts = phase, 0

    def wait_or_sleep(self, task_id: str, status: str) -> None:
        task = self.tasks[task_id]
        task.status, task.restarts, task.attempts = status, 0, 0

    def phase_fails(self, task_id: str, max_attempts: int) -> None:
        """Rule 23: a failed phase with tries left sleeps its backoff; else it fails."""
        task = self.tasks[task_id]
        if task.attempts + 1 < max_attempts:
            task.status, task.restarts, task.attempts = "sleeping", 0, task.attempts + 1
        else:
            self.end(task_id, "failed")

    def abort(self, task_id: str) -> None:
        task = self.tasks[task_id]
        if self.live(task_id):
            if not task.marked:  # a second request is no new mark: restarts stay
                task.marked, task.restarts = True, 0
            self.cascade(task_id)

    def retry(self, task_id: str) -> None:
        task = self.tasks[task_id]
        parked = not task.marked and task.restarts >= RESTART_LIMIT
        if task.status not in ("running", "completing", "terminal") and parked:
            task.restarts = 0

    def fork(self, task_id: str, source_id: str) -> bool:
        """A fork of ``source_id`` as of now: refused with no checkpoint to start from,
        or below an owner holding its outcome (rule 5); else submitted at its phase."""
        source = self.tasks[source_id]
        owner = source.owner
        if source.status in ("completing", "terminal") or (
            owner is not None and self.tasks[owner].status in ("completing", "terminal")
        ):
            return False
        self.submit(task_id, owner)
        self.tasks[task_id].phase = source.phase
        self.tasks[task_id].attempts = source.attempts
        return True

    def crash(self) -> None:
        for task in self.tasks.values():
            if task.status == "running":
                task.status = "pending"
                task.restarts += 1

    def view(self) -> dict[str, tuple]:
        return {
            t: (
                m.status,
                m.marked,
                m.outcome if m.status in ("completing", "terminal") else None,
                m.restarts,
            )
            for t, m in self.tasks.items()
        }


class ReplayEqualsProjectionsEqualsModel(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.folder = Path(tempfile.mkdtemp())
        self.harness = Harness(self.folder / "trail.db", restart_limit=RESTART_LIMIT)
        self.model = Model()

    def teardown(self) -> None:
        self.harness.scheduler.store.close()
        shutil.rmtree(self.folder, ignore_errors=True)

    def do(self, command: Command) -> bool:
        return self.harness.apply(command)

    @initialize()
    def seed(self) -> None:
        for owner in (None, None):
            self.submit(owner)

    @rule(owner=st.none() | task_slots())
    def submit(self, owner: int | None) -> None:
        owner_id = self.harness.task(owner) if owner is not None and self.harness.ids else None
        if self.do(Command("submit", (owner,))):
            self.model.submit(self.harness.ids[-1], owner_id)

    @rule(slot=task_slots())
    def reserve(self, slot: int) -> None:
        if self.do(Command("reserve", (slot,))):
            self.model.reserve(self.harness.task(slot))

    @rule(slot=task_slots(), phase=phases())
    def checkpoint(self, slot: int, phase: str) -> None:
        if self.do(Command("checkpoint", (slot, phase))):
            self.model.checkpoint(self.harness.task(slot), phase)

    @rule(
        slot=task_slots(),
        on=st.lists(task_slots(), min_size=1, max_size=2),
        policy=st.sampled_from(["all", "failFast"]),
    )
    def wait(self, slot: int, on: list[int], policy: str) -> None:
        if self.do(Command("wait", (slot, tuple(on), policy))):
            self.model.wait_or_sleep(self.harness.task(slot), "waiting")

    @rule(slot=task_slots(), ms=st.integers(0, 5_000))
    def sleep(self, slot: int, ms: int) -> None:
        if self.do(Command("sleep", (slot, ms))):
            self.model.wait_or_sleep(self.harness.task(slot), "sleeping")

    @rule(slot=task_slots(), status=st.sampled_from(["completed", "failed", "aborted"]))
    def finish(self, slot: int, status: str) -> None:
        if self.do(Command("finish", (slot, status))):
            self.model.end(self.harness.task(slot), status)

    @rule(slot=task_slots())
    def abort(self, slot: int) -> None:
        if self.do(Command("abort", (slot,))):
            self.model.abort(self.harness.task(slot))

    @rule(slot=task_slots())
    def retry(self, slot: int) -> None:
        if self.do(Command("retry", (slot,))):
            self.model.retry(self.harness.task(slot))

    @rule(slot=task_slots())
    def fork(self, slot: int) -> None:
        source = self.harness.task(slot)
        accepted = self.do(Command("fork", (slot, None)))
        if accepted:
            self.model.fork(self.harness.ids[-1], source)
        else:
            assert not self.model.fork("never", source)  # the model refuses it too

    @rule(slot=task_slots())
    def phase_fails(self, slot: int) -> None:
        task_id = self.harness.task(slot)
        if self.do(Command("phase_fails", (slot,))):
            self.model.phase_fails(task_id, HARNESS_RETRY.max_attempts)
        elif task_id in self.model.tasks:  # refused: not a run invocation's to decide
            task = self.model.tasks[task_id]
            assert task.status != "running" or task.marked

    @rule(ms=st.integers(1, 3_000))
    def advance(self, ms: int) -> None:
        self.do(Command("advance", (ms,)))

    @rule()
    def crash(self) -> None:
        if self.do(Command("crash")):
            self.model.crash()

    @invariant()
    def replay_equals_projections_equals_model(self) -> None:
        store = self.harness.store
        state = replay(store)
        assert state.tasks == self.harness.scheduler.world.tasks
        with Projector(store, self.folder / "views.db") as projector:
            projector.catch_up()
            for name, rows in state.tables.items():
                keys = state.keys[name]
                stored = {
                    (tuple(r[k] for k in keys) if len(keys) > 1 else r[keys[0]]): r
                    for r in folded_rows(projector, name)
                }
                assert stored == rows, name
        replayed = {
            t: (
                s.status,
                s.abort_requested,
                s.outcome.status if s.outcome is not None else None,
                s.restarts,
            )
            for t, s in state.tasks.items()
        }
        assert replayed == self.model.view()


ReplayEqualsProjectionsEqualsModel.TestCase.settings = settings(
    max_examples=examples(5, 60),
    stateful_step_count=25,
    deadline=None,
)
TestReplayEqualsProjectionsEqualsModel = pytest.mark.grows(
    ReplayEqualsProjectionsEqualsModel.TestCase
)
