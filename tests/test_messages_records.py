"""Messages into a waiting task (issue 42, item 3) in the record and the tools, on both
stores: a snapshot keeps the mailbox and the message wait; ``tasktrail send`` records
the actor and the reason (rule 20 once the task ended); a message wait ends its phase
span ``waiting``, an async phase's too; the audit, verify and the report read
messages."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from helpers.cli import run
from helpers.messages import approvals

from tasktrail.domain import ManualClock, Registry, Scheduler, TaskDefinition
from tasktrail.domain.tasks.messages import MessageSent
from tasktrail.replay import replay


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
