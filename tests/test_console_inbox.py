"""The console's inbox (issue 46 on issue 44's asks): an ask answered from the inbox page
in Chromium, recorded as the token's actor; an actor who is not an assignee refused
(rule 31) with nothing appended."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from helpers.console_browser import ConsoleBrowser, chromium
from helpers.console_server import ALICE, BOB, as_process, head, token_file

from tasktrail.domain import Registry, Scheduler, TaskDefinition
from tasktrail.replay import replay


def _ask(inv: Any) -> None:
    inv.ask("deploy", request={"env": "prod"}, phase="go", assignees=["alice"])


def _go(inv: Any) -> None:
    inv.finish("completed", result=inv.answer("deploy"))


REGISTRY = Registry([TaskDefinition("approval", 1, {"ask": _ask, "go": _go})])


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ConsoleBrowser]:
    yield from chromium(tmp_path_factory)


def asking(location: str) -> str:
    with Scheduler.open(location, registry=REGISTRY, worker="asker") as s:
        task = s.submit("approval", id="deploy-1", phase="ask")
        s.run_until_idle()
    return task


def test_an_ask_is_answered_from_the_inbox_as_the_tokens_actor(
    browser: ConsoleBrowser, tmp_path: Path
) -> None:
    location = str(tmp_path / "trail.db")
    task = asking(location)
    with as_process(location, "--token-file", str(token_file(tmp_path))) as served:
        asks = httpx.get(served.url + "api/inbox").json()["asks"]
        assert [(a["task_id"], a["topic"], a["assignees"]) for a in asks] == [
            (task, "deploy", ["alice"])
        ]
        before = head(location)
        refused = httpx.post(
            f"{served.url}api/tasks/{task}/answer",
            json={"topic": "deploy", "value": True, "reason": "not mine"},
            headers={"Authorization": f"Bearer {BOB}"},
        )
        assert refused.status_code == 409 and refused.json()["rule"] == 31
        assert head(location) == before
        browser.events.clear()
        browser.goto(served.url + "login?next=/inbox")
        browser.fill("[name=token]", ALICE)
        browser.click(".login button")
        browser.wait_for("location.pathname === '/inbox'")
        browser.wait_ready()
        assert browser.evaluate("document.querySelectorAll('form[data-act=answer]').length") == 1
        browser.fill("form[data-act=answer] [name=reason]", "change window open")
        browser.click("form[data-act=answer] button[value=approve]")
        said = browser.wait_for(
            "!document.getElementById('said').hidden && document.getElementById('said').textContent"
        )
        assert said.startswith(f"answered {task}'s ask on 'deploy' by alice")
        browser.wait_for("document.querySelectorAll('form[data-act=answer]').length === 0")
        assert browser.errors() == []
    answered = [r for r in replay(location).audit if r["event_type"] == "AskAnswered"]
    assert [(r["actor"], r["reason"]) for r in answered] == [("alice", "change window open")]
