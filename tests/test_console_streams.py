"""A streaming task's output on its console page and in the API (issue 46 on issue 44's
streams): shown as text, closed at the task's end (rule 29), chunks after an offset."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
from helpers.console_server import in_process

from tasktrail.domain import Registry, Scheduler, TaskDefinition
from tasktrail.replay.console.model.follow import Follower
from tasktrail.replay.console.model.streams import outputs
from tasktrail.replay.console.model.task_view import task_view


def _talk(inv: Any) -> None:
    for token in ("<b>hello</b>", " world"):
        inv.emit(token)
    inv.finish("completed")


def test_a_tasks_output_shows_on_its_page_as_text(tmp_path: Path) -> None:
    location = str(tmp_path / "trail.db")
    registry = Registry([TaskDefinition("talk", 1, {"talk": _talk})])
    with Scheduler.open(location, registry=registry) as s:
        task = s.submit("talk", phase="talk")
        s.run_until_idle()
    follower = Follower(location)
    try:
        while follower.catch_up():
            pass
        view = task_view(follower, task)
        (out,) = outputs(view.events).values()
        assert out.text() == "<b>hello</b> world" and out.closed
    finally:
        follower.close()
    with in_process(location) as url, httpx.Client(base_url=url) as http:
        page = http.get(f"/tasks/{task}").text
        assert "&lt;b&gt;hello&lt;/b&gt; world" in page and "2 chunks, closed" in page
        after = http.get(f"/api/tasks/{task}/stream", params={"after": 0}).json()
        assert after == {
            "task_id": task,
            "stream": "out",
            "closed": True,
            "chunks": [{"offset": 1, "value": " world"}],
        }
        assert http.get("/api/tasks/nobody/stream").status_code == 404
