"""``verify``'s check of rule 33 over state: no limit key holds more tasks running a
phase than the limit its tasks recorded (``max_running``). Registered by importing this
module (``tasktrail.replay`` does). The check at every position of a log is the fleet
test's (tests/test_flow_fleet.py); this one is what any folded state must hold."""

from __future__ import annotations

from collections.abc import Iterator

from tasktrail.domain.tasks.flow_events import limit_group

from .state import SchedulerState
from .verify import Violation, check


@check("rule_33_limits")
def _limits(state: SchedulerState) -> Iterator[Violation]:
    tasks = state.world.tasks
    running: dict[str, list[str]] = {}
    for task_id in sorted(state.world.live):
        group = limit_group(tasks[task_id])
        if group is not None:
            running.setdefault(group, []).append(task_id)
    for _group, task_ids in sorted(running.items()):
        for task_id in task_ids:
            flow = tasks[task_id].flow
            assert flow is not None and flow.max_running is not None
            if len(task_ids) > flow.max_running:
                where = tuple(
                    sorted(state.last_position[t] for t in task_ids if t in state.last_position)
                )
                yield Violation(
                    "rule_33_limits",
                    task_id,
                    f"{len(task_ids)} tasks run under limit key {flow.limit_key!r} of "
                    f"{tasks[task_id].kind}, more than its max_running {flow.max_running}",
                    where,
                )
                break
