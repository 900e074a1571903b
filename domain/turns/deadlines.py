"""When a controller pass next has Turn work (:func:`next_deadline`): the earliest
undelivered Turn (due now), delivery retry, completion coming due, exit or stall
observed (due now), stall window ending, wakeup aggregation or force window, or
task-pass retry.
"""

from __future__ import annotations

from ..world import World
from .checks import active_turn
from .folds import pending_wakeups, task_pass_retries
from .settings import TurnSettings
from .state import LEADER
from .wakeups import wakeup_deadline


def next_deadline(world: World, settings: TurnSettings, now: float | None = None) -> float | None:
    """The earliest time a controller pass has Turn work: an undelivered Turn never
    tried (due since it started), a delivery retry, a completion coming due, an exit
    or stall observed (due since it was seen), a stall diagnostic or stall window
    ending, a wakeup's aggregation, re-signal or force time, a task-pass retry. A
    time in the past means: due now. ``now`` (the scheduler clock) tells whether a
    busy Leader's wakeup is past its aggregation end; without it, the aggregation
    end."""
    times: list[float] = []
    for task_id in list(world.live):
        task = world.get(task_id)
        if task is None or task.status == "terminal":
            continue
        for role in task.roles.values():
            turn = role.active
            if turn is None:
                continue
            if turn.status == "started" and not turn.delivery_held:
                # An undelivered Turn never tried (one start_turn began, or one whose
                # same-pass delivery a crash cut off) is due now: yui delivers at once.
                if turn.delivery_outcome is None:
                    times.append(turn.started_at)
                elif turn.retry_at is not None:
                    times.append(turn.retry_at)
            if turn.completion_due_at is not None:
                times.append(turn.completion_due_at)
            # turns.observed_due: an exit or stall the runtime saw is for the next pass to
            # judge (yui reconciles liveness in every pass), so it is due since it was seen;
            # but an exit the Turn's delivery-uncertain hold fences waits for a pass run for
            # another reason, as the held Turn does (else a Worker would poll it).
            if turn.stall_observed_at is not None:
                times.append(turn.stall_observed_at)
            if turn.exit_observed_at is not None and not (
                turn.delivery_held and turn.delivery_outcome == "delivery-uncertain"
            ):
                times.append(turn.exit_observed_at)
            idle = (
                settings.stall_window_ms if turn.stall_diagnosed else settings.diagnostic_after_ms
            )
            times.append(turn.progress_at + idle)
    for task_id, wakeup in pending_wakeups(world).items():
        busy = active_turn(world.get(task_id), LEADER) is not None
        times.append(wakeup_deadline(wakeup, busy, settings, now))
    times.extend(retry.retry_at for retry in task_pass_retries(world).values())
    return min(times) if times else None
