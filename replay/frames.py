"""pandas DataFrames of a log, for analysis in a notebook.

pandas comes with the optional ``notebook`` extra (``pip install
'tasktrail[notebook]'``); every function here imports it when called, and says
so when it is missing. Times are kept as ``at`` (scheduler ms since the epoch)
with a ``time`` column beside it (a UTC timestamp).

>>> from tasktrail.replay import frames                      # doctest: +SKIP
>>> frames.phase_durations("tasktrail-demo.db").groupby("kind").duration_ms.describe()
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from tasktrail.domain import Store
from tasktrail.domain.tasks.events import event_payload

from .state import SchedulerState, replay

if TYPE_CHECKING:
    import pandas

Source = str | os.PathLike[str] | Store
Log = Source | SchedulerState


def _pandas() -> Any:
    try:
        import pandas
    except ImportError:  # pragma: no cover - exercised only without the extra
        raise ImportError(
            "tasktrail.replay.frames needs pandas: pip install 'tasktrail[notebook]'"
        ) from None
    return pandas


def _state(log: Log) -> SchedulerState:
    return log if isinstance(log, SchedulerState) else replay(log)


def _frame(
    rows: list[dict[str, Any]], columns: list[str], times: tuple[str, ...] = ("at",)
) -> pandas.DataFrame:
    pd = _pandas()
    frame: pandas.DataFrame = pd.DataFrame(rows, columns=columns if not rows else None)
    for name in times:
        if name in frame.columns:
            label = "time" if name == "at" else f"{name.removesuffix('_at')}_time"
            frame[label] = pd.to_datetime(frame[name], unit="ms", utc=True)
    return frame


def events(source: Source, task: str | None = None) -> pandas.DataFrame:
    """One row per event in log order: position, stream, version, type, ``at``, rule,
    and the event's other stored fields as a dict (``payload``)."""
    from .log import read_log

    records, _, opened = read_log(source)
    rows: list[dict[str, Any]] = []
    try:
        for recorded in records:
            event = recorded.event
            if task is not None and event.task_id != task:
                continue
            payload = event_payload(event)
            for key in ("at", "rule", "task_id"):
                payload.pop(key, None)
            rows.append(
                {
                    "position": recorded.position,
                    "task_id": event.task_id,
                    "stream_id": event.stream_id(),
                    "version": recorded.originator_version,
                    "type": type(event).__name__,
                    "at": event.at,
                    "rule": event.rule,
                    "payload": payload,
                }
            )
    finally:
        if opened is not None:
            opened.close()
    columns = ["position", "task_id", "stream_id", "version", "type", "at", "rule", "payload"]
    return _frame(rows, columns)


def audit(log: Log, task: str | None = None) -> pandas.DataFrame:
    """The audit trail (one row per event: statuses before and after, the command or
    rule behind it), optionally for one task."""
    rows = [row for row in _state(log).audit if task is None or row["task_id"] == task]
    columns = ["position", "at", "task_id", "stream_id", "event_type", "status_before"]
    return _frame(rows, [*columns, "status_after", "command", "rule", "refused", "detail"])


def live(log: Log) -> pandas.DataFrame:
    """The live mirror: every task not yet terminal, as ``tasktrail project`` writes it."""
    rows = _state(log).table("live_tasks")
    columns = ["task_id", "kind", "status", "phase", "restarts", "submitted_at", "updated_at"]
    return _frame(rows, columns, times=("submitted_at", "updated_at"))


def ledger(log: Log) -> pandas.DataFrame:
    """The dispatch run ledger (empty when the log has no runs)."""
    rows = _state(log).ledger
    columns = ["run_id", "task_id", "day", "attempt", "trigger", "status", "updated_at"]
    return _frame(rows, columns, times=("fired_at", "completed_at", "updated_at"))


def tasks(log: Log) -> pandas.DataFrame:
    """Every task, terminal ones included: kind, status, outcome, restarts, times."""
    rows = []
    for task in _state(log).tasks.values():
        outcome = task.outcome
        rows.append(
            {
                "task_id": task.id,
                "kind": task.kind,
                "owner_id": task.owner_id,
                "status": task.status,
                "outcome": outcome.status if outcome is not None else None,
                "reason": outcome.reason if outcome is not None else None,
                "phase": task.checkpoint.phase if task.checkpoint is not None else None,
                "restarts": task.restarts,
                "abort_requested": task.abort_requested,
                "events": task.events,
                "submitted_at": task.submitted_at,
                "updated_at": task.updated_at,
                "elapsed_ms": task.updated_at - task.submitted_at,
            }
        )
    columns = ["task_id", "kind", "owner_id", "status", "outcome", "reason", "phase"]
    return _frame(rows, columns, times=("submitted_at", "updated_at"))


def phase_durations(source: Source, task: str | None = None) -> pandas.DataFrame:
    """One row per phase span rebuilt from the log (see ``tasktrail trace``): task,
    kind, phase, mode, outcome, resumed, start and end, ``duration_ms``, ids."""
    from tasktrail.projections.trace import phase_spans

    rows = [
        {
            "task_id": span.task_id,
            "kind": span.kind,
            "phase": span.phase,
            "mode": span.attributes.get("mode"),
            "outcome": span.outcome,
            "resumed": span.attributes.get("resumed"),
            "attempt": span.attributes.get("attempt"),
            "error": span.error,
            "start_at": span.start_at,
            "end_at": span.end_at,
            "duration_ms": span.duration_ms,
            "trace_id": f"{span.trace_id:032x}",
            "span_id": f"{span.span_id:016x}",
        }
        for span in phase_spans(source, task)
    ]
    columns = ["task_id", "kind", "phase", "mode", "outcome", "start_at", "end_at", "duration_ms"]
    return _frame(rows, columns, times=("start_at", "end_at"))
