"""Flow control (issue 44, rule 36): policies that cannot be kept are refused when made,
a key function that names no key refuses the submit, and the keys a submitter did not
know are recorded at the first reservation (a key function failing there faults the
task). On SQLite and PostgreSQL."""

from __future__ import annotations

from typing import Any

import pytest
from conftest import event_count, finishing
from helpers.flow import _tenant
from helpers.flow import flows as flows  # a fixture
from helpers.flow import s as s  # a fixture

from tasktrail.domain import (
    Debounce,
    InvalidFlowPolicy,
    Limit,
    ManualClock,
    Rate,
    Registry,
    RuleViolation,
    Scheduler,
    TaskDefinition,
)
from tasktrail.domain.tasks.flow_events import FlowKeysRecorded


def test_rule_36_policies_that_cannot_be_kept_are_refused_when_made() -> None:
    bad: list[Any] = [
        lambda: Limit(key=_tenant, max_running=0),
        lambda: Limit(key="tenant", max_running=2),  # type: ignore[arg-type]
        lambda: Limit(key=_tenant, max_running=True),
        lambda: Rate(key=_tenant, per_s=0),
        lambda: Rate(key=_tenant, per_s=float("inf")),
        lambda: Rate(key=_tenant, per_s=1, burst=0),
        lambda: Debounce(key="", wait_s=1),
        lambda: Debounce(key="k", wait_s=0),
        lambda: Debounce(key="k", wait_s=-1),
        lambda: TaskDefinition("x", 1, {"go": finishing()}, limit="tenant"),  # type: ignore[arg-type]
        lambda: TaskDefinition("x", 1, {"go": finishing()}, rate=Limit(_tenant, 1)),  # type: ignore[arg-type]
    ]
    for make in bad:
        with pytest.raises(InvalidFlowPolicy) as refused:
            make()
        assert refused.value.rule == 36 and isinstance(refused.value, ValueError)


def test_rule_36_a_key_function_that_names_no_key_refuses_the_submit(
    s: Scheduler, store_url: str
) -> None:
    head = event_count(store_url)
    for memos in ({"model": 7}, {}, {"model": "x" * 300}):  # not a string, KeyError, too long
        with pytest.raises(InvalidFlowPolicy) as refused:
            s.submit("call", memos=memos)
        assert refused.value.rule == 36 and "rate key of call" in str(refused.value)
    with pytest.raises(InvalidFlowPolicy):
        s.submit("plain", debounce=Debounce(key="k", wait_s=1), key="idem")
    assert event_count(store_url) == head


def test_keys_a_submitter_did_not_know_are_recorded_at_the_first_reservation(
    store_url: str, clock: ManualClock, flows: Registry
) -> None:
    """A task submitted where its definition is not registered (an operator's command
    line, a schedule's tick) gets its keys from the worker's definition, in its first
    reservation's own append; a key function failing there faults it (rule 36)."""
    with Scheduler.open(store_url, clock=clock, worker="cli") as operator:
        keyed = [operator.submit("job", phase="go", memos={"tenant": "a"}) for _ in range(3)]
        broken = operator.submit("call", phase="go", memos={})
        assert operator.task(keyed[0]).flow is None
    s = Scheduler.open(store_url, clock=clock, registry=flows, worker="w1")
    try:
        assert s.held_back(keyed[2]) is None  # nothing runs yet
        s.reserve(keyed[0])
        history = s.history(keyed[0])
        assert isinstance(history[1], FlowKeysRecorded) and history[1].limit_key == "a"
        s.reserve(keyed[1])
        with pytest.raises(RuleViolation) as refused:
            s.reserve(keyed[2])
        assert refused.value.rule == 33
        assert s.reserve(broken) is None
        ended = s.task(broken).outcome
        assert ended is not None and (ended.status, ended.reason) == ("faulted", "flow_key")
        assert "rule 36" in (ended.message or "")
    finally:
        s.close()
