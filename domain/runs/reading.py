"""How a run decision reads a run and its day (SPEC.md section 3).

A run decision takes a :class:`~..world.Draft` and a
:class:`~..tasks.context.Context`; :func:`get_run` reads a run as the decision
sees it (:class:`UnknownRun` when none was minted) and :func:`today` is the
calendar date of ``ctx.now`` in the configured zone. Nothing here reads the
wall clock.
"""

from __future__ import annotations

from ..errors import Refused
from ..tasks.context import Context
from ..world import Draft
from .identity import local_day, run_stream_id
from .settings import RunSettings
from .state import RunState


class UnknownRun(Refused, KeyError):
    """A run id that no event in the store minted."""

    def __init__(self, run_id: str) -> None:
        self.run_id = run_id
        super().__init__(f"no run {run_id!r} in this store")

    def __str__(self) -> str:  # KeyError would quote the message otherwise
        return Refused.__str__(self)


def today(ctx: Context, settings: RunSettings) -> str:
    """The local day of ``ctx.now`` in the configured zone."""
    return local_day(ctx.now, settings.tz)


def get_run(draft: Draft, run_id: str) -> RunState:
    """The run as this decision sees it; :class:`UnknownRun` if none was minted."""
    state = draft.get_stream(run_stream_id(run_id)) if isinstance(run_id, str) else None
    if not isinstance(state, RunState):
        raise UnknownRun(run_id)
    return state
