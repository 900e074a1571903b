"""The windows and limits of Turns, wakeups and controller passes
(:class:`TurnSettings`, defaults in :data:`DEFAULT_TURN_SETTINGS`), the bound on the
per-task passes a controller pass runs at once, and the capped exponential backoff
(:func:`retry_delay_ms`) that delivery retries and task-pass retries share. Settings
that decide are recorded (:func:`change_turn_settings`, a :class:`~.events.
TurnSettingsChanged`), and :func:`turn_settings_of` reads the ones in force from the
log's fold, so replay and the read models decide as live did.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, replace
from typing import Any

from ..errors import InvalidArgument
from ..tasks.context import Context
from ..tasks.guards import not_closing
from ..tasks.validation import act_fields
from ..world import Draft, World, stream_in_view
from .events import TURN_SETTINGS_STREAM, TurnSettingsChanged

MAX_TASK_CONCURRENCY = 32
"""The most per-task passes a controller pass runs at once."""


def retry_delay_ms(base_ms: float, attempt: int) -> float:
    """The capped exponential backoff of yui: ``min(2000, base * 2**min(attempt, 3))``.

    ``attempt`` counts the earlier attempts (0, 1, 2, ...): at base 250 that is
    250, 500, 1000, 2000, 2000, ... ms.
    """
    return float(min(2000.0, base_ms * 2 ** min(attempt, 3)))


@dataclass(frozen=True, slots=True)
class TurnSettings:
    """The windows and limits of Turns, wakeups and controller passes (all in ms).

    Defaults are yui's: the aggregation window (60 s) gathers a burst of
    wakeup requests into one Leader Turn; the force window (10 min) bounds how
    long a busy Leader can hold a wakeup back; a Turn with no progress for the
    stall window (30 min) is ``stalled``. Delivery retries back off from 250 ms
    and give up after 60 retries (about two minutes of trying); a failed
    per-task pass is retried twice, backing off from the delivery retry base
    (after 250 and 500 ms) unless ``task_pass_retry_base_ms`` sets its own
    (``None``, the default: follow the delivery base). A controller pass
    runs up to 4 per-task passes at once (at most 32). A Turn with no progress
    for ``stall_diagnostic_ms`` (``None``: half the stall window; the seed's own
    constant is not in its diff) gets a stall diagnostic, which comes before it is
    declared stalled.
    """

    aggregation_window_ms: float = 60_000
    force_window_ms: float = 10 * 60_000
    stall_window_ms: float = 30 * 60_000
    delivery_retry_base_ms: float = 250
    delivery_retry_limit: int = 60
    task_pass_retry_base_ms: float | None = None
    task_pass_retry_limit: int = 2
    task_concurrency: int = 4
    stall_diagnostic_ms: float | None = None

    @property
    def pass_retry_base_ms(self) -> float:
        """The base a failed per-task pass's retry backs off from: its own when set,
        else the delivery retry base."""
        # passes.retry_base (yui 0.6.x: #scheduleTaskPassRetry backs off from
        # #deliveryRetryMs): the pass retry follows the delivery settings by default.
        if self.task_pass_retry_base_ms is None:
            return self.delivery_retry_base_ms
        return self.task_pass_retry_base_ms

    @property
    def diagnostic_after_ms(self) -> float:
        """How long a Turn shows no progress before its stall diagnostic."""
        if self.stall_diagnostic_ms is None:
            return self.stall_window_ms / 2
        return self.stall_diagnostic_ms

    def __post_init__(self) -> None:
        for name in (
            "aggregation_window_ms",
            "force_window_ms",
            "stall_window_ms",
            "delivery_retry_base_ms",
            "task_pass_retry_base_ms",
        ):
            value = getattr(self, name)
            if value is None and name == "task_pass_retry_base_ms":
                continue  # follows the delivery retry base
            if (
                isinstance(value, bool)
                or not isinstance(value, int | float)
                or not math.isfinite(value)
                or value <= 0
            ):
                unset = ", or None" if name == "task_pass_retry_base_ms" else ""
                raise InvalidArgument(
                    f"{name} must be a positive number of ms{unset}, not {value!r}"
                )
        for name in ("delivery_retry_limit", "task_pass_retry_limit"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise InvalidArgument(f"{name} must be a positive int, not {value!r}")
        diagnostic = self.stall_diagnostic_ms
        if diagnostic is not None and (
            isinstance(diagnostic, bool)
            or not isinstance(diagnostic, int | float)
            or not 0 < diagnostic <= self.stall_window_ms
        ):
            raise InvalidArgument(
                f"stall_diagnostic_ms must be a number of ms above 0 and at most "
                f"stall_window_ms ({self.stall_window_ms}), or None, not {diagnostic!r}"
            )
        if self.force_window_ms < self.aggregation_window_ms:
            raise InvalidArgument(
                f"force_window_ms ({self.force_window_ms}) must be at least "
                f"aggregation_window_ms ({self.aggregation_window_ms})"
            )
        check_concurrency(self.task_concurrency, "task_concurrency")


def check_concurrency(value: object, name: str = "concurrency") -> int:
    """A per-task pass bound: a positive int of at most :data:`MAX_TASK_CONCURRENCY`."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise InvalidArgument(f"{name} must be a positive int, not {value!r}")
    if value > MAX_TASK_CONCURRENCY:
        raise InvalidArgument(
            f"{name} must be at most {MAX_TASK_CONCURRENCY}, not {value}: "
            "more per-task passes at once would only queue on the store"
        )
    return value


DEFAULT_TURN_SETTINGS = TurnSettings()


def turn_settings_of(source: World | Draft) -> TurnSettings:
    """The Turn settings in force in a world (or a decision's view of one): the last
    recorded ones, else :data:`DEFAULT_TURN_SETTINGS`."""
    state = stream_in_view(source, TURN_SETTINGS_STREAM)
    return state if isinstance(state, TurnSettings) else DEFAULT_TURN_SETTINGS


def change_turn_settings(
    draft: Draft,
    ctx: Context,
    settings: TurnSettings | None,
    changes: dict[str, Any],
    *,
    actor: str | None = None,
    why: str | None = None,
) -> TurnSettings:
    """Record the Turn settings in force from now on: ``settings`` (``None``: those in
    force) with ``changes`` (by ``actor``, because ``why``); nothing when they are the
    ones in force already. Returns the settings in force after."""
    not_closing(ctx, None)
    act = act_fields(actor, why, None)
    if settings is not None and not isinstance(settings, TurnSettings):
        raise InvalidArgument(f"Turn settings must be a TurnSettings, not {settings!r}")
    current = turn_settings_of(draft)
    try:
        updated = replace(settings or current, **changes)
    except TypeError as error:
        raise InvalidArgument(f"unknown Turn setting: {error}") from None
    # turns.settings_recorded: a setting that decides is an event, so replay equals live.
    if updated != current:
        draft.emit_stream(TurnSettingsChanged(task_id="", at=ctx.now, **asdict(updated), **act))
    return updated
