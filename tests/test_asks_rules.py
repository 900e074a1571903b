"""Asks (issue 44, item 2): what refuses an answer and what closes an ask. Rules 30, 31 and
32 (two writers answering at once too), bad asks and answers refused; an ask's deadline
and an abort mark close it. On both stores."""

from __future__ import annotations

from typing import Any

import pytest
from helpers.asks import approvals, events

from tasktrail.domain import (
    InvalidArgument,
    ManualClock,
    Registry,
    RuleViolation,
    Scheduler,
    TaskDefinition,
)
from tasktrail.domain.tasks.asks import AskAnswered, AskClosed
from tasktrail.replay import replay


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
