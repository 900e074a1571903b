"""Stores the report tests draw: a demo store, and one whose every recorded string is
hostile HTML."""

from __future__ import annotations

from pathlib import Path

from tasktrail.domain import ManualClock, Registry, Scheduler, TaskDefinition
from tasktrail.domain.demo import run_demo

HOSTILE = (
    '<script>document.title="pwned"</script>'
    "<img src=x onerror=\"document.title='pwned'\">"
    "<b onmouseover=\"document.title='pwned'\">&amp;</b>"
)
"""What a task records in its kind, phase, memo, reason and message: it must reach the
page as text, never as markup."""
ROOT = 'root"><script>document.title="pwned"</script>'
CHILD = "child<script>document.title='pwned'</script>"


def demo_store(folder: Path, tasks: int = 60) -> Path:
    """The demo's workload (crash and recovery, abort cascade, waits, Turns, runs)."""
    path = folder / "demo.db"
    run_demo(path, tasks, log=lambda _line: None)
    return path


def hostile_store(path: Path) -> Path:
    """A tree of two tasks whose ids, kind, phases, memo, error message and reason all
    carry HTML and script: submitted, memo, checkpoint, wait, a failure, an abort."""
    clock = ManualClock(1_767_603_600_000)
    registry = Registry([TaskDefinition(HOSTILE, 1, {HOSTILE: lambda _inv: None})])
    scheduler = Scheduler.open(path, clock=clock, registry=registry)
    root = scheduler.submit(HOSTILE, phase=HOSTILE, id=ROOT)
    child = scheduler.submit(HOSTILE, owner=root, phase=HOSTILE, id=CHILD)
    scheduler.reserve(root)
    scheduler.memo(root, HOSTILE, {HOSTILE: [HOSTILE]})
    scheduler.checkpoint(root, HOSTILE + "2")
    scheduler.wait(root, on=[child], policy="all")
    scheduler.reserve(child)
    scheduler.finish(child, "failed", error={"message": HOSTILE, "detail": {HOSTILE: HOSTILE}})
    clock.advance(100)
    scheduler.abort(root)
    scheduler.reserve(root)  # the abort handler's invocation
    scheduler.finish(root, "aborted", reason=HOSTILE)
    scheduler.close()
    return path
