"""The ledgers: every dispatch run (task x day x attempt) and per-day counters."""

from __future__ import annotations

from typing import Any

import orjson

from tasktrail.domain import TaskEvent, World
from tasktrail.domain.runs.events import RunEvent
from tasktrail.domain.runs.ledger import ledger_of
from tasktrail.domain.runs.state import RunState

from .base import Changes, Projection, TableSpec

ENDED_STATUSES = ("done", "failed", "orphaned", "superseded")


def run_row(run: RunState) -> dict[str, Any]:
    """The ``runs`` row of one run."""
    return {
        "run_id": run.run_id,
        "task_id": run.task_id,
        "day": run.day,
        "attempt": run.attempt,
        "trigger": run.trigger,
        "status": run.status,
        "client_job_id": run.client_job_id,
        "tz": run.tz,
        "fired_at": run.fired_at,
        "scheduled_for": run.scheduled_for,
        "submit_attempts": run.submit_attempts,
        "drains": run.drains,
        "last_submit_error": run.last_submit_error,
        "job_id": run.job_id,
        "error_code": run.error.code if run.error is not None else None,
        "error_message": run.error.message if run.error is not None else None,
        "completed_at": run.completed_at,
        "updated_at": run.updated_at,
        "payload": orjson.dumps(run.payload).decode() if run.payload is not None else None,
        "catch_up": int(run.catch_up),
    }


class Ledgers(Projection):
    """The run ledger and per-day counters (runs minted, by trigger, how they ended)."""

    name = "ledgers"
    coalesces = True  # rows are a function of each stream's current state
    tables = (
        TableSpec(
            "runs",
            {
                "run_id": str,
                "task_id": str,
                "day": str,
                "attempt": int,
                "trigger": str,
                "status": str,
                "client_job_id": str,
                "tz": str,
                "fired_at": float,
                "scheduled_for": float,
                "submit_attempts": int,
                "drains": int,
                "last_submit_error": str,
                "job_id": str,
                "error_code": str,
                "error_message": str,
                "completed_at": float,
                "updated_at": float,
                "payload": str,
                "catch_up": int,
            },
            pk="run_id",
            indexes=[("task_id", "day", "attempt"), ("day", "status"), ("status",)],
            times=("fired_at", "scheduled_for", "completed_at", "updated_at"),
        ),
        TableSpec(
            "day_counters",
            {
                "day": str,
                "runs": int,
                "manual": int,
                "scheduled": int,
                **{status: int for status in ENDED_STATUSES},
            },
            pk="day",
        ),
    )

    def apply(
        self,
        changes: Changes,
        position: int,
        event: TaskEvent,
        before: Any,
        after: Any,
        world: World,
    ) -> None:
        if not isinstance(event, RunEvent) or not isinstance(after, RunState):
            return
        changes.upsert("runs", after.run_id, run_row(after))
        counts = ledger_of(world).per_day.get(after.day)
        if counts is None:
            return
        changes.upsert(
            "day_counters",
            after.day,
            {
                "day": after.day,
                "runs": counts.runs,
                "manual": counts.manual,
                "scheduled": counts.scheduled,
                **{status: counts.ended.get(status, 0) for status in ENDED_STATUSES},
            },
        )
