"""The run ledger's settings: how it admits, submits and reconciles runs.

:class:`RunSettings` holds the zone a run's day is read in, the daily limits
and cap, the spacings and the time windows of SPEC.md section 3, each checked
when the settings are made (an :class:`~..errors.InvalidArgument` otherwise).
They decide, so they are recorded (:func:`change_run_settings`), and
:func:`run_settings_of` reads the ones in force from the log's fold.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from ..errors import InvalidArgument
from ..tasks.context import Context
from ..tasks.fields import finite_number
from ..tasks.guards import not_closing
from ..tasks.validation import act_fields
from ..world import Draft, World, stream_in_view
from .events import RUN_SETTINGS_STREAM, RunSettingsChanged


@dataclass(frozen=True, slots=True)
class RunSettings:
    """How the run ledger admits, submits and reconciles. Times are ms of the scheduler clock.

    Defaults are the upstream dispatcher's; ``catch_up_ms`` (how late a
    scheduled task may still fire) is the value of its own test config, 3 h.
    """

    tz: str = "UTC"
    """IANA zone whose calendar date is a run's ``day``; part of the client job id."""
    runs_per_day: int = 3
    submit_attempts: int = 3
    """Submits a run may use up before reconcile fails it ``submit_exhausted``."""
    submit_spacing_ms: float = 120_000
    """Wait after a ``transient`` (or ``drain``) submit failure."""
    run_spacing_ms: float = 600_000
    """Scheduled runs of one task fire at least this far apart (manual runs ignore it)."""
    per_tick: int = 2
    """Background slots, and scheduled runs fired per :meth:`dispatch_due`."""
    reconcile_per_tick: int = 2
    cap_per_day: int = 20
    """Scheduled runs a day, every task; 0 turns scheduled dispatch off (``cap_off``)."""
    dispatch_wall_ms: float = 25_000
    """A fresh run is first redriven this long after it was minted."""
    job_lost_ms: float = 21_600_000
    """A running run with no job this long after it fired is ``failed job_lost``."""
    catch_up_ms: float = 10_800_000
    reconcile_wall_s: float | None = 40.0
    """Wall-time budget of one :meth:`reconcile` (application layer only); ``None``: none."""
    dispatch_wall_s: float | None = 25.0
    """Wall-time budget of one :meth:`dispatch_due` (application layer only): no run is
    minted once it is spent (the dispatcher's dispatch wall); ``None``: none."""

    def __post_init__(self) -> None:
        try:
            ZoneInfo(self.tz)
        except (ZoneInfoNotFoundError, ValueError, TypeError):
            raise InvalidArgument(f"tz must be an IANA time zone name, not {self.tz!r}") from None
        for name in ("runs_per_day", "submit_attempts", "per_tick", "reconcile_per_tick"):
            _check_int(name, getattr(self, name), minimum=1)
        _check_int("cap_per_day", self.cap_per_day, minimum=0)
        for name in (
            "submit_spacing_ms",
            "run_spacing_ms",
            "dispatch_wall_ms",
            "job_lost_ms",
            "catch_up_ms",
        ):
            _check_ms(name, getattr(self, name))
        for name in ("reconcile_wall_s", "dispatch_wall_s"):
            if getattr(self, name) is not None:
                _check_ms(name, getattr(self, name))


def _check_int(name: str, value: object, *, minimum: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise InvalidArgument(f"{name} must be an int >= {minimum}, not {value!r}")


def _check_ms(name: str, value: object) -> None:
    if (usable := finite_number(value)) is None or usable < 0:
        raise InvalidArgument(f"{name} must be a finite number >= 0, not {value!r}")


DEFAULT_RUN_SETTINGS = RunSettings()


def run_settings_of(source: World | Draft) -> RunSettings:
    """The run settings in force in a world (or a decision's view of one): the last
    recorded ones, else :data:`DEFAULT_RUN_SETTINGS`."""
    state = stream_in_view(source, RUN_SETTINGS_STREAM)
    return state if isinstance(state, RunSettings) else DEFAULT_RUN_SETTINGS


def change_run_settings(
    draft: Draft,
    ctx: Context,
    settings: RunSettings,
    *,
    actor: str | None = None,
    why: str | None = None,
) -> bool:
    """Record ``settings`` as the run settings in force (by ``actor``, because ``why``);
    nothing when they are the ones in force already. Returns whether it recorded them."""
    not_closing(ctx, None)
    if not isinstance(settings, RunSettings):
        raise InvalidArgument(f"run settings must be a RunSettings, not {settings!r}")
    act = act_fields(actor, why, None)
    # runs.settings_recorded: a setting that decides is an event, so replay equals live.
    if run_settings_of(draft) == settings:
        return False
    draft.emit_stream(RunSettingsChanged(task_id="", at=ctx.now, **asdict(settings), **act))
    return True
