"""Questions a scheduler, an operator or an analyst asks of the read models.

Every answer comes from the SQLite tables a :class:`~.projector.Projector`
keeps, so it works on any copy of the read-model file, with or without the
store. Rows come back as plain dicts.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

import orjson

from tasktrail.domain import Registry, TaskState, blocked_reason
from tasktrail.domain.tasks.definitions import parked_now
from tasktrail.domain.tasks.restart_limit import DEFAULT_RESTART_LIMIT
from tasktrail.domain.tasks.state import Checkpoint
from tasktrail.domain.turns.wakeups import choose_deadline

from .projector import Projector

if TYPE_CHECKING:
    import sqlite_utils

JSON_COLUMNS = ("project_ids", "waiting_on", "memos", "detail", "reasons", "payload")


def _decode(row: dict[str, Any]) -> dict[str, Any]:
    for column in JSON_COLUMNS:
        value = row.get(column)
        if isinstance(value, str):
            row[column] = orjson.loads(value)
    return row


class ReadModel:
    """Queries over a read-model file (or the one a projector keeps)."""

    def __init__(self, source: str | os.PathLike[str] | Projector | sqlite_utils.Database):
        import sqlite_utils  # loaded with the first read-model file (see base.py)

        if isinstance(source, Projector):
            self.db = source.db
        elif isinstance(source, sqlite_utils.Database):
            self.db = source
        else:
            self.db = sqlite_utils.Database(os.fspath(source))

    def _rows(self, sql: str, params: tuple[Any, ...] = ()) -> list[dict[str, Any]]:
        cursor = self.db.execute(sql, params)
        columns = [c[0] for c in cursor.description]
        return [_decode(dict(zip(columns, row, strict=True))) for row in cursor.fetchall()]

    def live_tasks(self, status: str | None = None) -> list[dict[str, Any]]:
        """Live tasks (optionally of one status), in submission order."""
        if status is None:
            return self._rows("SELECT * FROM live_tasks ORDER BY submitted_at, task_id")
        return self._rows(
            "SELECT * FROM live_tasks WHERE status = ? ORDER BY submitted_at, task_id", (status,)
        )

    def counts_by_status(self) -> dict[str, int]:
        """How many live tasks have each status."""
        rows = self.db.execute("SELECT status, count(*) FROM live_tasks GROUP BY status")
        return {status: count for status, count in rows.fetchall()}

    def waiters(self, task_id: str) -> list[dict[str, Any]]:
        """The tasks waiting on ``task_id``, with their policy."""
        return self._rows(
            "SELECT waiter_id, policy FROM waiters WHERE awaited_id = ? ORDER BY waiter_id",
            (task_id,),
        )

    def owned(self, owner_id: str) -> list[dict[str, Any]]:
        """The live tasks ``owner_id`` owns directly (the ownership tree, one level)."""
        return self._rows(
            "SELECT * FROM live_tasks WHERE owner_id = ? ORDER BY submitted_at, task_id",
            (owner_id,),
        )

    def next_sleep_due(self, after: float | None = None) -> dict[str, Any] | None:
        """The earliest sleep (not abort-marked; optionally not due by ``after``)."""
        sql = "SELECT task_id, until FROM sleeping WHERE abort_requested = 0"
        params: tuple[Any, ...] = ()
        if after is not None:
            sql += " AND until > ?"
            params = (after,)
        rows = self._rows(sql + " ORDER BY until, task_id LIMIT 1", params)
        return rows[0] if rows else None

    def restart_limit(self) -> int:
        """The restart limit in force as of the read model's position: the last one the
        log recorded, else 3 (the default of a log that never recorded one)."""
        if not self.db.table("restart_limit").exists():
            return DEFAULT_RESTART_LIMIT  # a read-model file an earlier release wrote
        row = self.db.execute("SELECT restart_limit FROM restart_limit").fetchone()
        return DEFAULT_RESTART_LIMIT if row is None else int(row[0])

    def blocked(
        self, registry: Registry | None = None, restart_limit: int | None = None
    ) -> list[dict[str, Any]]:
        """Live tasks that cannot run, with the reason (rule 13), computed now.

        Without a registry only the restart limit is known; with one, the
        definition reasons too (``missing_definition``, ``version_too_old``,
        ``migration_failed``). ``restart_limit`` (``None``: :meth:`restart_limit`,
        the one the log recorded) is what ``restart_limit`` is measured against.
        """
        limit = self.restart_limit() if restart_limit is None else restart_limit
        out = []
        for row in self.live_tasks():
            task = task_from_row(row)
            if registry is None:
                reason = "restart_limit" if parked_now(task, limit) else None
            else:
                reason = blocked_reason(task, registry, limit)
            if reason is not None:
                out.append({"task_id": task.id, "kind": task.kind, "reason": reason})
        return out

    def active_turns(self, task_id: str | None = None) -> list[dict[str, Any]]:
        """Each role's open Turn (of one task, or of all live tasks)."""
        if task_id is None:
            return self._rows("SELECT * FROM active_turns ORDER BY task_id, role")
        return self._rows("SELECT * FROM active_turns WHERE task_id = ? ORDER BY role", (task_id,))

    def pending_wakeups(self) -> list[dict[str, Any]]:
        """Every pending Leader wakeup, earliest first request first."""
        return self._rows("SELECT * FROM pending_wakeups ORDER BY first_requested_at, task_id")

    def next_wakeup_deadline(self, now: float | None = None) -> dict[str, Any] | None:
        """The earliest wakeup deadline across all tasks: the aggregation deadline,
        or, once it has passed (at ``now``, the scheduler clock) while the task's
        Leader is busy, its re-signal or the force deadline (yui answers the
        aggregation end first).
        Without ``now`` every wakeup answers its aggregation deadline."""
        rows = self.db.execute(
            "SELECT w.task_id, w.aggregation_deadline, w.force_deadline, w.resignal_at, "
            "w.busy_attempts, t.task_id IS NOT NULL FROM pending_wakeups w "
            "LEFT JOIN active_turns t ON t.task_id = w.task_id AND t.role = 'leader'"
        ).fetchall()
        best: dict[str, Any] | None = None
        for task_id, aggregation_at, force_at, resignal_at, attempts, busy in rows:
            # A row an earlier release wrote has no busy_attempts: as then, found busy.
            found_busy = attempts is None or attempts > 0
            deadline, window = choose_deadline(
                aggregation_at, force_at, bool(busy), now, resignal_at, found_busy
            )
            if best is None or (deadline, task_id) < (best["deadline"], best["task_id"]):
                best = {"task_id": task_id, "deadline": deadline, "window": window}
        return best

    def runs(self, task_id: str | None = None, day: str | None = None) -> list[dict[str, Any]]:
        """Dispatch runs of a task, of a day, or of both, in day, task, attempt order."""
        where, params = [], []
        if task_id is not None:
            where.append("task_id = ?")
            params.append(task_id)
        if day is not None:
            where.append("day = ?")
            params.append(day)
        sql = "SELECT * FROM runs"
        if where:
            sql += " WHERE " + " AND ".join(where)
        return self._rows(sql + " ORDER BY day, task_id, attempt", tuple(params))

    def day_counters(self, day: str) -> dict[str, Any] | None:
        """The per-day counters of the ledger (runs minted, by trigger, how they ended)."""
        rows = self._rows("SELECT * FROM day_counters WHERE day = ?", (day,))
        return rows[0] if rows else None

    def audit(self, task_id: str) -> list[dict[str, Any]]:
        """Every event of one task (and of streams about it), oldest first."""
        return self._rows("SELECT * FROM audit WHERE task_id = ? ORDER BY position", (task_id,))

    def wake(self, now: float) -> dict[str, Any]:
        """Rule 15 from the live mirror: ``active`` if some task is running or can run
        now by the state alone, ``at`` the earliest sleep not yet due.

        Definition-based blocking needs a registry; use ``Scheduler.wake()`` for
        the scheduler's own answer.
        """
        nxt = self.next_sleep_due(after=now)
        rows = self.db.execute(
            "SELECT count(*) FROM live_tasks WHERE status IN ('running', 'pending') "
            "OR (status = 'sleeping' AND (until <= ? OR abort_requested = 1))",
            (now,),
        ).fetchone()
        return {"active": bool(rows[0]), "at": nxt["until"] if nxt else None}


def task_from_row(row: dict[str, Any]) -> TaskState:
    """A :class:`TaskState` with what a ``live_tasks`` row holds (enough for rule 13)."""
    return TaskState(
        id=row["task_id"],
        kind=row["kind"],
        version=row["version"],
        status=row["status"],
        checkpoint=Checkpoint(row["phase"], row["attempt"]) if row["phase"] else None,
        owner_id=row["owner_id"],
        restarts=row["restarts"],
        abort_requested=bool(row["abort_requested"]),
        abort_reason=row["abort_reason"],
        until=row["until"],
        events=row["events"],
    )
