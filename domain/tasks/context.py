"""What a decision may know besides the tasks: the clock reading and settings.

Every ``decide`` function of SPEC.md section 1 (and of sections 2 and 3) takes
a :class:`Context` beside its :class:`~..world.Draft`. Nothing in a decision
reads the clock, the environment or storage: the clock reading comes in as
``Context.now``, the restart limit and whether the scheduler is closing with it.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Context:
    """What a decision may know besides the tasks: the clock reading and settings."""

    now: float
    restart_limit: int = 3
    closing: bool = False
    worker: str | None = None
    """The worker deciding (SPEC section 8); ``None`` where no fleet is involved."""
