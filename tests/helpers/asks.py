"""The asks tests' registry of a task that asks for approval, and the names of a task's
events (tests/test_asks.py, tests/test_asks_rules.py)."""

from __future__ import annotations

from typing import Any

from tasktrail.domain import Registry, Scheduler, TaskDefinition


def approvals(seen: list[Any], aborted: list[str] | None = None, **asking: Any) -> Registry:
    """``payment``: ``ask`` asks "approval" (``timeout_s`` from the memo of that name,
    ``asking`` passed on), ``decide`` reads the answer into ``seen`` and finishes; its
    abort handler notes the task in ``aborted``."""

    def ask(inv: Any) -> None:
        inv.ask(
            "approval",
            request={"amount": inv.memo("amount")},
            phase="decide",
            timeout_s=inv.memo("timeout_s"),
            **asking,
        )

    def decide(inv: Any) -> None:
        seen.append(inv.answer("approval"))
        inv.finish("completed", result=inv.answer("approval"))

    def abort(inv: Any) -> None:
        if aborted is not None:
            aborted.append(inv.task_id)
        inv.finish("aborted")

    return Registry([TaskDefinition("payment", 1, {"ask": ask, "decide": decide}, abort=abort)])


def events(s: Scheduler, task_id: str) -> list[str]:
    return [type(e).__name__ for e in s.history(task_id)]
