"""Cron expressions read by cronsim, in a time zone of the stdlib's ``zoneinfo``.

cronsim (the parser Healthchecks.io runs) is typed, has no dependency, works with
``zoneinfo`` and matches Debian's cron, its DST handling included: a daily ``0 9 * * *``
in ``Europe/Paris`` ticks at 09:00 local on each side of a clock change. It is imported
on the first use, so what never reads a cron expression (replay, the read commands)
does not load it. Times are the scheduler clock's milliseconds; a tick is a whole
second (cron's own resolution is a minute; cronsim's optional seconds field, a second).
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from typing import TYPE_CHECKING
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from ..errors import RuleViolation

if TYPE_CHECKING:
    from cronsim import CronSim

CATCH_UP_LIMIT = 100
"""The most missed ticks ``catch_up=True`` submits after downtime: the latest this many
(the earlier ones are skipped, and the tick's event says from when: ``due_at``)."""


def zone(tz: object) -> ZoneInfo:
    """The time zone named ``tz``; rule 26 refuses a name ``zoneinfo`` does not know."""
    if not isinstance(tz, str) or not tz.strip():
        raise RuleViolation(26, f"tz must be an IANA time zone name, not {tz!r}")
    try:
        return ZoneInfo(tz)
    except (ZoneInfoNotFoundError, ValueError, OSError):
        raise RuleViolation(
            26, f"unknown time zone {tz!r}: give an IANA name such as 'UTC' or 'Europe/Paris'"
        ) from None


def _ticks(cron: str, tz: ZoneInfo, start_ms: float, *, reverse: bool) -> Iterator[float]:
    from cronsim import CronSim

    start = datetime.fromtimestamp(start_ms / 1000, UTC).astimezone(tz)
    sim: CronSim = CronSim(cron, start, reverse=reverse)
    for tick in sim:
        yield tick.timestamp() * 1000


def check_cron(cron: object, tz: object) -> str:
    """``cron`` if cronsim reads it and it ever ticks; else rule 26 refuses it."""
    from cronsim import CronSimError

    where = zone(tz)
    if not isinstance(cron, str) or not cron.strip():
        raise RuleViolation(
            26, f"cron must be a cron expression such as '*/5 * * * *', not {cron!r}"
        )
    try:
        next(_ticks(cron, where, 0, reverse=False))
    except CronSimError as error:
        raise RuleViolation(26, f"cron {cron!r} does not parse: {error}") from None
    except StopIteration:
        raise RuleViolation(26, f"cron {cron!r} never ticks") from None
    return cron


def next_tick(cron: str, tz: str, after_ms: float) -> float:
    """The first tick strictly after ``after_ms`` (ms)."""
    for tick in _ticks(cron, zone(tz), after_ms, reverse=False):
        if tick > after_ms:
            return tick
    raise RuleViolation(26, f"cron {cron!r} never ticks again")  # cronsim: none in 50 years


def due_ticks(cron: str, tz: str, due_at: float, now: float, *, catch_up: bool) -> list[float]:
    """The ticks from ``due_at`` up to ``now`` (both included) a task is submitted for,
    oldest first: the latest only, or with ``catch_up`` the latest
    :data:`CATCH_UP_LIMIT` of them."""
    if due_at > now:
        return []
    wanted = CATCH_UP_LIMIT if catch_up else 1
    found: list[float] = []
    # Backwards from just after now: cronsim starts strictly before its start.
    for tick in _ticks(cron, zone(tz), now + 1, reverse=True):
        if tick < due_at or len(found) == wanted:
            break
        if tick <= now:
            found.append(tick)
    if not found:
        found.append(due_at)  # the recorded tick itself (a zone's rules changed since)
    return found[::-1]
