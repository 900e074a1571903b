"""Messages into a waiting task (issue 42, item 3): rules 20, 21 and 22, on both stores."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from conftest import crash
from helpers.cli import run

from tasktrail.domain import (
    InvalidArgument,
    ManualClock,
    Registry,
    RuleViolation,
    Scheduler,
    TaskDefinition,
    Worker,
)
from tasktrail.domain.tasks.events import TaskReserved
from tasktrail.domain.tasks.messages import MessageSent, MessagesRead, MessageWaitStarted
from tasktrail.replay import replay


def approvals(seen: list[Any], aborted: list[str] | None = None) -> Registry:
    """``approval``: ``ask`` waits for a message on "approval" (``timeout_s`` from the
    memo ``timeout_s``), ``decide`` reads it into ``seen`` and finishes; its abort
    handler notes the task in ``aborted``."""

    def ask(inv: Any) -> None:
        inv.wait_message("approval", phase="decide", timeout_s=inv.memo("timeout_s"))

    def decide(inv: Any) -> None:
        seen.append(inv.message("approval"))
        inv.finish("completed")

    def abort(inv: Any) -> None:
        if aborted is not None:
            aborted.append(inv.task_id)
        inv.finish("aborted")

    return Registry([TaskDefinition("approval", 1, {"ask": ask, "decide": decide}, abort=abort)])


FREE = Registry([TaskDefinition("free", 1, {"a": lambda inv: "b", "b": lambda inv: "a"})])
"""A kind whose phases a test takes by hand (``reserve``, then the invocation's calls)."""


def events(s: Scheduler, task_id: str) -> list[str]:
    return [type(e).__name__ for e in s.history(task_id)]


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


def test_a_snapshot_keeps_the_mailbox_and_the_message_wait(
    store_url: str, clock: ManualClock
) -> None:
    with Scheduler.open(store_url, clock=clock, registry=approvals([])) as s:
        task = s.submit("approval", phase="ask", memos={"timeout_s": 60})
        s.run_until_idle()
        s.send(task, "note", [1, {"a": 2}], actor="ana")
        before = s.task(task)
    with Scheduler.open(store_url, clock=clock, registry=approvals([])) as s:
        assert s.snapshot_at > 0  # opened from the snapshot the close took
        assert s.task(task) == before
        assert before.message_topic == "approval" and before.mailbox[0].value == [1, {"a": 2}]


def test_tasktrail_send_records_the_actor_and_reason(
    store_url: str, clock: ManualClock, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    with Scheduler.open(store_url, clock=clock, registry=approvals([])) as s:
        task = s.submit("approval", phase="ask", id="t1")
        s.run_until_idle()
    ran = run(
        [
            "send",
            store_url,
            task,
            "approval",
            '{"ok": true}',
            "--actor",
            "ana",
            "--reason",
            "fine",
        ],
        capsys,
    )
    assert ran.code == 0, ran.err
    assert "sent t1 message 1 on 'approval' by ana (now waiting)" in ran.out
    with Scheduler.open(store_url, clock=clock, registry=approvals([])) as s:
        (sent,) = [e for e in s.history(task) if isinstance(e, MessageSent)]
        assert (sent.message_topic, sent.value, sent.actor, sent.why) == (
            "approval",
            {"ok": True},
            "ana",
            "fine",
        )
        s.run_until_idle()
        assert s.task(task).status == "terminal"
    history = run(["history", store_url, task], capsys)
    assert history.code == 0
    assert (
        "MessageSent(seq=1, message_topic=approval" in history.out
        and "actor=ana, why=fine" in history.out
    )
    explained = run(["explain", store_url, task, "--json"], capsys)
    steps = [json.loads(line) for line in explained.out.splitlines()]
    sends = [step for step in steps if "MessageSent" in json.dumps(step)]
    assert sends and "ana" in json.dumps(sends[0]) and "fine" in json.dumps(sends[0])
    # Refused for an ended task (rule 20), and bad JSON: exit 2, nothing recorded.
    refused = run(["send", store_url, task, "approval", "1", "--json"], capsys)
    assert refused.code == 2 and "rule 20" in refused.err
    bad = run(["send", store_url, task, "approval", "yes"], capsys)
    assert bad.code == 2 and "not JSON" in bad.err
    with Scheduler.open(store_url, clock=clock, registry=approvals([])) as s:
        assert [type(e).__name__ for e in s.history(task)].count("MessageSent") == 1


def test_a_message_wait_ends_its_phase_span_waiting_and_async_phases_wait_too(
    store_url: str, clock: ManualClock, tracer_provider: Any, exporter: Any
) -> None:
    seen: list[Any] = []

    async def ask(inv: Any) -> None:
        inv.wait_message("approval", phase="decide")

    async def decide(inv: Any) -> None:
        seen.append(inv.message("approval"))
        inv.finish("completed")

    registry = Registry([TaskDefinition("approval", 1, {"ask": ask, "decide": decide})])
    with Scheduler.open(store_url, clock=clock, registry=registry) as s:
        s.configure_telemetry(tracer_provider)
        task = s.submit("approval", phase="ask")
        s.run_until_idle()
        s.send(task, "approval", 42)
        s.run_until_idle()
        assert seen == [42]
        spans = [x for x in exporter.get_finished_spans() if x.attributes["task.id"] == task]
        assert [(x.attributes["phase"], x.attributes["outcome"]) for x in spans] == [
            ("ask", "waiting"),
            ("decide", "done"),
        ]


def test_the_audit_verify_and_the_report_read_messages(
    sqlite_url: str, clock: ManualClock, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    with Scheduler.open(sqlite_url, clock=clock, registry=approvals([])) as s:
        task = s.submit("approval", phase="ask", memos={"timeout_s": 30})
        s.run_until_idle()
        s.send(task, "approval", "yes", actor="ana", reason="read the plan")
        s.run_until_idle()
    state = replay(sqlite_url)
    rows = [r for r in state.audit if r["task_id"] == task]
    commands = [r["command"] for r in sorted(rows, key=lambda r: r["position"])]
    assert commands[2:] == ["wait_message", "send", "reserve", "read", "finish"]
    (sent,) = [r for r in rows if r["command"] == "send"]
    assert (sent["actor"], sent["reason"]) == ("ana", "read the plan")
    assert run(["verify", sqlite_url], capsys).code == 0
    assert run(["report", sqlite_url, task, "--out", str(tmp_path / "r.html")], capsys).code == 0
    assert "waits for a message on approval" in (tmp_path / "r.html").read_text()


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
