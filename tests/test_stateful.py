"""A stateful test: after every step, replay(log) == the projections == a small model.

The model, in ``helpers/stateful_model.py``, is written from SPEC.md section 1 alone,
without the domain's ``evolve`` or ``decide``: it follows the commands the scheduler
accepted and predicts each task's status, abort mark, outcome and restart count.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import Any

import pytest
from conftest import examples
from helpers.checks import folded_rows
from helpers.stateful_model import RESTART_LIMIT, Model
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from tasktrail.domain.tasks.streams import summaries
from tasktrail.projections import Projector
from tasktrail.replay import replay
from tasktrail.replay.harness import HARNESS_RETRY, Harness, crash
from tasktrail.replay.strategies import Command, phases, results, task_slots, topics


class ReplayEqualsProjectionsEqualsModel(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.folder = Path(tempfile.mkdtemp())
        self.harness = Harness(self.folder / "trail.db", restart_limit=RESTART_LIMIT)
        self.model = Model()

    def teardown(self) -> None:
        crash(self.harness.scheduler)
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

    @rule(
        key=st.integers(0, 2),
        owner=st.none() | task_slots(),
        priority=st.sampled_from([0, 1, -1, 1000]),
    )
    def submit_keyed(self, key: int, owner: int | None, priority: int) -> None:
        owner_id = self.harness.task(owner) if owner is not None and self.harness.ids else None
        known = self.model.keys.get(f"key{key}")
        submitted = len(self.harness.ids)
        if not self.do(Command("submit_keyed", (key, owner, priority))):
            assert known is None  # a key that names a task is never refused
            return
        if known is not None:  # that task, and nothing new
            assert len(self.harness.ids) == submitted
            assert self.harness.keys[f"key{key}"] == known
            return
        task_id = self.harness.ids[-1]
        self.model.submit(task_id, owner_id)
        self.model.tasks[task_id].priority = priority
        self.model.keys[f"key{key}"] = task_id

    @rule(slot=task_slots())
    def reserve(self, slot: int) -> None:
        self._reserve(slot)

    @rule(back=st.integers(0, 3))
    def reserve_flow(self, back: int) -> None:
        """Reserve one of the latest kind ``c`` tasks (rules 33, 34), whatever its slot."""
        slots = [n for n, t in enumerate(self.harness.ids) if self.model.tasks[t].kind == "c"]
        if slots:
            self._reserve(slots[-1 - back % len(slots)])

    def _reserve(self, slot: int) -> None:
        task_id, now = self.harness.task(slot), self.harness.clock.now
        task = self.model.tasks.get(task_id)
        held = self.model.held(task_id, now) if task is not None else None
        if self.do(Command("reserve", (slot,))):
            assert held is None, (task_id, held)  # 33, 34: never past a limit or a rate
            mode = "abort" if task is not None and task.marked else "run"
            self.model.reserve(task_id, now)
            if task is not None and task.status == "running":
                task.mode, task.started = mode, True
                if task.kind == "c" and mode == "run":  # 34: a start takes a token
                    self.model.bucket = (self.model.tokens(now) - 1, now)
        else:
            refusal = self.harness.refused[-1][1]
            if getattr(refusal, "rule", None) in (33, 34):
                assert held == ("limited" if refusal.rule == 33 else "rate_limited"), refusal  # type: ignore[attr-defined]

    @rule(tenant=st.integers(0, 1))
    def submit_flow(self, tenant: int) -> None:
        if self.do(Command("submit_flow", (tenant,))):
            task_id = self.harness.ids[-1]
            self.model.submit(task_id, None)
            self.model.tasks[task_id].kind = "c"
            self.model.tasks[task_id].tenant = f"t{tenant}"

    @rule(key=st.integers(0, 1), wait=st.sampled_from([1, 30]), n=st.integers(0, 9))
    def submit_debounced(self, key: int, wait: int, n: int) -> None:
        now, known = self.harness.clock.now, len(self.harness.ids)
        into = self.model.collapses_into(f"d{key}", now)
        assert self.do(Command("submit_debounced", (key, wait, n)))
        if into is not None:  # 35: the same task, ready wait s after this submit
            assert len(self.harness.ids) == known
            self.model.tasks[into].window_until = now + wait * 1000
            return
        task_id = self.harness.ids[-1]
        assert len(self.harness.ids) == known + 1
        self.model.submit(task_id, None)
        task = self.model.tasks[task_id]
        task.kind, task.status, task.window_until = "c", "sleeping", now + wait * 1000
        self.model.windows[f"d{key}"] = task_id

    @rule(slot=task_slots(), phase=phases())
    def checkpoint(self, slot: int, phase: str) -> None:
        if self.do(Command("checkpoint", (slot, phase))):
            self.model.decided(self.harness.task(slot))
            self.model.checkpoint(self.harness.task(slot), phase)

    @rule(
        slot=task_slots(),
        on=st.lists(task_slots(), min_size=1, max_size=2),
        policy=st.sampled_from(["all", "failFast"]),
    )
    def wait(self, slot: int, on: list[int], policy: str) -> None:
        if self.do(Command("wait", (slot, tuple(on), policy))):
            self.model.decided(self.harness.task(slot))
            self.model.wait_or_sleep(self.harness.task(slot), "waiting")

    @rule(slot=task_slots(), ms=st.integers(0, 5_000))
    def sleep(self, slot: int, ms: int) -> None:
        if self.do(Command("sleep", (slot, ms))):
            self.model.decided(self.harness.task(slot))
            self.model.wait_or_sleep(self.harness.task(slot), "sleeping")

    @rule(
        slot=task_slots(),
        status=st.sampled_from(["completed", "failed", "aborted"]),
        result=results(),
    )
    def finish(self, slot: int, status: str, result: Any) -> None:
        if self.do(Command("finish", (slot, status, result))):
            self.model.decided(self.harness.task(slot))
            self.model.end(self.harness.task(slot), status)
            # The result is kept on the outcome, held or ended, as it was given.
            outcome = self.harness.scheduler.task(self.harness.task(slot)).outcome
            assert outcome is not None and outcome.result == result

    @rule(slot=task_slots(), topic=topics(), value=st.integers(0, 9))
    def send(self, slot: int, topic: str, value: int) -> None:
        accepted = self.do(Command("send", (slot, topic, value)))
        assert accepted == self.model.send(self.harness.task(slot), topic)

    @rule(slot=task_slots(), topic=topics(), timeout=st.none() | st.integers(0, 5))
    def wait_message(self, slot: int, topic: str, timeout: int | None) -> None:
        if self.do(Command("wait_message", (slot, topic, timeout))):
            task_id = self.harness.task(slot)
            self.model.decided(task_id)
            self.model.wait_or_sleep(task_id, "waiting")
            task = self.model.tasks[task_id]
            task.topic = topic
            task.until = None if timeout is None else self.harness.clock.now + timeout * 1000

    @rule(
        slot=task_slots(),
        topic=topics(),
        timeout=st.none() | st.integers(0, 5),
        assigned=st.booleans(),
    )
    def ask(self, slot: int, topic: str, timeout: int | None, assigned: bool) -> None:
        if self.do(Command("ask", (slot, topic, timeout, assigned))):
            task_id = self.harness.task(slot)
            self.model.decided(task_id)
            self.model.ask(task_id, topic, timeout, assigned, self.harness.clock.now)

    @rule(slot=task_slots(), topic=topics(), actor=st.sampled_from(["ana", "bob"]))
    def answer(self, slot: int, topic: str, actor: str) -> None:
        accepted = self.do(Command("answer", (slot, topic, 1, actor)))
        now = self.harness.clock.now
        assert accepted == self.model.answer(self.harness.task(slot), topic, actor, now)

    @rule(slot=task_slots(), topic=topics(), assigned=st.booleans())
    def reserve_and_ask(self, slot: int, topic: str, assigned: bool) -> None:
        """A phase that asks at once: asks are open more often than rule by rule."""
        self.reserve(slot)
        self.ask(slot, topic, None, assigned)

    @rule(actor=st.sampled_from(["ana", "bob"]))
    def answer_the_oldest_open_ask(self, actor: str) -> None:
        listed = self.harness.scheduler.inbox(limit=1)
        if listed:
            slot = self.harness.ids.index(listed[0].task_id)
            self.answer(slot, listed[0].topic, actor)

    @rule(slot=task_slots(), stream=st.sampled_from(["out", "log"]), value=st.integers(0, 9))
    def emit(self, slot: int, stream: str, value: int) -> None:
        task = self.model.tasks.get(self.harness.task(slot))
        accepted = self.do(Command("emit", (slot, stream, value)))
        if accepted:
            assert task is not None and stream not in task.closed  # rule 28
            task.streams.setdefault(stream, []).append(value)
            chunks = list(
                self.harness.scheduler.read_stream(
                    task_id := self.harness.task(slot), stream, follow=False
                )
            )
            assert chunks == list(enumerate(task.streams[stream]))  # rule 29: dense, in order
            after = len(chunks) - 2
            assert (
                list(self.harness.scheduler.read_stream(task_id, stream, after, False))
                == chunks[after + 1 :]
            )

    @rule(slot=task_slots(), stream=st.sampled_from(["out", "log"]))
    def close_stream(self, slot: int, stream: str) -> None:
        if self.do(Command("close_stream", (slot, stream))):
            task = self.model.tasks[self.harness.task(slot)]
            task.streams.setdefault(stream, [])
            task.closed.add(stream)

    @rule(slot=task_slots(), topic=topics())
    def read(self, slot: int, topic: str) -> None:
        if self.do(Command("read", (slot, topic))):
            self.model.read(self.harness.task(slot), topic)

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
            forked, of = self.model.tasks[self.harness.ids[-1]], self.model.tasks[source]
            forked.kind, forked.tenant = of.kind, of.tenant  # its memos: the same keys
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

    @rule(name=st.sampled_from(["s0", "s1"]), catch_up=st.booleans())
    def schedule(self, name: str, catch_up: bool) -> None:
        if self.do(Command("schedule", (name, catch_up))):
            self.model.schedule(name, catch_up, self.harness.clock.now)

    @rule(name=st.sampled_from(["s0", "s1"]))
    def unschedule(self, name: str) -> None:
        accepted = self.do(Command("unschedule", (name,)))
        assert accepted == (self.model.schedules.pop(name, None) is not None)  # rule 27

    @rule(minutes=st.integers(0, 3))
    def tick_schedules(self, minutes: int) -> None:
        known = len(self.harness.ids)
        assert self.do(Command("tick_schedules", (minutes,)))
        expected = self.model.tick_schedules(self.harness.clock.now)
        assert self.harness.ids[known:] == expected

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
                len(s.mailbox),
                s.message_topic,
                s.priority,
                tuple(sorted((a.topic, a.status) for a in s.asks)),
                {name: (n["chunks"], n["closed"]) for name, n in sorted(summaries(s).items())},
            )
            for t, s in state.tasks.items()
        }
        assert replayed == self.model.view()
        now = self.harness.clock.now
        listed = self.harness.scheduler.inbox(limit=1_000)
        assert [a.task_id for a in listed] == self.model.inbox(now)
        open_asks = self.harness.scheduler.world.indexes.get("open_asks")
        assert state.world.indexes.get("open_asks") == open_asks
        keys = {
            k.removeprefix("key:"): v.task_id
            for k, v in state.world.streams.items()
            if k.startswith("key:")
        }
        assert keys == self.model.keys == self.harness.keys


ReplayEqualsProjectionsEqualsModel.TestCase.settings = settings(
    max_examples=examples(5, 30),
    stateful_step_count=25,
    deadline=None,
)
TestReplayEqualsProjectionsEqualsModel = pytest.mark.grows(
    ReplayEqualsProjectionsEqualsModel.TestCase
)
