"""What tests read off a scheduler, a store or a telemetry reader, shared by the rule and
seed-fidelity tests: a running task, a command a rule refuses, a log's events of one
class, a run's job, a mint an admission rule refuses, a reconcile that visits a run, a
busy Leader, a runtime that answers every delivery alike, a metric's points."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from opentelemetry.sdk.metrics.export import InMemoryMetricReader

from tasktrail.domain import RuleViolation, Scheduler
from tasktrail.domain.runs.admission import AdmissionRefused
from tasktrail.domain.tasks.events import TaskEvent
from tasktrail.domain.turns.runtime import Runtime
from tasktrail.domain.turns.state import LEADER


def running(scheduler: Scheduler, kind: str = "job", **options: Any) -> str:
    """A task submitted with ``options`` and reserved: its run invocation is on."""
    task_id = scheduler.submit(kind, **options)
    assert scheduler.reserve(task_id) == "run"
    return task_id


def refused(
    scheduler: Scheduler, rule: int, command: Callable[..., Any], *args: Any, **kwargs: Any
) -> RuleViolation:
    """Run a command that must break ``rule``; check it named the rule and appended nothing."""
    before = scheduler.store.head()
    with pytest.raises(RuleViolation) as caught:
        command(*args, **kwargs)
    assert caught.value.rule == rule, caught.value
    assert scheduler.store.head() == before, "a refused command appended events"
    return caught.value


def of_type(scheduler: Scheduler, cls: type[TaskEvent]) -> list[Any]:
    """The store's events of class ``cls``, in log order."""
    return [r.event for r in scheduler.store.read() if isinstance(r.event, cls)]


def job_of(scheduler: Scheduler, run_id: str) -> str:
    """The executor job a run took (it must have one)."""
    job_id = scheduler.run(run_id).job_id
    assert job_id is not None
    return job_id


def settle(runs: Scheduler, run_id: str) -> str:
    """Reconcile until ``run_id`` was visited; what the visit came to."""
    for _ in range(10):
        report = runs.reconcile()
        if run_id in report.outcomes:
            return report.outcomes[run_id]
    raise AssertionError(f"{run_id} was never visited")


def busy_leader(scheduler: Scheduler, task_id: str) -> str:
    """Start the task's Leader Turn and record it delivered (an undelivered one would be
    due now); returns its id."""
    turn = scheduler.start_turn(task_id, LEADER)
    scheduler.deliver_turn(task_id, LEADER, turn, "delivered")
    return turn


class Answers(Runtime):
    """Answers every delivery with ``outcome``, noting (turn, attempt) of each."""

    def __init__(self, outcome: str) -> None:
        self.outcome = outcome
        self.tried: list[tuple[str, int]] = []

    def deliver(self, task_id: str, role: str, turn_id: str, attempt: int) -> Any:
        self.tried.append((turn_id, attempt))
        return self.outcome


def metric_points(reader: InMemoryMetricReader, name: str) -> dict[tuple[Any, ...], Any]:
    """The data points of metric ``name``, by their sorted attributes."""
    data = reader.get_metrics_data()
    points: dict[tuple[Any, ...], Any] = {}
    for resource in data.resource_metrics if data else []:
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                if metric.name == name:
                    for point in metric.data.data_points:
                        points[tuple(sorted(point.attributes.items()))] = point
    return points


def refused_with(scheduler: Scheduler, task: str, **kw: Any) -> str:
    """``mint_run(task)`` must be refused; its code, once checked that nothing was appended."""
    head = scheduler.store.head()
    with pytest.raises(AdmissionRefused) as caught:
        scheduler.mint_run(task, **kw)
    assert scheduler.store.head() == head, "a refused command appended events"
    return caught.value.code
