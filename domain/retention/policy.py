"""The policies workers keep (the Retention issue): a retention policy and a seal cadence,
each recorded whole on its own stream (``settings:retention``, ``settings:seals``) so
every worker of a fleet, and every replay, reads the same one.

``configure_retention(keep_days=, per_kind=, archive_to=)``: trees ended more than
``keep_days`` ago (a kind's own in ``per_kind``) leave the store, to segments in
``archive_to`` or, with none, pruned (``HistoryPruned``, proofs kept). Rule 38 refuses
a policy that keeps less than a minute or names no number. ``configure_seals(every_s=,
every_events=, to=)``: a worker appends a seal line to the file ``to`` at that cadence
(a host's callable is this process's, not recorded: :mod:`.keeper`). Rule 39 refuses a
cadence of neither, or of less than a second or one event.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, ClassVar

from ..errors import RuleViolation
from ..frozen import FrozenDict
from ..tasks.context import Context
from ..tasks.events import TaskEvent, register_event
from ..tasks.evolve import evolves_stream
from ..tasks.guards import not_closing
from ..tasks.validation import act_fields
from ..world import Draft, World, stream_in_view

RETENTION_STREAM = "settings:retention"
SEALS_STREAM = "settings:seals"
RETENTION_RULE = 38
SEALS_RULE = 39
DAY_MS = 86_400_000
MIN_KEEP_DAYS = 1 / 1440  # a minute


@dataclass(frozen=True, kw_only=True, slots=True)
class RetentionConfigured(TaskEvent):
    """The retention policy from now on, whole; ``keep_days`` ``None``: none (history
    is kept whole). ``task_id`` empty (scheduler-wide)."""

    task_stream: ClassVar[bool] = False
    command: ClassVar[str] = "configure_retention"

    keep_days: float | None
    per_kind: dict[str, str] | None = None
    """Each kind's own days, as text (a number): ``dict[str, str]`` is a stored type."""
    archive_to: str | None = None
    actor: str | None = None
    why: str | None = None

    def stream_id(self) -> str:
        """The policy's one stream."""
        return RETENTION_STREAM


@dataclass(frozen=True, kw_only=True, slots=True)
class SealsConfigured(TaskEvent):
    """The seal cadence from now on, whole: every ``every_s`` seconds and/or every
    ``every_events`` events, appended to the file ``to`` (``None``: to the host's
    callable of each worker)."""

    task_stream: ClassVar[bool] = False
    command: ClassVar[str] = "configure_seals"

    every_s: float | None
    every_events: int | None = None
    to: str | None = None
    actor: str | None = None
    why: str | None = None

    def stream_id(self) -> str:
        """The cadence's one stream."""
        return SEALS_STREAM


for _cls in (RetentionConfigured, SealsConfigured):
    register_event(_cls)


@evolves_stream(RetentionConfigured, SealsConfigured)
def _settings(state: Any, event: TaskEvent) -> FrozenDict[str, Any]:
    fields = {k: v for k, v in _fields(event).items() if k not in ("task_id", "at", "rule")}
    return FrozenDict({k: FrozenDict(v) if isinstance(v, dict) else v for k, v in fields.items()})


def _fields(event: TaskEvent) -> dict[str, Any]:
    from ..tasks.events import event_payload

    return event_payload(event)


def retention_of(source: World | Draft) -> FrozenDict[str, Any] | None:
    """The retention policy in force (``None``: none recorded)."""
    state = stream_in_view(source, RETENTION_STREAM)
    return state if isinstance(state, FrozenDict) and state.get("keep_days") else None


def seals_of(source: World | Draft) -> FrozenDict[str, Any] | None:
    """The seal cadence in force (``None``: none recorded)."""
    state = stream_in_view(source, SEALS_STREAM)
    has = isinstance(state, FrozenDict) and (state.get("every_s") or state.get("every_events"))
    return state if has else None


def _days(value: Any, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise RuleViolation(RETENTION_RULE, f"{what} must be a number of days, not {value!r}")
    try:
        days = float(value)
    except ValueError:
        raise RuleViolation(
            RETENTION_RULE, f"{what} must be a number of days, not {value!r}"
        ) from None
    if not math.isfinite(days) or days < MIN_KEEP_DAYS:
        raise RuleViolation(
            RETENTION_RULE, f"{what} keeps {value!r} days: at least a minute ({MIN_KEEP_DAYS})"
        )
    return days


def configure_retention(
    draft: Draft,
    ctx: Context,
    keep_days: float | None,
    per_kind: dict[str, float] | None = None,
    archive_to: str | None = None,
    *,
    actor: str | None = None,
    why: str | None = None,
) -> None:
    """Rule 38: record a retention policy that keeps at least a minute of history."""
    not_closing(ctx, None)
    act = act_fields(actor, why, None)
    kinds = None
    if keep_days is not None:
        _days(keep_days, "keep_days")
        kinds = {str(k): str(_days(v, f"per_kind[{k!r}]")) for k, v in (per_kind or {}).items()}
    if archive_to is not None and (not isinstance(archive_to, str) or not archive_to):
        raise RuleViolation(
            RETENTION_RULE, f"archive_to must be a folder's path, not {archive_to!r}"
        )
    draft.emit_stream(
        RetentionConfigured(
            task_id="",
            at=ctx.now,
            keep_days=None if keep_days is None else float(keep_days),
            per_kind=kinds,
            archive_to=archive_to,
            **act,
        )
    )


def configure_seals(
    draft: Draft,
    ctx: Context,
    every_s: float | None,
    every_events: int | None = None,
    to: str | None = None,
    *,
    actor: str | None = None,
    why: str | None = None,
) -> None:
    """Rule 39: record a seal cadence of at least a second or one event (or none)."""
    not_closing(ctx, None)
    act = act_fields(actor, why, None)
    if every_s is not None and (
        isinstance(every_s, bool)
        or not isinstance(every_s, int | float)
        or not math.isfinite(every_s)
        or every_s < 1
    ):
        raise RuleViolation(SEALS_RULE, f"every_s must be at least 1 second, not {every_s!r}")
    if every_events is not None and (
        isinstance(every_events, bool) or not isinstance(every_events, int) or every_events < 1
    ):
        raise RuleViolation(SEALS_RULE, f"every_events must be at least 1, not {every_events!r}")
    if to is not None and (not isinstance(to, str) or not to):
        raise RuleViolation(SEALS_RULE, f"to must be a file's path, not {to!r}")
    draft.emit_stream(
        SealsConfigured(
            task_id="",
            at=ctx.now,
            every_s=None if every_s is None else float(every_s),
            every_events=every_events,
            to=to,
            **act,
        )
    )


def keep_ms(policy: FrozenDict[str, Any], kinds: set[str]) -> float:
    """How long (ms) a unit whose roots are of ``kinds`` is kept: the longest of theirs."""
    per_kind = policy.get("per_kind") or {}
    days = [float(per_kind.get(kind, policy["keep_days"])) for kind in kinds or {""}]
    return max(days) * DAY_MS


__all__ = [
    "RETENTION_RULE",
    "SEALS_RULE",
    "RetentionConfigured",
    "SealsConfigured",
    "configure_retention",
    "configure_seals",
    "keep_ms",
    "retention_of",
    "seals_of",
]
