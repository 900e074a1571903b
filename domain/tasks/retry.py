"""A phase's failure policy: how often it is tried and how long it may run (rules 23-25).

:class:`Retry` says how often a phase that raised or ran past its timeout is tried, and
how long its task sleeps before each try again: ``base_s * factor**n`` seconds before
retry ``n`` (0 first), at most ``max_s``, spread by ``jitter`` (a fraction of it, either
way). The spread is drawn by the application (a ``random.Random`` the scheduler owns)
and handed in as ``draw``; the delay this module computes from it is recorded on the
retry's event, so the fold never draws anything (replay == live).

Durations here are seconds, as Python's own timeouts are; times on the scheduler clock
stay milliseconds.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from ..errors import InvalidPolicy


def _number(value: object, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise InvalidPolicy(f"{name} must be a finite number of seconds, not {value!r}")
    return float(value)


@dataclass(frozen=True, slots=True)
class Retry:
    """Try a failing phase up to ``max_attempts`` times in all (the first try
    included), sleeping ``min(max_s, base_s * factor**n)`` seconds, spread by
    ``jitter`` either way, before retry ``n`` (0 first). Refused at once, naming
    rule 25, when an argument cannot be kept."""

    max_attempts: int = 3
    base_s: float = 1.0
    factor: float = 2.0
    max_s: float = 300.0
    jitter: float = 0.0

    def __post_init__(self) -> None:
        attempts = self.max_attempts
        if isinstance(attempts, bool) or not isinstance(attempts, int) or attempts < 1:
            raise InvalidPolicy(f"Retry.max_attempts must be an int >= 1, not {attempts!r}")
        if _number(self.base_s, "Retry.base_s") < 0:
            raise InvalidPolicy(f"Retry.base_s must be >= 0, not {self.base_s!r}")
        if _number(self.factor, "Retry.factor") < 1:
            raise InvalidPolicy(f"Retry.factor must be >= 1, not {self.factor!r}")
        if _number(self.max_s, "Retry.max_s") < self.base_s:
            raise InvalidPolicy(
                f"Retry.max_s must be >= base_s ({self.base_s!r}), not {self.max_s!r}"
            )
        if not 0 <= _number(self.jitter, "Retry.jitter") <= 1:
            raise InvalidPolicy(f"Retry.jitter must be between 0 and 1, not {self.jitter!r}")

    def backoff_s(self, retry: int) -> float:
        """The delay before retry ``retry`` (0 first), before jitter: ``base_s *
        factor**retry`` capped by ``max_s``."""
        try:
            raw = self.base_s * self.factor**retry
        except OverflowError:  # a huge retry count: the cap has long been reached
            return self.max_s
        return min(self.max_s, raw)

    def delay_s(self, retry: int, draw: float) -> float:
        """The delay before retry ``retry`` with jitter: ``draw`` in ``[0, 1)`` moves
        :meth:`backoff_s` by up to ``jitter`` of it either way (0.5 not at all), never
        past ``max_s``."""
        spread = 1 + self.jitter * (2 * draw - 1)
        return min(self.max_s, self.backoff_s(retry) * spread)

    def bounds_s(self, retry: int) -> tuple[float, float]:
        """The least and the most :meth:`delay_s` may be before retry ``retry``."""
        backoff = self.backoff_s(retry)
        return backoff * (1 - self.jitter), min(self.max_s, backoff * (1 + self.jitter))


def check_timeout(value: object, name: str) -> float | None:
    """A timeout, checked (rule 25): ``None`` (none) or a finite number of seconds > 0."""
    if value is None:
        return None
    if _number(value, name) <= 0:
        raise InvalidPolicy(f"{name} must be > 0 seconds (or None for none), not {value!r}")
    return float(value)  # type: ignore[arg-type]


def check_policies(
    kind: str,
    phases: Mapping[str, object],
    retry: object,
    phase_timeouts: Mapping[str, object],
    phase_retries: Mapping[str, object],
) -> None:
    """A definition's policies, checked (rule 25): each a :class:`Retry` or ``None``,
    each per-phase one naming a phase the definition has."""
    if retry is not None and not isinstance(retry, Retry):
        raise InvalidPolicy(f"TaskDefinition {kind}: retry must be a Retry or None, not {retry!r}")
    for name, table in (("phase_timeouts", phase_timeouts), ("phase_retries", phase_retries)):
        if not isinstance(table, Mapping):
            raise InvalidPolicy(f"TaskDefinition {kind}: {name} must map phase names to policies")
        for phase, policy in table.items():
            if phase not in phases:
                raise InvalidPolicy(f"TaskDefinition {kind}: {name} names no phase {phase!r}")
            if name == "phase_timeouts":
                check_timeout(policy, f"TaskDefinition {kind}: phase_timeouts[{phase!r}]")
            elif policy is not None and not isinstance(policy, Retry):
                raise InvalidPolicy(
                    f"TaskDefinition {kind}: phase_retries[{phase!r}] must be a Retry or None, "
                    f"not {policy!r}"
                )
