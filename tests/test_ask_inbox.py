"""The approval inbox (issue 44, item 2): listing open asks (filters, paging, an index of
the open asks), the async forms, ``tasktrail inbox`` and ``answer``, and the audit's
record of who answered. On both stores."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import orjson
import pytest
from helpers.checks import folded_rows
from helpers.cli import run

from tasktrail.domain import Ask, InvalidArgument, ManualClock, Registry, Scheduler, TaskDefinition
from tasktrail.projections import Projector
from tasktrail.replay import replay


def askers(seen: list[Any] | None = None) -> Registry:
    """Kinds ``refund`` and ``deploy``: ``ask`` asks on the memo ``topic`` of the memo
    ``assignees`` (with the memo ``timeout_s``), ``done`` finishes with the answer."""

    def ask(inv: Any) -> None:
        inv.ask(
            inv.memo("topic"),
            request=inv.memo("request"),
            phase="done",
            timeout_s=inv.memo("timeout_s"),
            assignees=inv.memo("assignees"),
        )

    def done(inv: Any) -> None:
        answer = inv.answer(inv.memo("topic"))
        if seen is not None:
            seen.append(answer)
        inv.finish("completed", result=answer)

    return Registry(
        [TaskDefinition(kind, 1, {"ask": ask, "done": done}) for kind in ("refund", "deploy")]
    )


def asking(s: Scheduler, kind: str, topic: str, assignees: list[str] | None, **memos: Any) -> str:
    task = s.submit(kind, phase="ask", memos={"topic": topic, "assignees": assignees, **memos})
    s.run_until_idle()
    return task


def test_the_inbox_lists_open_asks_oldest_first_with_filters_and_pages(
    store_url: str, clock: ManualClock
) -> None:
    with Scheduler.open(store_url, clock=clock, registry=askers()) as s:
        a = asking(s, "refund", "approval", ["ana"], request={"eur": 40}, timeout_s=600)
        clock.advance(10)
        b = asking(s, "deploy", "approval", None)  # anyone's
        clock.advance(10)
        c = asking(s, "refund", "review", ["bob", "ana"])
        clock.advance(10)
        d = asking(s, "deploy", "review", ["bob"])
        every = s.inbox()
        assert [x.task_id for x in every] == [a, b, c, d]
        first = every[0]
        assert first == Ask(a, "approval", {"eur": 40}, 1_000_000, 1_600_000, ("ana",), "refund")
        assert first.to_dict()["deadline"] == 1_600_000 and every[1].assignees == ()
        assert [x.task_id for x in s.inbox(topic="review")] == [c, d]
        assert [x.task_id for x in s.inbox(kind="deploy")] == [b, d]
        # An ask without assignees is listed under every assignee.
        assert [x.task_id for x in s.inbox(assignee="ana")] == [a, b, c]
        assert [x.task_id for x in s.inbox(assignee="bob")] == [b, c, d]
        assert [x.task_id for x in s.inbox(assignee="zoe")] == [b]
        assert [x.task_id for x in s.inbox(topic="review", assignee="ana")] == [c]
        # Pages: each starts after the last ask of the one before.
        pages, after = [], None
        while page := s.inbox(limit=3, after=after):
            pages.append([x.task_id for x in page])
            after = page[-1]
        assert pages == [[a, b, c], [d]]
        assert [x.task_id for x in s.inbox(assignee="bob", limit=1, after=every[1])] == [c]
        for bad in ({"limit": 0}, {"limit": True}, {"after": "x"}, {"topic": 3}):
            with pytest.raises(InvalidArgument):
                s.inbox(**bad)
        # Answered ones leave it; the index holds the open asks only.
        s.answer(b, "approval", "yes", actor="zoe")
        s.answer(c, "review", "fine", actor="bob")
        assert [x.task_id for x in s.inbox()] == [a, d]
        assert s.world.indexes["open_asks"] == {a: 1_000_000, d: 1_000_030}
        s.run_until_idle()
        assert set(s.world.indexes["open_asks"]) == {a, d}
        assert replay(s.store).world.indexes["open_asks"] == s.world.indexes["open_asks"]


def test_the_async_forms_answer_and_list_and_an_async_phase_asks(
    store_url: str, clock: ManualClock
) -> None:
    seen: list[Any] = []

    async def ask(inv: Any) -> None:
        inv.ask("approval", request="go?", phase="done", assignees=["ana"])

    async def done(inv: Any) -> None:
        seen.append(inv.answer("approval"))
        inv.finish("completed")

    registry = Registry([TaskDefinition("agent", 1, {"ask": ask, "done": done})])
    with Scheduler.open(store_url, clock=clock, registry=registry) as s:
        task = s.submit("agent", phase="ask")
        s.run_until_idle()

        async def operator() -> list[Ask]:
            (waiting,) = await s.inbox_async(assignee="ana")
            await s.answer_async(waiting.task_id, waiting.topic, "go", actor="ana")
            return await s.inbox_async()

        assert asyncio.run(operator()) == []
        s.run_until_idle()
        assert seen == ["go"] and s.task(task).status == "terminal"


def test_the_audit_shows_who_answered_which_ask_with_what_when_and_why(
    store_url: str, clock: ManualClock, tmp_path: Path
) -> None:
    with Scheduler.open(store_url, clock=clock, registry=askers()) as s:
        task = asking(s, "refund", "approval", ["ana"], request={"eur": 40})
        clock.advance(2_500)
        s.answer(task, "approval", {"ok": True}, actor="ana", reason="receipt checked")
        s.run_until_idle()
    state = replay(store_url)
    rows = sorted((r for r in state.audit if r["task_id"] == task), key=lambda r: r["position"])
    commands = [r["command"] for r in rows]
    assert commands == ["submit", "reserve", "ask", "answer", "reserve", "finish"]
    (answered,) = [r for r in rows if r["command"] == "answer"]
    assert (answered["actor"], answered["reason"], answered["at"]) == (
        "ana",
        "receipt checked",
        1_002_500,
    )
    assert orjson.loads(answered["detail"]) == {"ask_topic": "approval", "value": {"ok": True}}
    assert answered["event_type"] == "AskAnswered" and answered["status_after"] == "waiting"
    with Projector(store_url, tmp_path / "views.db") as projector:
        projector.catch_up()
        stored = {r["position"]: r for r in folded_rows(projector, "audit")}
        assert stored[answered["position"]] == answered
        query = (  # docs/auditing.md's, as written
            "SELECT task_id, json_extract(detail, '$.ask_topic'), json_extract(detail, "
            "'$.value'), at_iso, actor, reason FROM audit WHERE command = 'answer'"
        )
        assert list(projector.db.execute(query)) == [
            (task, "approval", '{"ok":true}', "1970-01-01T00:16:42.500Z", "ana", "receipt checked")
        ]


def test_tasktrail_inbox_and_answer(
    store_url: str, clock: ManualClock, capsys: pytest.CaptureFixture[str]
) -> None:
    # The command line reads the system clock: asks with no deadline stay open for it.
    with Scheduler.open(store_url, clock=clock, registry=askers()) as s:
        task = s.submit("refund", phase="ask", id="t1", memos={"topic": "approval"})
        s.submit("deploy", phase="ask", id="t2", memos={"topic": "go", "assignees": ["bob"]})
        s.run_until_idle()
        head = s.store.head()
    listed = run(["inbox", store_url], capsys)
    assert listed.code == 0, listed.err
    lines = listed.out.splitlines()
    assert lines[0].split()[:3] == ["TASK", "KIND", "TOPIC"]
    assert [line.split()[:3] for line in lines[1:]] == [
        ["t1", "refund", "approval"],
        ["t2", "deploy", "go"],
    ]
    assert "*" in lines[1].split() and "bob" in lines[2].split()
    mine = run(["inbox", store_url, "--assignee", "carl", "--json"], capsys)
    assert [json.loads(line)["task_id"] for line in mine.out.splitlines()] == ["t1"]
    assert run(["inbox", store_url, "--topic", "nothing"], capsys).out.strip() == "no open ask"
    refused = run(["answer", store_url, "t2", "go", '"yes"', "--actor", "carl"], capsys)
    assert refused.code == 2 and "rule 31" in refused.err
    with Scheduler.open(store_url, clock=clock, registry=askers()) as s:
        assert s.store.head() == head  # refused: nothing appended (the act's open neither)
    act = ["answer", store_url, task, "approval", '{"ok": true}', "--actor", "ana"]
    answered = run([*act, "--reason", "ok", "--json"], capsys)
    assert answered.code == 0, answered.err
    assert json.loads(answered.out) == {
        "act": "answer",
        "task_id": "t1",
        "topic": "approval",
        "status": "waiting",
        "actor": "ana",
        "reason": "ok",
    }
    again = run(["answer", store_url, task, "approval", "1", "--actor", "bob"], capsys)
    assert again.code == 2 and "rule 32" in again.err and "by ana" in again.err
    bad = run(["answer", store_url, task, "approval", "yes", "--actor", "bob"], capsys)
    assert bad.code == 2 and "not JSON" in bad.err
    left = run(["inbox", store_url, "--json"], capsys).out.splitlines()
    assert [json.loads(line)["task_id"] for line in left] == ["t2"]
    history = run(["history", store_url, task], capsys)
    assert "AskAnswered(ask_topic=approval" in history.out and "actor=ana" in history.out
    with Scheduler.open(store_url, clock=clock, registry=askers()) as s:
        s.run_until_idle()
        assert s.result(task).result == {"ok": True}


def test_verify_replay_and_the_report_read_asks(
    sqlite_url: str, clock: ManualClock, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    with Scheduler.open(sqlite_url, clock=clock, registry=askers()) as s:
        waiting = asking(s, "refund", "approval", ["ana"], timeout_s=3_600)
        answered = asking(s, "deploy", "go", None)
        s.answer(answered, "go", "yes", actor="bob", reason="green")
        s.run_until_idle()
    assert run(["verify", sqlite_url], capsys).code == 0
    replayed = run(["replay", sqlite_url], capsys)
    assert f"{waiting}" in replayed.out and "for an answer to its ask on 'approval'" in replayed.out
    out = tmp_path / "r.html"
    assert run(["report", sqlite_url, waiting, "--out", str(out)], capsys).code == 0
    assert "waits for an answer on approval" in out.read_text()
