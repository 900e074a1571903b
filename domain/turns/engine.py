"""Running one controller pass (the yui controller): plan its scope, record its start,
defer the tasks of projects under maintenance (deferred, never failed; a task whose
fence raises fails alone, as a per-task pass that raised), then run the
per-task pass of each other task in a worker thread, serialized per task (a lock per
task, across passes too) and concurrent across tasks up to the bound (default 4, at
most 32); a pass with one task to work (or a bound of 1) works it in the calling
thread, with no pool to start. The per-task pass is :mod:`.task_pass`;
:class:`~.host.PassHost` states what a pass uses of the scheduler it runs for. Every
decision is an event, each carrying the ``pass_id``.

:func:`run_cleanups` does the runtime cleanups due for an attempt
(:mod:`.attempts`) outside a pass: a pass is recorded (started, finished), and an
attempt that settles nothing must append nothing.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Collection, Iterable
from concurrent.futures import ThreadPoolExecutor

from .attempts import WaitingCleanup, due_cleanups, waiting_cleanups
from .claims import LiveWorkers
from .cleanup import cleanup_state, require_cleanups
from .host import PassHost
from .pass_decisions import defer_task, finish_pass, start_pass
from .pass_events import PASS_STREAM_PREFIX
from .report import CleanupReport, ControllerPassReport
from .runtime import Runtime
from .scope import plan
from .settings import check_concurrency
from .task_pass import TaskPass, attempt_cleanup, describe_error

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
        # The plan reads the log as it stands: work another writer created since this
        # process last folded is in this pass, not the next (start_pass folds too late).
        host._catch_up()
        the_plan = plan(host.world, scope, host.clock())
        if runtime is not None and not host.cleanup_attempts.empty():
            # What this process remembers of obligations settled elsewhere (another
            # worker, a host's settle_cleanup) goes, as a round of cleanups drops it: a
            # host that only runs passes would keep it for every task it cleaned up.
            host.cleanup_attempts.keep_only(waiting_cleanups(host.world))
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


def run_cleanups(
    host: PassHost, runtime: Runtime, *, maintenance: Maintenance = ()
) -> CleanupReport:
    """Attempt each runtime cleanup due now (:func:`~.attempts.due_cleanups`, with what
    other writers appended folded in first) outside a pass, under its task's lock: a
    completed task's role that owes an obligation gets it recorded first
    (``cleanup.completed_task``), then the obligation is claimed for this process (one
    another live worker claimed is left to it, :mod:`.claims`), ``Runtime.cleanup`` is
    asked and what came of it recorded as a pass would (settled, or failed), nothing
    for "not done yet". A task of
    a project under maintenance is deferred, as a pass defers it: its cleanups are due
    again after the backoff. A task whose records raise is reported, and its cleanups
    back off as well."""
    report = CleanupReport()
    if host.closing:
        return report
    with host._lock:
        # Which are due is read from the log as it stands (yui reads each role's mailbox
        # from its store): one another writer settled is not the runtime's to do again.
        host._catch_up()
        due = due_cleanups(host.world, host.cleanup_attempts, host.clock())
    settings = host.turn_settings
    attempts = host.cleanup_attempts
    base_ms = settings.delivery_retry_base_ms
    alive = LiveWorkers(host.live_workers)  # the lease table, read if a claim asks
    by_task: dict[str, list[WaitingCleanup]] = {}
    for waiting in due:
        by_task.setdefault(waiting.task_id, []).append(waiting)
    for task_id, waiting_roles in by_task.items():
        if host.closing:
            break
        task = host.world.get(task_id)
        try:
            # A fence that raises fails this task's cleanups alone, as it fails its pass.
            fenced = _under_maintenance(maintenance, task.project_ids) if task is not None else []
            if fenced:
                for waiting in waiting_roles:
                    attempts.note(task_id, waiting.role, waiting.number, host.clock(), base_ms)
                report.deferred[task_id] = tuple(fenced)
                continue
            _clean_up_task(host, runtime, task_id, waiting_roles, report, alive)
        except Exception as error:
            if host.closing:
                break
            report.errors[task_id] = describe_error(error)
            # Those not tried yet back off too: a record that keeps raising (a require
            # refused, the store away) must not have a Worker retry it at every poll.
            now = host.clock()
            for waiting in waiting_roles:
                due_at = attempts.due_at(task_id, waiting.role, waiting.number)
                if due_at is None or due_at <= now:
                    attempts.note(task_id, waiting.role, waiting.number, now, base_ms)
    return report


def _clean_up_task(
    host: PassHost,
    runtime: Runtime,
    task_id: str,
    waiting_roles: list[WaitingCleanup],
    report: CleanupReport,
    alive: LiveWorkers,
) -> None:
    settings = host.turn_settings
    attempts = host.cleanup_attempts
    with host._task_lock(task_id):
        owed = [w.role for w in waiting_roles if not w.required]
        if owed:
            host._decide(require_cleanups, settings, task_id, owed)
        for waiting in waiting_roles:
            state = cleanup_state(host.world, task_id)
            obligation = state.obligations.get(waiting.role) if state is not None else None
            if obligation is None or not obligation.open:
                continue  # settled meanwhile, by a pass or another writer
            due_at = attempts.due_at(task_id, waiting.role, obligation.number)
            if due_at is not None and due_at > host.clock():
                continue  # a pass tried it meanwhile
            how = attempt_cleanup(
                host, settings, runtime, task_id, waiting.role, obligation.number, alive=alive
            )
            if how == "gone":
                continue  # settled or replaced by another writer since this world folded it
            report.cleanups.setdefault(task_id, {})[waiting.role] = how
            if how == "failed":
                failed = cleanup_state(host.world, task_id)
                error = failed.obligations[waiting.role].last_error if failed else None
                report.errors[f"{task_id}/{waiting.role}"] = error or "failed"
