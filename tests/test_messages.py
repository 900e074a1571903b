"""Messages into a waiting task (issue 42, item 3): delivery and reading, rule 21, on
both stores. A task waiting for a message on a topic is not reserved before one is
there; it resumes at once when one is (a send wakes a running worker), reads the
oldest unread first, marks a read with its next decision (read again after a crash),
and a timeout resumes it with none. Rules 20 and 22 (refusals, aborts) are
tests/test_messages_refusals.py's; the record and the tools
tests/test_messages_records.py's."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
from conftest import crash
from helpers.messages import approvals, events

from tasktrail.domain import ManualClock, Registry, RuleViolation, Scheduler, TaskDefinition, Worker
from tasktrail.domain.tasks.messages import MessagesRead, MessageWaitStarted
from tasktrail.replay import replay

FREE = Registry([TaskDefinition("free", 1, {"a": lambda inv: "b", "b": lambda inv: "a"})])
"""A kind whose phases a test takes by hand (``reserve``, then the invocation's calls)."""


def test_a_message_sent_before_the_wait_resumes_at_once(store_url: str, clock: ManualClock) -> None:
    seen: list[Any] = []
    with Scheduler.open(store_url, clock=clock, registry=approvals(seen)) as s:
        task = s.submit("approval", phase="ask")
        assert s.send(task, "approval", {"ok": True}, actor="ana", reason="looks right") == 1
        s.run_until_idle()
        assert s.task(task).status == "terminal" and seen == [{"ok": True}]
        assert events(s, task) == [
            "TaskSubmitted",
            "MessageSent",
            "TaskReserved",
            "MessageWaitStarted",
            "TaskReserved",  # at once: the message was there
            "MessagesRead",
            "TaskEnded",
        ]
        assert s.task(task).mailbox == ()
        assert replay(s.store).tasks == s.world.tasks


def test_a_message_sent_after_the_wait_resumes_the_waiting_task(
    store_url: str, clock: ManualClock
) -> None:
    seen: list[Any] = []
    with Scheduler.open(store_url, clock=clock, registry=approvals(seen)) as s:
        task = s.submit("approval", phase="ask")
        s.run_until_idle()
        waiting = s.task(task)
        assert (waiting.status, waiting.message_topic) == ("waiting", "approval")
        assert s.runnable() == [] and s.wake() == {"active": False, "at": None}
        # 21. Not reserved before a message on its topic is there (another topic will not do).
        s.send(task, "other", 1)
        with pytest.raises(
            RuleViolation, match="rule 21: still waiting for a message on 'approval'"
        ):
            s.reserve(task)
        s.send(task, "approval", "yes")
        assert s.runnable() == [task]
        s.run_until_idle()
        assert s.task(task).status == "terminal" and seen == ["yes"]
        assert [m.topic for m in s.task(task).mailbox] == ["other"]  # never read


def test_a_send_wakes_a_waiting_task_on_a_running_worker_at_once(
    store_url: str, clock: ManualClock
) -> None:
    """A worker that would look at the store again only after 30 s runs the resumed phase
    within a moment of the send: the send wakes it (its news listener), not its poll."""
    done = threading.Event()
    seen: list[Any] = []

    def decide(inv: Any) -> None:
        seen.append(inv.message("approval"))
        inv.finish("completed")
        done.set()

    registry = Registry(
        [
            TaskDefinition(
                "approval",
                1,
                {"ask": lambda inv: inv.wait_message("approval", phase="decide"), "decide": decide},
            )
        ]
    )
    s = Scheduler.open(store_url, clock=clock, registry=registry, worker="w1")
    task = s.submit("approval", phase="ask")
    worker = Worker(s, poll_ms=30_000)
    thread = threading.Thread(target=worker.run, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 10
        while s.task(task).status != "waiting" and time.monotonic() < deadline:
            time.sleep(0.005)
        assert s.task(task).status == "waiting"
        time.sleep(0.05)  # the worker idles now, for up to its 30 s poll
        sent = time.monotonic()
        s.send(task, "approval", "go")
        assert done.wait(5), "the send did not wake the worker"
        assert time.monotonic() - sent < 1.0
        assert seen == ["go"]
    finally:
        worker.stop()
        thread.join(15)


def test_the_oldest_unread_message_is_read_first(store_url: str, clock: ManualClock) -> None:
    taken: list[Any] = []

    def take(inv: Any) -> None:
        taken.append(inv.message("x"))
        if len(taken) < 2:
            inv.wait_message("x", phase="take")
        else:
            inv.finish("completed")

    registry = Registry(
        [
            TaskDefinition(
                "reader", 1, {"start": lambda inv: inv.wait_message("x", "take"), "take": take}
            )
        ]
    )
    with Scheduler.open(store_url, clock=clock, registry=registry) as s:
        task = s.submit("reader", phase="start")
        s.send(task, "x", "first")
        s.send(task, "y", "elsewhere")
        s.send(task, "x", "second")
        s.run_until_idle()
        assert taken == ["first", "second"]
        read = [e.seqs for e in s.history(task) if isinstance(e, MessagesRead)]
        assert read == [(1,), (3,)]
        assert [(m.seq, m.value) for m in s.task(task).mailbox] == [(2, "elsewhere")]


def test_two_reads_in_one_phase_take_two_messages_and_mark_both(
    store_url: str, clock: ManualClock
) -> None:
    with Scheduler.open(store_url, clock=clock, registry=FREE) as s:
        task = s.submit("free", phase="a")
        for value in ("one", "two"):
            s.send(task, "x", value)
        s.reserve(task)
        inv = s._invocations[task]
        assert (inv.message("x"), inv.message("x"), inv.message("x")) == ("one", "two", None)
        inv.checkpoint("b")
        assert s.task(task).mailbox == ()
        assert events(s, task)[-2:] == ["MessagesRead", "CheckpointCommitted"]


def test_a_read_is_marked_with_the_next_decision_and_read_again_after_a_crash(
    store_url: str, clock: ManualClock
) -> None:
    registry = FREE
    s = Scheduler.open(store_url, clock=clock, registry=registry, worker="w")
    task = s.submit("free", phase="a")
    s.send(task, "x", {"n": 1})
    s.reserve(task)
    assert s._invocations[task].message("x") == {"n": 1}
    assert len(s.task(task).mailbox) == 1  # read, not marked: no decision yet
    crash(s)
    s = Scheduler.open(store_url, clock=clock, registry=registry, worker="w")
    try:
        assert s.task(task).status == "pending" and len(s.task(task).mailbox) == 1
        assert "MessagesRead" not in events(s, task)
        s.reserve(task)
        inv = s._invocations[task]
        assert inv.message("x") == {"n": 1}  # the same message, read again
        head = s.store.head()
        inv.checkpoint("b")
        # The marker and the decision: one append, consecutive positions.
        assert s.store.head() == head + 2
        assert events(s, task)[-2:] == ["MessagesRead", "CheckpointCommitted"]
        assert s.task(task).mailbox == ()
    finally:
        s.close()


def test_a_timeout_resumes_the_task_with_no_message(store_url: str, clock: ManualClock) -> None:
    seen: list[Any] = []
    with Scheduler.open(store_url, clock=clock, registry=approvals(seen)) as s:
        task = s.submit("approval", phase="ask", memos={"timeout_s": 5})
        s.run_until_idle()
        waiting = s.task(task)
        assert waiting.until == clock.now + 5_000
        wait = next(e for e in s.history(task) if isinstance(e, MessageWaitStarted))
        assert (wait.message_topic, wait.until) == ("approval", clock.now + 5_000)
        assert s.wake() == {"active": False, "at": clock.now + 5_000}
        clock.advance(4_999)
        assert s.runnable() == []
        clock.advance(1)
        s.run_until_idle()
        assert s.task(task).status == "terminal" and seen == [None]
        assert "MessagesRead" not in events(s, task)
