"""pandas DataFrames of a log, for analysis in a notebook.

pandas comes with the optional ``notebook`` extra (``pip install
'tasktrail[notebook]'``); every function here imports it when called, and says
so when it is missing. Times are kept as the log has them (``at``, ``submitted_at``,
``until``: scheduler ms since the epoch) with a timezone-aware UTC datetime beside
each (``at_time``, ``submitted_time``, ``until_time``).

Each frame has the same columns, with the same dtypes, whatever the log holds, an
empty one included: a count that can be missing is a nullable ``Int64``; a flag is a
``bool`` (a nullable ``boolean`` where it can be missing); a task id is a ``string``
whose missing value is ``<NA>`` (a settings stream's events have none); statuses,
outcomes, event types, modes and triggers are categoricals over every value
tasktrail knows (a value it does not know, from a newer release, is added to the
categories, never dropped), and kinds and phases categoricals over the values the
log holds.

Every frame takes ``archive=DIR``, a store's archive folder (``tasktrail archive
--to DIR``): the events its acts moved there are read in place, as if never moved
(:mod:`.across_archive`; a segment that fails its check warns and is left out).
Without it, a frame of an archived store holds only what is still in the store.

>>> from tasktrail.replay import frames                      # doctest: +SKIP
>>> frames.phase_durations("tasktrail-demo.db").groupby("kind").duration_ms.describe()
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, get_args

from tasktrail.domain import Store
from tasktrail.domain.runs.state import RunStatus
from tasktrail.domain.tasks.events import EVENT_TYPES, OutcomeStatus, event_payload
from tasktrail.domain.tasks.state import Status
from tasktrail.projections import AuditTrail, Ledgers, LiveMirror

from .across_archive import ArchiveArg, across_archive, refuse_without_store
from .state import SchedulerState, replay

if TYPE_CHECKING:
    import pandas

Source = str | os.PathLike[str] | Store
Log = Source | SchedulerState

TASK_STATUSES: tuple[str, ...] = get_args(Status)
OUTCOMES: tuple[str, ...] = get_args(OutcomeStatus)
RUN_STATUSES: tuple[str, ...] = get_args(RunStatus)


def _event_types() -> tuple[str, ...]:
    return tuple(sorted({cls.__name__ for cls in EVENT_TYPES.values()}))


def _statuses() -> tuple[str, ...]:
    """What the audit's status columns hold: a task's status, or a run's for its events."""
    return TASK_STATUSES + tuple(s for s in RUN_STATUSES if s not in TASK_STATUSES)


Kind = str | tuple[str, ...]
"""A column's dtype: a pandas dtype name, or the known categories of a categorical
(``OPEN``: none known, the log's own values)."""

OPEN: tuple[str, ...] = ()
"""A categorical whose categories are the values the log holds (kinds, phases)."""

ID = "string"
"""A task id: pandas' string dtype, ``<NA>`` where the log holds none (``''``)."""

MODES: tuple[str, ...] = ("run", "abort")
TRIGGERS: tuple[str, ...] = ("manual", "scheduled")


def _pandas() -> Any:
    try:
        import pandas
    except ImportError:  # pragma: no cover - exercised only without the extra
        raise ImportError(
            "tasktrail.replay.frames needs pandas: pip install 'tasktrail[notebook]'"
        ) from None
    return pandas


def _state(log: Log, archive: ArchiveArg) -> SchedulerState:
    if isinstance(log, SchedulerState):
        if archive is not None:  # folded already: its archive cannot be read now
            refuse_without_store(log)
        return log
    return replay(log, archive=archive)


def _columns(table: str, spec_owner: Any, kinds: dict[str, Kind]) -> dict[str, Kind]:
    """Every column of a read-model table, in its order, with a dtype for each: the
    ``kinds`` given, else the plain one of the column's Python type."""
    for spec in spec_owner.tables:
        if spec.name == table:
            plain = {int: "int64", float: "float64", str: "object"}
            return {c: kinds.get(c, plain.get(t, "object")) for c, t in spec.columns.items()}
    raise KeyError(table)


def _frame(
    rows: list[dict[str, Any]], schema: dict[str, Kind], times: tuple[str, ...] = ("at",)
) -> pandas.DataFrame:
    """``rows`` as a frame with exactly ``schema``'s columns and dtypes, and a UTC
    datetime beside each of ``times`` (:func:`time_column` names it)."""
    pd = _pandas()
    frame: pandas.DataFrame = pd.DataFrame(rows, columns=list(schema))
    dtypes: dict[str, Any] = {}
    for name, kind in schema.items():
        if kind == ID:
            frame[name] = frame[name].where(frame[name] != "", None)
        if isinstance(kind, tuple):
            present = frame[name].dropna().unique()
            extra = sorted(str(value) for value in present if value not in kind)
            dtypes[name] = pd.CategoricalDtype([*kind, *extra])
        else:
            dtypes[name] = kind
    frame = frame.astype(dtypes)
    for name in times:
        ms = frame[name].astype("float64")
        frame[time_column(name)] = pd.to_datetime(ms, unit="ms", utc=True)
    return frame


def time_column(name: str) -> str:
    """The datetime column beside the ms column ``name``: ``at`` -> ``at_time``,
    ``start_at`` -> ``start_time``, ``until`` -> ``until_time``."""
    if name != "at" and name.endswith("_at"):
        return f"{name.removesuffix('_at')}_time"
    return f"{name}_time"


