"""The restart limit in force (rules 9 and 12), recorded like the other settings.

A task cut off ``restart_limit`` times without progress is parked (rule 9), and an
abort handler cut off that often ends faulted (rule 12). The limit decides, so it is
an event (:class:`RestartLimitChanged`, on the one stream ``settings:restarts``):
every worker of a fleet and every replay decide with the last one recorded, else
:data:`DEFAULT_RESTART_LIMIT`. :func:`restart_limit_of` reads it from a world (or a
decision's view of one); :func:`change_restart_limit` records a new one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from ..errors import InvalidArgument
from ..world import Draft, World, stream_in_view
from .context import Context
from .events import TaskEvent, register_event
from .evolve import InvalidTransition, evolves_stream
from .guards import not_closing
from .state import TaskState
from .validation import act_fields

DEFAULT_RESTART_LIMIT = 3
"""The limit in force in a log that never recorded one (pi-durable's)."""

RESTART_LIMIT_STREAM = "settings:restarts"


@dataclass(frozen=True, kw_only=True, slots=True)
class RestartLimitChanged(TaskEvent):
    """The restart limit in force from now on (``configure_restarts``, or an open
    given another ``restart_limit``). ``task_id`` is empty (scheduler-wide); ``actor``
    and ``why``: who set it and why (``ACT_FIELDS``)."""

    task_stream: ClassVar[bool] = False

    limit: int
    actor: str | None = None
    why: str | None = None

    def stream_id(self) -> str:
        """The one stream of the restart limit."""
        return RESTART_LIMIT_STREAM


register_event(RestartLimitChanged)


def check_restart_limit(limit: Any) -> int:
    """A restart limit: an int >= 1 (a bool is not one)."""
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise InvalidArgument(f"restart_limit must be an int >= 1, not {limit!r}")
    return limit


@evolves_stream(RestartLimitChanged)
def _restart_limit(state: int | None, event: RestartLimitChanged) -> int:
    try:
        return check_restart_limit(event.limit)
    except InvalidArgument as error:  # not a limit tasktrail would record
        raise InvalidTransition(f"RestartLimitChanged: {error}") from None


def restart_limit_of(source: World | Draft) -> int:
    """The restart limit in force in a world (or a decision's view of one): the last
    recorded, else :data:`DEFAULT_RESTART_LIMIT`."""
    state = stream_in_view(source, RESTART_LIMIT_STREAM)
    return state if isinstance(state, int) else DEFAULT_RESTART_LIMIT


def limit_deciding(draft: Draft, ctx: Context, task: TaskState) -> int:
    """``ctx.restart_limit``, for a decision whose events it decides about ``task``
    (rule 9's reservation or retry, rule 12's cut-off handler): the decision is guarded
    on the limit's stream, so a writer that decided on a limit another had changed
    meanwhile is refused (on PostgreSQL no turn orders the writers). A task never cut
    off is not parked under any limit: no guard."""
    if task.restarts:
        draft.guard_stream(RESTART_LIMIT_STREAM)
    return ctx.restart_limit


def change_restart_limit(
    draft: Draft, ctx: Context, limit: int, *, actor: str | None = None, why: str | None = None
) -> int:
    """Record ``limit`` as the restart limit in force (by ``actor``, because ``why``);
    nothing when it is the one in force already. Returns the limit in force after."""
    not_closing(ctx, None)
    check_restart_limit(limit)
    act = act_fields(actor, why, None)
    # 9, 12. The limit decides parking and cut-off aborts: an event, so every worker
    # and every replay decide with the same one at the same position.
    if restart_limit_of(draft) != limit:
        draft.emit_stream(RestartLimitChanged(task_id="", at=ctx.now, limit=limit, **act))
    return limit
