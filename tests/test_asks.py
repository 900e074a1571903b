"""Asks (issue 44, item 2): a phase asks and waits for the first answer; rules 30, 31
and 32; an ask's deadline and an abort mark close it. On both stores."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from tasktrail.domain import (
    InvalidArgument,
    ManualClock,
    Registry,
    RuleViolation,
    Scheduler,
    TaskDefinition,
    Worker,
)
from tasktrail.domain.tasks.asks import AskAnswered, AskClosed, AskOpened
from tasktrail.replay import replay


def approvals(seen: list[Any], aborted: list[str] | None = None, **asking: Any) -> Registry:
    """``payment``: ``ask`` asks "approval" (``timeout_s`` from the memo of that name,
    ``asking`` passed on), ``decide`` reads the answer into ``seen`` and finishes; its
    abort handler notes the task in ``aborted``."""

    def ask(inv: Any) -> None:
        inv.ask(
            "approval",
            request={"amount": inv.memo("amount")},
            phase="decide",
            timeout_s=inv.memo("timeout_s"),
            **asking,
        )

    def decide(inv: Any) -> None:
        seen.append(inv.answer("approval"))
        inv.finish("completed", result=inv.answer("approval"))

    def abort(inv: Any) -> None:
        if aborted is not None:
            aborted.append(inv.task_id)
        inv.finish("aborted")

    return Registry([TaskDefinition("payment", 1, {"ask": ask, "decide": decide}, abort=abort)])


def events(s: Scheduler, task_id: str) -> list[str]:
    return [type(e).__name__ for e in s.history(task_id)]


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


def _refused(s: Scheduler, rule: int, match: str, *args: Any, **kwargs: Any) -> RuleViolation:
    """``s.answer(*args, **kwargs)`` refused by ``rule``, having appended nothing."""
    head = s.store.head()
    with pytest.raises(RuleViolation, match=match) as refused:
        s.answer(*args, **kwargs)
    assert refused.value.rule == rule
    assert s.store.head() == head
    return refused.value


def test_rule_30_an_answer_to_no_open_ask_is_refused_and_appends_nothing(
    store_url: str, clock: ManualClock
) -> None:
    seen: list[Any] = []
    with Scheduler.open(store_url, clock=clock, registry=approvals(seen)) as s:
        never = s.submit("payment", phase="decide")  # it never asks
        _refused(s, 30, r"rule 30: the task has no ask on 'approval'", never, "approval", 1)
        task = s.submit("payment", phase="ask")
        s.run_until_idle()
        _refused(s, 30, "no ask on 'other'", task, "other", 1, actor="ana")
        s.abort(task, actor="ops", reason="cancelled")
        _refused(s, 30, "closed by an abort mark", task, "approval", 1, actor="ana")
        s.run_until_idle()
        assert s.task(task).status == "terminal"
        _refused(s, 30, "closed by an abort mark", task, "approval", 1)


def test_rule_31_an_actor_not_among_the_assignees_is_refused_and_appends_nothing(
    store_url: str, clock: ManualClock
) -> None:
    seen: list[Any] = []
    registry = approvals(seen, assignees=["ana", "carl"])
    with Scheduler.open(store_url, clock=clock, registry=registry) as s:
        task = s.submit("payment", phase="ask")
        s.run_until_idle()
        only = r"only its assignees \(ana, carl\) answer the ask on 'approval', not"
        _refused(s, 31, f"{only} 'bob'", task, "approval", 1, actor="bob")
        _refused(s, 31, f"{only} an actor not named", task, "approval", 1)
        assert [a.assignees for a in s.inbox()] == [("ana", "carl")]
        s.answer(task, "approval", "fine", actor="carl")
        s.run_until_idle()
        assert seen == ["fine"]


def test_rule_32_the_first_answer_wins_and_a_second_is_refused_naming_who_and_when(
    store_url: str, clock: ManualClock
) -> None:
    seen: list[Any] = []
    with Scheduler.open(store_url, clock=clock, registry=approvals(seen)) as s:
        task = s.submit("payment", phase="ask")
        s.run_until_idle()
        s.answer(task, "approval", "first", actor="ana", reason="fast")
        answered_at = clock.now
        clock.advance(1_000)
        when = "1970-01-01T00:16:40.000Z"
        assert answered_at == 1_000_000
        first = f"answered already, by ana at {when}"
        _refused(s, 32, first, task, "approval", "second", actor="bob")
        s.run_until_idle()  # resumed with the first answer, ended
        _refused(s, 32, f"by ana at {when}", task, "approval", "late", actor="bob")
        assert seen == ["first"]
        assert [type(e) for e in s.history(task)].count(AskAnswered) == 1


def test_an_asks_timeout_closes_it_and_resumes_the_task_with_no_answer(
    store_url: str, clock: ManualClock
) -> None:
    seen: list[Any] = []
    with Scheduler.open(store_url, clock=clock, registry=approvals(seen)) as s:
        task = s.submit("payment", phase="ask", memos={"timeout_s": 60})
        s.run_until_idle()
        deadline = clock.now + 60_000
        assert [a.deadline for a in s.inbox()] == [deadline]
        assert s.wake() == {"active": False, "at": deadline}
        clock.advance(59_999)
        assert s.runnable() == [] and len(s.inbox()) == 1
        clock.advance(1)
        assert s.inbox() == []  # past its deadline: no longer answerable
        _refused(s, 30, "timed out at", task, "approval", "too late", actor="ana")
        s.run_until_idle()
        assert seen == [None] and s.task(task).status == "terminal"
        closed = [e for e in s.history(task) if isinstance(e, AskClosed)]
        assert [(e.cause, e.rule, e.at) for e in closed] == [("timeout", 21, deadline)]
        assert events(s, task)[3:5] == ["AskClosed", "TaskReserved"]
        _refused(s, 30, "closed by its deadline", task, "approval", "later", actor="ana")


def test_an_abort_mark_closes_the_open_asks_of_its_tree(store_url: str, clock: ManualClock) -> None:
    aborted: list[str] = []
    seen: list[Any] = []
    registry = approvals(seen, aborted)

    def parent(inv: Any) -> None:
        children = [inv.submit("payment", phase="ask") for _ in range(2)]
        inv.wait(children, then="end")

    registry.register(
        TaskDefinition("parent", 1, {"start": parent, "end": lambda inv: inv.finish("completed")})
    )
    with Scheduler.open(store_url, clock=clock, registry=registry) as s:
        root = s.submit("parent", phase="start")
        s.run_until_idle()
        children = [a.task_id for a in s.inbox()]
        assert len(children) == 2
        s.abort(root, actor="ops", reason="the order was cancelled")
        assert s.inbox() == []
        for child in children:
            closed = [e for e in s.history(child) if isinstance(e, AskClosed)]
            assert [(e.cause, e.rule) for e in closed] == [("abort", 22)]
            assert events(s, child)[-2:] == ["AbortMarked", "AskClosed"]
        s.run_until_idle()
        assert sorted(aborted) == sorted(children) and seen == []
        assert s.task(root).status == "terminal"
        assert "open_asks" not in s.world.indexes
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


def test_bad_asks_and_answers_are_refused_and_append_nothing(
    store_url: str, clock: ManualClock
) -> None:
    refusals: list[Exception] = []

    def ask(inv: Any) -> None:
        for bad in (
            {"assignees": "ana"},
            {"assignees": ["ana", ""]},
            {"request": float("nan")},
            {"timeout_s": -1},
            {"assignees": [f"user{n}" for n in range(101)]},
        ):
            try:
                inv.ask("approval", phase="end", **bad)
            except (InvalidArgument, RuleViolation) as error:
                refusals.append(error)
        inv.finish("completed")

    def abort(inv: Any) -> None:
        try:
            inv.ask("approval")
        except RuleViolation as error:
            refusals.append(error)
        inv.finish("aborted")

    registry = Registry([TaskDefinition("k", 1, {"ask": ask}, abort=abort)])
    with Scheduler.open(store_url, clock=clock, registry=registry) as s:
        task = s.submit("k", phase="ask")
        s.run_until_idle()
        assert len(refusals) == 5 and "AskOpened" not in events(s, task)
        other = s.submit("k", phase="ask")
        s.abort(other)
        s.run_until_idle()
        assert isinstance(refusals[-1], RuleViolation) and refusals[-1].rule == 21
        head = s.store.head()
        for value in (None, float("inf"), object()):
            with pytest.raises(InvalidArgument):
                s.answer(task, "approval", value)
        assert s.store.head() == head


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


def test_rule_32_of_two_writers_answering_at_once_the_second_is_refused(
    store_url: str, clock: ManualClock
) -> None:
    """Two schedulers on one store, each folded before either answers: the second's
    answer folds the first's (or loses the append and decides again) and meets rule 32."""
    seen: list[Any] = []
    registry = approvals(seen)
    with Scheduler.open(store_url, clock=clock, registry=registry, worker="a") as first:
        task = first.submit("payment", phase="ask")
        first.run_until_idle()
        with Scheduler.open(store_url, clock=clock, registry=registry, worker="b") as second:
            assert [x.task_id for x in second.inbox()] == [task]
            first.answer(task, "approval", "from a", actor="ana")
            _refused(second, 32, "answered already, by ana", task, "approval", "from b")
            assert second.inbox() == []
        first.run_until_idle()
        assert seen == ["from a"]
