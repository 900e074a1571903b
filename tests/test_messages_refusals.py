"""Messages into a waiting task (issue 42, item 3): what is refused, on both stores.
Rule 20: no message to a task past its outcome; a bad topic or value appends nothing;
rule 22: an abort mark beats a message (the abort handler runs, the message stays
unread), and an abort handler cannot wait for one (rule 21). A send that lost a race
is decided again."""

from __future__ import annotations

from typing import Any

import pytest
from helpers.messages import approvals, events

from tasktrail.domain import (
    InvalidArgument,
    ManualClock,
    Registry,
    RuleViolation,
    Scheduler,
    TaskDefinition,
)
from tasktrail.domain.tasks.events import TaskReserved
from tasktrail.domain.tasks.messages import MessageWaitStarted


def test_a_message_to_a_task_past_its_outcome_is_refused_by_rule_20(
    store_url: str, clock: ManualClock
) -> None:
    registry = Registry(
        [
            TaskDefinition("parent", 1, {"a": lambda inv: inv.finish("completed")}),
            TaskDefinition("child", 1, {"a": lambda inv: inv.sleep(10**13)}),
        ]
    )
    with Scheduler.open(store_url, clock=clock, registry=registry) as s:
        ended = s.submit("parent", phase="a", id="ended")
        s.run_until_idle()
        holding = s.submit("parent", phase="a", id="holding")
        s.submit("child", phase="a", owner=holding)
        s.run_until_idle()
        assert (s.task(ended).status, s.task(holding).status) == ("terminal", "completing")
        for task in (ended, holding):
            head = s.store.head()
            with pytest.raises(RuleViolation, match=r"rule 20: .*nothing was sent") as refused:
                s.send(task, "x", 1, actor="ana")
            assert refused.value.rule == 20 and refused.value.task_id == task
            assert s.store.head() == head


def test_a_bad_topic_or_value_is_refused_and_appends_nothing(
    store_url: str, clock: ManualClock
) -> None:
    with Scheduler.open(store_url, clock=clock, registry=Registry()) as s:
        task = s.submit("free", phase="a")
        head = s.store.head()
        for topic, value in (("", 1), (7, 1), ("x", None), ("x", float("nan")), ("x", object())):
            with pytest.raises(InvalidArgument):
                s.send(task, topic, value)  # type: ignore[arg-type]
        with pytest.raises(InvalidArgument, match="65536"):
            s.send(task, "x", "a" * 70_000)
        assert s.store.head() == head


@pytest.mark.parametrize("first", ["abort", "send"])
def test_an_abort_mark_beats_a_message_of_the_same_instant(
    store_url: str, clock: ManualClock, first: str
) -> None:
    seen: list[Any] = []
    aborted: list[str] = []
    with Scheduler.open(store_url, clock=clock, registry=approvals(seen, aborted)) as s:
        task = s.submit("approval", phase="ask")
        s.run_until_idle()
        acts = {
            "abort": lambda: s.abort(task, actor="ops", reason="cancelled"),
            "send": lambda: s.send(task, "approval", "yes", actor="ana"),
        }
        acts[first]()
        acts["send" if first == "abort" else "abort"]()
        s.run_until_idle()
        ended = s.task(task)
        assert ended.outcome is not None and ended.outcome.status == "aborted"
        assert aborted == [task] and seen == []  # 22: the abort handler ran, not decide
        history = s.history(task)
        waited = next(n for n, e in enumerate(history) if isinstance(e, MessageWaitStarted))
        modes = [e.mode for e in history[waited:] if isinstance(e, TaskReserved)]
        assert modes == ["abort"]  # reserved in abort mode at once: no run took the message
        assert [m.value for m in ended.mailbox] == ["yes"]  # the message stays unread
        assert "MessagesRead" not in events(s, task)


def test_an_abort_mark_after_the_message_woke_the_task_ends_its_run_unread(
    store_url: str, clock: ManualClock
) -> None:
    """The message came first and a run invocation took it; the mark comes before its
    next decision: rule 3 ends the run there, so the read is never marked (rule 22)."""
    aborted: list[str] = []
    with Scheduler.open(store_url, clock=clock, registry=approvals([], aborted)) as s:
        task = s.submit("approval", phase="ask")
        s.run_until_idle()
        s.send(task, "approval", "yes")
        assert s.reserve(task) == "run"
        inv = s._invocations[task]
        assert inv.message("approval") == "yes"
        s.abort(task, actor="ops")
        with pytest.raises(RuleViolation, match="rule 3"):
            inv.finish("completed")
        s.run_until_idle()
        assert s.task(task).outcome.status == "aborted" and aborted == [task]  # type: ignore[union-attr]
        assert [m.value for m in s.task(task).mailbox] == ["yes"]


def test_an_abort_handler_cannot_wait_for_a_message(store_url: str, clock: ManualClock) -> None:
    refusals: list[RuleViolation] = []

    def abort(inv: Any) -> None:
        try:
            inv.wait_message("x")
        except RuleViolation as refusal:
            refusals.append(refusal)
        inv.finish("aborted")

    registry = Registry([TaskDefinition("k", 1, {"a": lambda inv: inv.sleep(10**13)}, abort=abort)])
    with Scheduler.open(store_url, clock=clock, registry=registry) as s:
        task = s.submit("k", phase="a")
        s.run_until_idle()
        s.abort(task)
        s.run_until_idle()
        assert [r.rule for r in refusals] == [21]
        assert "MessageWaitStarted" not in events(s, task)


def test_a_send_that_lost_a_race_is_decided_again(
    sqlite_url: str, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tasktrail.domain import ConflictError

    with Scheduler.open(sqlite_url, clock=clock, registry=approvals([])) as s:
        task = s.submit("approval", phase="ask")
        decide_now = s._decide
        lost: list[bool] = []

        def first_loses(fn: Any, *args: Any, **kwargs: Any) -> Any:
            if not lost:
                lost.append(True)  # another writer's append came first: nothing appended
                raise ConflictError([task], "another writer appended first")
            return decide_now(fn, *args, **kwargs)

        monkeypatch.setattr(s, "_decide", first_loses)
        assert s.send(task, "approval", "yes") == 1 and lost == [True]
        assert events(s, task).count("MessageSent") == 1