def events(
    source: Source, task: str | None = None, *, archive: ArchiveArg = None
) -> pandas.DataFrame:
    """One row per event in log order: position, stream, version, type, ``at``, rule,
    and the event's other stored fields as a dict (``payload``); ``archive``: the
    store's archive folder, its events in place."""
    with across_archive(archive, source):
        return _events(source, task)


def _events(source: Source, task: str | None) -> pandas.DataFrame:
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
    schema: dict[str, Kind] = {
        "position": "int64",
        "task_id": ID,
        "stream_id": "object",
        "version": "int64",
        "type": _event_types(),
        "at": "float64",
        "rule": "Int64",
        "payload": "object",
    }
    return _frame(rows, schema)


def audit(log: Log, task: str | None = None, *, archive: ArchiveArg = None) -> pandas.DataFrame:
    """The audit trail (one row per event: statuses before and after, the command or
    rule behind it), optionally for one task. ``archive``: the store's archive folder,
    its events in place (a :class:`SchedulerState` is refused with it: folded already)."""
    state = _state(log, archive)
    rows = [row for row in state.audit if task is None or row["task_id"] == task]
    statuses = _statuses()
    kinds: dict[str, Kind] = {
        "event_type": _event_types(),
        "status_before": statuses,
        "status_after": statuses,
        "rule": "Int64",
        "task_id": ID,
        "refused": "bool",
    }
    return _frame(rows, _columns("audit", AuditTrail, kinds))


def live(log: Log, *, archive: ArchiveArg = None) -> pandas.DataFrame:
    """The live mirror: every task not yet terminal, as ``tasktrail project`` writes it
    (an archive holds none: ``archive`` is taken as :func:`audit` takes it)."""
    rows = _state(log, archive).table("live_tasks")
    kinds: dict[str, Kind] = {
        "task_id": ID,
        "owner_id": ID,
        "kind": OPEN,
        "phase": OPEN,
        "mode": MODES,
        "status": TASK_STATUSES,
        "outcome": OUTCOMES,
        "attempt": "Int64",
        "abort_requested": "bool",
    }
    times = ("submitted_at", "updated_at", "until")
    return _frame(rows, _columns("live_tasks", LiveMirror, kinds), times)


def ledger(log: Log, *, archive: ArchiveArg = None) -> pandas.DataFrame:
    """The dispatch run ledger (empty when the log has no runs); ``archive`` as
    :func:`audit` takes it."""
    rows = _state(log, archive).ledger
    kinds: dict[str, Kind] = {
        "task_id": ID,
        "status": RUN_STATUSES,
        "trigger": TRIGGERS,
        "catch_up": "bool",
    }
    schema = _columns("runs", Ledgers, kinds)
    times = ("fired_at", "scheduled_for", "completed_at", "updated_at")
    return _frame(rows, schema, times)


def tasks(log: Log, *, archive: ArchiveArg = None) -> pandas.DataFrame:
    """Every task, terminal ones included: kind, status, outcome (and its result),
    restarts, times; ``archive`` as :func:`audit` takes it."""
    rows = []
    for task in _state(log, archive).tasks.values():
        outcome = task.outcome
        rows.append(
            {
                "task_id": task.id,
                "kind": task.kind,
                "owner_id": task.owner_id,
                "status": task.status,
                "outcome": outcome.status if outcome is not None else None,
                "reason": outcome.reason if outcome is not None else None,
                "result": outcome.to_dict().get("result") if outcome is not None else None,
                "phase": task.checkpoint.phase if task.checkpoint is not None else None,
                "restarts": task.restarts,
                "abort_requested": task.abort_requested,
                "events": task.events,
                "submitted_at": task.submitted_at,
                "updated_at": task.updated_at,
                "elapsed_ms": task.updated_at - task.submitted_at,
            }
        )
    schema: dict[str, Kind] = {
        "task_id": ID,
        "kind": OPEN,
        "owner_id": ID,
        "status": TASK_STATUSES,
        "outcome": OUTCOMES,
        "reason": "object",
        "result": "object",
        "phase": OPEN,
        "restarts": "int64",
        "abort_requested": "bool",
        "events": "int64",
        "submitted_at": "float64",
        "updated_at": "float64",
        "elapsed_ms": "float64",
    }
    return _frame(rows, schema, times=("submitted_at", "updated_at"))


def phase_durations(
    source: Source, task: str | None = None, *, archive: ArchiveArg = None
) -> pandas.DataFrame:
    """One row per phase span rebuilt from the log (see ``tasktrail trace``): task,
    kind, phase, mode, outcome, resumed, start and end, ``duration_ms``, ids;
    ``archive``: the store's archive folder, its events in place."""
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
        for span in phase_spans(source, task, archive=archive)
    ]
    schema: dict[str, Kind] = {
        "task_id": ID,
        "kind": OPEN,
        "phase": OPEN,
        "mode": MODES,
        "outcome": "object",
        "resumed": "boolean",
        "attempt": "Int64",
        "error": "object",
        "start_at": "float64",
        "end_at": "float64",
        "duration_ms": "float64",
        "trace_id": "object",
        "span_id": "object",
    }
    return _frame(rows, schema, times=("start_at", "end_at"))
