"""Asks (issue 44, item 2): a phase asks and waits for the first answer, and resumes with
it: answered after its wait began or while the asking phase still runs (a worker too),
two asks of one tree in either order; a message on the topic answers nothing, and a
snapshot keeps the asks and the inbox. Rules 30, 31 and 32 and what closes an ask are in
test_asks_rules.py. On both stores."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from helpers.asks import approvals, events

from tasktrail.domain import ManualClock, Registry, RuleViolation, Scheduler, TaskDefinition, Worker
from tasktrail.domain.tasks.asks import AskOpened
from tasktrail.replay import replay


def test_an_ask_answered_after_its_wait_began_resumes_the_task(
    store_url: str, clock: ManualClock
) -> None:
    seen: list[Any] = []
    with Scheduler.open(store_url, clock=clock, registry=approvals(seen)) as s:
        task = s.submit("payment", phase="ask", memos={"amount": 120})
        s.run_until_idle()
        waiting = s.task(task)
        assert (waiting.status, waiting.message_topic) == ("waiting", "approval")
        assert s.runnable() == [] and s.wake() == {"active": False, "at": None}
        with pytest.raises(RuleViolation, match="rule 21: still waiting for an answer"):
            s.reserve(task)
        (opened,) = [e for e in s.history(task) if isinstance(e, AskOpened)]
        assert (opened.ask_topic, opened.request, opened.assignees) == (
            "approval",
            {"amount": 120},
            (),
        )
        clock.advance(5)
        s.answer(task, "approval", {"ok": True}, actor="ana", reason="within budget")
        assert s.runnable() == [task]
        s.run_until_idle()
        assert seen == [{"ok": True}] and s.result(task).result == {"ok": True}
        assert events(s, task) == [
            "TaskSubmitted",
            "TaskReserved",
            "AskOpened",
            "AskAnswered",
            "TaskReserved",
            "TaskEnded",
        ]
        (answered,) = s.task(task).asks
        assert (answered.status, answered.actor, answered.why, answered.closed_at) == (
            "answered",
            "ana",
            "within budget",
            clock.now,
        )
        assert replay(s.store).tasks == s.world.tasks


def test_an_answer_while_the_asking_phase_still_runs_is_kept_and_resumes_it_after(
    store_url: str, clock: ManualClock
) -> None:
    """The ask is open once ``ask`` returns: the phase's own code answers it before the
    phase ends (its wait, for the worker, has not begun), and the task runs on at once."""
    seen: list[Any] = []
    holder: list[Scheduler] = []

    def ask(inv: Any) -> None:
        inv.ask("approval", request="ship?", phase="decide")
        holder[0].answer(inv.task_id, "approval", "yes", actor="ana")
        assert inv.task.status == "waiting"  # answered, still this phase's to end

    def decide(inv: Any) -> None:
        seen.append(inv.answer("approval"))
        inv.finish("completed")

    registry = Registry([TaskDefinition("payment", 1, {"ask": ask, "decide": decide})])
    with Scheduler.open(store_url, clock=clock, registry=registry) as s:
        holder.append(s)
        task = s.submit("payment", phase="ask")
        s.run_pass()
        assert s.task(task).status == "waiting" and s.runnable() == [task]  # ready at once
        s.run_until_idle()
        assert seen == ["yes"] and s.task(task).status == "terminal"
        assert events(s, task)[2:4] == ["AskOpened", "AskAnswered"]


def test_a_worker_resumes_a_task_answered_mid_phase_when_the_phase_ends(
    store_url: str, clock: ManualClock
) -> None:
    """A worker that would look at the store again only after 30 s: the answer came
    while the asking phase still ran; its end, not a poll, starts the next phase."""
    asked, answered, done = threading.Event(), threading.Event(), threading.Event()
    seen: list[Any] = []

    def ask(inv: Any) -> None:
        inv.ask("approval", phase="decide", assignees=["ana"])
        asked.set()
        assert answered.wait(30), "the test never answered"

    def decide(inv: Any) -> None:
        seen.append(inv.answer("approval"))
        inv.finish("completed")
        done.set()

    registry = Registry([TaskDefinition("payment", 1, {"ask": ask, "decide": decide})])
    s = Scheduler.open(store_url, clock=clock, registry=registry, worker="w1")
    task = s.submit("payment", phase="ask")
    worker = Worker(s, poll_ms=30_000)
    thread = threading.Thread(target=worker.run, daemon=True)
    thread.start()
    try:
        assert asked.wait(30)
        s.answer(task, "approval", "go", actor="ana")
        answered.set()
        assert done.wait(30), "the answered task did not resume when its phase ended"
        assert seen == ["go"]
    finally:
        worker.stop()
        thread.join(30)


@pytest.mark.parametrize("order", [(0, 1), (1, 0)])
def test_two_asks_open_in_one_tree_are_answered_in_either_order(
    store_url: str, clock: ManualClock, order: tuple[int, int]
) -> None:
    def plan(inv: Any) -> None:
        children = [inv.submit("review", id=f"review-{n}", memos={"part": n}) for n in (0, 1)]
        inv.memo("children", children)
        inv.wait(children, then="collect")

    def collect(inv: Any) -> None:
        answers = [inv.outcome(child).result for child in inv.memo("children")]  # type: ignore[union-attr]
        inv.finish("completed", result=answers)

    def review(inv: Any) -> None:
        inv.ask(f"part-{inv.memo('part')}", request=inv.memo("part"), phase="done")

    def done(inv: Any) -> None:
        inv.finish("completed", result=inv.answer(f"part-{inv.memo('part')}"))

    registry = Registry(
        [
            TaskDefinition("plan", 1, {"plan": plan, "collect": collect}),
            TaskDefinition("review", 1, {"ask": review, "done": done}),
        ]
    )
    with Scheduler.open(store_url, clock=clock, registry=registry) as s:
        root = s.submit("plan", phase="plan")
        s.run_until_idle()
        open_asks = s.inbox()
        assert [a.topic for a in open_asks] == ["part-0", "part-1"]
        assert {a.kind for a in open_asks} == {"review"}
        for n in order:
            ask = open_asks[n]
            s.answer(ask.task_id, ask.topic, f"ok {n}", actor=f"reviewer{n}")
            assert [a.topic for a in s.inbox()] == [open_asks[1 - n].topic] or n == order[1]
            s.run_until_idle()
        assert s.inbox() == []
        assert s.result(root).result == ["ok 0", "ok 1"]
        assert replay(s.store).tasks == s.world.tasks


def test_a_message_on_the_topic_does_not_answer_an_ask(store_url: str, clock: ManualClock) -> None:
    seen: list[Any] = []
    with Scheduler.open(store_url, clock=clock, registry=approvals(seen)) as s:
        task = s.submit("payment", phase="ask")
        s.send(task, "approval", "an older message")
        s.run_until_idle()
        s.send(task, "approval", "a message, not an answer", actor="bob")
        assert s.task(task).status == "waiting" and s.runnable() == []
        s.answer(task, "approval", "the answer", actor="ana")
        s.run_until_idle()
        assert seen == ["the answer"]
        assert [m.value for m in s.task(task).mailbox] == [
            "an older message",
            "a message, not an answer",
        ]


def test_a_snapshot_keeps_the_asks_and_the_inbox(store_url: str, clock: ManualClock) -> None:
    registry = approvals([], assignees=["ana"])
    with Scheduler.open(store_url, clock=clock, registry=registry) as s:
        task = s.submit("payment", phase="ask", memos={"amount": 3})
        s.run_until_idle()
        before, listed = s.task(task), s.inbox()
    with Scheduler.open(store_url, clock=clock, registry=registry) as s:
        assert s.snapshot_at > 0  # opened from the snapshot the close took
        assert s.task(task) == before and s.inbox() == listed
        s.answer(task, "approval", True, actor="ana")
        s.run_until_idle()
        assert s.task(task).status == "terminal"
