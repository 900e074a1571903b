"""Where a replay stops, or what a fork starts from: after a position, or at a clock
time. ``tasktrail.replay`` reads a log as of one (``replay(until=...)``); the
scheduler's ``fork`` reads a task's stream as of one."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from ..store.recorded import Recorded
from ..tasks.describe import format_at
from ..tasks.fields import INT_MAX


@dataclass(frozen=True)
class Until:
    """Where a replay stops: after a position, or at a clock time (ms, inclusive)."""

    position: int | None = None
    at: float | None = None

    @classmethod
    def parse(cls, value: int | float | str | datetime | Until | None) -> Until:
        """``12`` is a position; ``"2026-01-05T09:00:03Z"`` or a datetime is a clock time."""
        if value is None:
            return cls()
        if isinstance(value, Until):
            return value
        if isinstance(value, bool):
            raise ValueError(f"until must be a position or a time, not {value!r}")
        if isinstance(value, int):
            return cls(position=_position(value))
        if isinstance(value, datetime):
            if value.tzinfo is None:
                raise ValueError("a time to replay until needs a time zone")
            return cls(at=value.timestamp() * 1000.0)
        if isinstance(value, float):
            return cls(at=value)
        text = str(value).strip()
        if text.isdigit():
            return cls(position=_position(int(text)))
        try:
            moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
        except ValueError:
            raise ValueError(
                f"until {value!r} is neither a position (an integer) nor an ISO-8601 time"
            ) from None
        if moment.tzinfo is None:
            raise ValueError(f"until {value!r} needs a time zone (say Z for UTC)")
        return cls(at=moment.timestamp() * 1000.0)

    def reached(self, recorded: Recorded) -> bool:
        """Whether this event is past the stop (and so not folded); past a time stop,
        a later event may still be at or before it (a fold skips only this one)."""
        if self.position is not None and recorded.position > self.position:
            return True
        return self.at is not None and recorded.event.at > self.at

    def __str__(self) -> str:
        if self.position is not None:
            return f"position {self.position}"
        if self.at is not None:
            return format_at(self.at)
        return "the end"


def _position(value: int) -> int:
    """A position to stop after: 0 to the largest a store numbers (64 signed bits)."""
    if not 0 <= value <= INT_MAX:
        raise ValueError(f"a position is from 0 to {INT_MAX} (64 signed bits), not {value}")
    return value
