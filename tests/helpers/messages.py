"""What the message tests share (tests/test_messages*.py, issue 42 item 3): the
``approval`` definition that waits for a message, and a task's event names."""

from __future__ import annotations

from typing import Any

from tasktrail.domain import Registry, Scheduler, TaskDefinition


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


def events(s: Scheduler, task_id: str) -> list[str]:
    return [type(e).__name__ for e in s.history(task_id)]
