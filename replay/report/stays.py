"""The pieces a timeline row is drawn from: bars (stretches of time), marks (moments),
and how a task's stay (its status, at its phase) becomes a bar. See :mod:`.timeline`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tasktrail.domain import TaskState
from tasktrail.domain.tasks.describe import describe, format_at

TASK_LANE, RUNS_LANE = "task", "runs"
Details = list[tuple[str, str]]


def role_lane(role: str) -> str:
    """The lane of one role's Turns."""
    return f"role:{role}"


@dataclass
class Bar:
    """A stretch of time in one lane: ``css`` says what (a stay's status, ``turn``,
    ``run``), ``state`` how it went; ``end`` is ``None`` while still open."""

    lane: str
    start: float
    css: str
    label: str
    position: int
    details: Details = field(default_factory=list)
    state: str = ""
    end: float | None = None
    planned_end: float | None = None
    """Where a sleep was due to end, if past the bar's end."""
    note: str = ""
    """Words written beside the bar's end: how a run or Turn that went wrong ended."""


@dataclass
class Mark:
    """A moment in one lane: ``css`` says what kind (abort, crash, refusal, end, ...)."""

    lane: str
    at: float
    css: str
    label: str
    position: int
    details: Details = field(default_factory=list)
    state: str = ""
    note: str = ""
    """Words written beside the mark, not only in its tooltip: an outcome and its
    error or reason, a crash, a refusal."""


def stay_key(task: TaskState) -> tuple[Any, ...]:
    phase = task.checkpoint.phase if task.checkpoint is not None else ""
    if task.status == "running":
        return ("running", phase, task.mode, task.worker)
    if task.status == "waiting":
        return ("waiting", task.on, task.policy, task.message_topic, task.until)
    if task.status == "sleeping":
        return ("sleeping", task.until)
    if task.status == "completing":
        outcome = task.outcome
        return ("completing", outcome.status if outcome is not None else "")
    return (task.status, phase, task.restarts)


def stay_bar(task: TaskState, event: Any, position: int, is_parked: bool) -> Bar:
    phase = task.checkpoint.phase if task.checkpoint is not None else ""
    status = task.status
    bar = Bar(TASK_LANE, event.at, status, phase, position)
    bar.details += [("status", status), ("phase", phase), ("event", brief(event))]
    if status == "running":
        bar.label = f"{phase}" + (" (abort handler)" if task.mode == "abort" else "")
        bar.state = task.mode or ""
        if task.worker:
            bar.details.append(("worker", task.worker))
    elif status == "waiting" and task.message_topic is not None:  # rule 21 (30-32: an ask)
        asked = any(a.waiting and a.topic == task.message_topic for a in task.asks)
        bar.label = f"waits for {'an answer' if asked else 'a message'} on {task.message_topic}"
        bar.planned_end = task.until
        bar.details.append(("topic", task.message_topic))
    elif status == "waiting":
        bar.label = f"waits {task.policy} on {len(task.on)}"
        bar.details.append(("awaits", ", ".join(task.on)))
    elif status == "sleeping":
        bar.label = f"sleeps (then {phase})"
        bar.planned_end = task.until
        if task.until is not None:
            bar.details.append(("until", format_at(task.until)))
    elif status == "completing":
        outcome = task.outcome
        held = outcome.status if outcome is not None else ""
        bar.label, bar.state = f"holds {held} (rule 5)", held
        if outcome is not None and (outcome.reason or outcome.message):
            bar.details.append(("why", str(outcome.reason or outcome.message)))
    elif is_parked:
        bar.label, bar.state = "parked (restart_limit)", "parked"
    else:
        bar.label = f"pending at {phase}" if phase else "pending"
    if task.restarts:
        bar.details.append(("restarts", str(task.restarts)))
    return bar


def brief(event: Any) -> str:
    return f"{format_at(event.at)}  {describe(event)}"


def words(name: str) -> str:
    """``TurnCompletionRefused`` -> ``turn completion refused``."""
    out = "".join(f" {c.lower()}" if c.isupper() else c for c in name).strip()
    return out


__all__ = [
    "RUNS_LANE",
    "TASK_LANE",
    "Bar",
    "Details",
    "Mark",
    "brief",
    "role_lane",
    "stay_bar",
    "stay_key",
    "words",
]
