"""What differs between two scheduler states, task by task (``str()`` escapes what a
log holds, :func:`~tasktrail.domain.tasks.describe.printable`; ``to_dict()`` is exact)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tasktrail.domain.tasks.describe import printable

from .state import SchedulerState


@dataclass
class TaskDiff:
    """How one task differs: ``fields`` maps a field to its (a, b) values."""

    task_id: str
    change: str
    """``added`` (only in b), ``removed`` (only in a) or ``changed``."""
    fields: dict[str, tuple[Any, Any]] = field(default_factory=dict)


@dataclass
class StateDiff:
    """The differences between two states, readable by a person and as data."""

    tasks: list[TaskDiff] = field(default_factory=list)
    tables: dict[str, tuple[int, int]] = field(default_factory=dict)
    """Tables whose rows differ: name -> (rows in a, rows in b)."""
    positions: tuple[int, int] = (0, 0)

    def __bool__(self) -> bool:
        return bool(self.tasks or self.tables)

    def to_dict(self) -> dict[str, Any]:
        return {
            "positions": list(self.positions),
            "tasks": [
                {
                    "task_id": d.task_id,
                    "change": d.change,
                    "fields": {k: {"a": a, "b": b} for k, (a, b) in d.fields.items()},
                }
                for d in self.tasks
            ],
            "tables": {k: {"a": a, "b": b} for k, (a, b) in self.tables.items()},
        }

    def __str__(self) -> str:
        if not self:
            return f"no differences (a at position {self.positions[0]}, b at {self.positions[1]})"
        lines = [f"a at position {self.positions[0]}, b at {self.positions[1]}:"]
        for d in self.tasks:
            if d.change == "changed":
                lines.append(f"  ~ {printable(d.task_id)}")
                for name, (a, b) in d.fields.items():
                    lines.append(printable(f"      {name}: {a!r} -> {b!r}"))
            else:
                sign = "+" if d.change == "added" else "-"
                status = d.fields.get("status", (None, None))
                shown = status[1] if sign == "+" else status[0]
                lines.append(f"  {sign} {printable(d.task_id)} ({shown})")
        for name, (a, b) in self.tables.items():
            lines.append(printable(f"  table {name}: {a} rows -> {b} rows (rows differ)"))
        return "\n".join(lines)


def diff(a: SchedulerState, b: SchedulerState) -> StateDiff:
    """Compare two states: tasks added, removed or changed, and tables that differ."""
    out = StateDiff(positions=(a.position, b.position))
    for task_id in sorted(set(a.tasks) | set(b.tasks)):
        left, right = a.tasks.get(task_id), b.tasks.get(task_id)
        if left == right:
            continue
        if left is None:
            assert right is not None
            out.tasks.append(TaskDiff(task_id, "added", {"status": (None, right.status)}))
        elif right is None:
            out.tasks.append(TaskDiff(task_id, "removed", {"status": (left.status, None)}))
        else:
            before, after = left.to_dict(), right.to_dict()
            changed = {
                key: (before.get(key), after.get(key))
                for key in sorted(set(before) | set(after))
                if before.get(key) != after.get(key)
            }
            out.tasks.append(TaskDiff(task_id, "changed", changed))
    for name in sorted(set(a.tables) | set(b.tables)):
        rows_a, rows_b = a.tables.get(name, {}), b.tables.get(name, {})
        if rows_a != rows_b:
            out.tables[name] = (len(rows_a), len(rows_b))
    return out
