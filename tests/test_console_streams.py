"""A streaming task's output on its console page (issue 46 on issue 44's streams).
Skipped until ``inv.emit`` lands; replay/console/streams.py's docstring says how the
coordinator wires it into the page and the API."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tasktrail.domain import Invocation, Registry, Scheduler, TaskDefinition
from tasktrail.replay.console.model.follow import Follower
from tasktrail.replay.console.model.task_view import task_view
from tasktrail.replay.console.streams import output_html, outputs

pytestmark = pytest.mark.skipif(
    not hasattr(Invocation, "emit"), reason="streams land with issue 44 (inv.emit)"
)


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
        assert "&lt;b&gt;hello&lt;/b&gt; world" in output_html(view)
    finally:
        follower.close()
