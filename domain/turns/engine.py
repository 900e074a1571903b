"""Running one controller pass (the yui controller): plan its scope, record its start,
defer the tasks of projects under maintenance (deferred, never failed; a task whose
fence raises fails alone, as a per-task pass that raised), then run the
per-task pass of each other task in a worker thread, serialized per task (a lock per
task, across passes too) and concurrent across tasks up to the bound (default 4, at
most 32); a pass with one task to work (or a bound of 1) works it in the calling
thread, with no pool to start. The per-task pass is :mod:`.task_pass`;
:class:`~.host.PassHost` states what a pass uses of the scheduler it runs for. Every
decision is an event, each carrying the ``pass_id``.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Collection, Iterable
from concurrent.futures import ThreadPoolExecutor

from .host import PassHost
from .pass_decisions import defer_task, finish_pass, start_pass
from .pass_events import PASS_STREAM_PREFIX
from .report import ControllerPassReport
from .runtime import Runtime
from .scope import plan
from .settings import check_concurrency
from .task_pass import TaskPass

Maintenance = Collection[str] | Callable[[str], bool]


def _under_maintenance(maintenance: Maintenance, project_ids: Iterable[str]) -> list[str]:
    if callable(maintenance):
        return [p for p in project_ids if maintenance(p)]
    return [p for p in project_ids if p in maintenance]


def run_pass(
    host: PassHost,
    scope: object = "full",
    *,
    runtime: Runtime | None = None,
    concurrency: int | None = None,
    maintenance: Maintenance = (),
) -> ControllerPassReport:
    """Run one controller pass for ``host`` (a Scheduler); see the module docstring."""
    settings = host.turn_settings
    bound = check_concurrency(
        settings.task_concurrency if concurrency is None else concurrency, "concurrency"
    )
    pass_id = uuid.uuid4().hex
    with host._lock:
        the_plan = plan(host.world, scope, host.clock())
        # 122 random bits name no stored pass: no read asks the store for its stream.
        host.world.absent.add(f"{PASS_STREAM_PREFIX}{pass_id}")
    tasks = list(the_plan.roles)
    report = ControllerPassReport(pass_id, the_plan.scope, tuple(the_plan.keys), tasks)
    report.retried = list(the_plan.retried)
    host._decide(
        start_pass,
        pass_id,
        the_plan.scope,
        the_plan.keys,
        tasks,
        bound,
        the_plan.retried,
        the_plan.ended_retries,
    )
    taken_over = frozenset(the_plan.retried) if the_plan.scope == "full" else frozenset()
    worker = TaskPass(host, settings, pass_id, runtime, report, taken_over)
    work: list[str] = []
    for task_id in tasks:
        task = host.world.get(task_id)
        try:
            fenced = _under_maintenance(maintenance, task.project_ids) if task is not None else []
        except Exception as error:
            # passes.fence_fails_task (yui asks its fence within the task's own pass): a
            # fence that raises fails this task's pass (its retry armed), not the pass.
            keys = the_plan.task_keys[task_id]
            report.outcomes[task_id] = worker.record_failure(task_id, keys, error, blocked=False)
            continue
        if fenced:
            host._decide(defer_task, pass_id, task_id, fenced)
            report.outcomes[task_id] = "deferred"
            report.deferred[task_id] = tuple(fenced)
        else:
            work.append(task_id)
    if work:
        if min(bound, len(work)) == 1:
            # One at a time: here. Starting and joining a pool's thread cost more than a
            # small task's pass (issue 15: 45% of a batched benchmark cycle).
            for task_id in work:
                report.outcomes[task_id] = worker.run(
                    task_id, the_plan.roles[task_id], the_plan.task_keys[task_id]
                )
        else:
            with ThreadPoolExecutor(
                max_workers=min(bound, len(work)), thread_name_prefix="tasktrail-pass"
            ) as pool:
                futures = {
                    task_id: pool.submit(
                        worker.run, task_id, the_plan.roles[task_id], the_plan.task_keys[task_id]
                    )
                    for task_id in work
                }
                for task_id in work:  # merged in scope order
                    report.outcomes[task_id] = futures[task_id].result()
    report.put_in_scope_order()
    if not host.closing:
        host._decide(finish_pass, pass_id, {t: report.outcomes.get(t, "skipped") for t in tasks})
    return report
