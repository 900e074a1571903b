"""Flow control (issue 44, rule 35): a submission's ``Debounce`` collapses the submits
within its window into one task with the last memos, ready once the window ends; a
window ends once its task is ready; two writers racing for a new window open one.
Each on SQLite and PostgreSQL."""

from __future__ import annotations

import pytest
from helpers.flow import flows as flows  # a fixture
from helpers.flow import s as s  # a fixture

from tasktrail.domain import ConflictError, Debounce, ManualClock, Registry, Scheduler
from tasktrail.domain.tasks.flow_events import SubmitCollapsed, SubmitDebounced
from tasktrail.replay import replay


def test_rule_35_ten_submits_debounced_into_one_task_with_the_last_memos(
    s: Scheduler, clock: ManualClock, store_url: str
) -> None:
    debounce = Debounce(key="doc-7", wait_s=5)
    ids = []
    for n in range(10):
        ids.append(s.submit("plain", memos={"n": n}, debounce=debounce, actor="web"))
        clock.advance(1_000)  # each within 5 s of the last
    last_at = clock.now - 1_000
    assert len(set(ids)) == 1
    task = s.task(ids[0])
    assert task.memos == {"n": 9} and task.status == "sleeping"
    assert task.until == last_at + 5_000
    history = s.history(ids[0])
    assert isinstance(history[1], SubmitDebounced)
    collapsed = [e for e in history if isinstance(e, SubmitCollapsed)]
    assert len(collapsed) == 9 and all(e.task_id == ids[0] for e in collapsed)
    assert collapsed[-1].memos == {"n": 9} and collapsed[-1].actor == "web"
    assert s.runnable() == [] and s.wake() == {"active": False, "at": last_at + 5_000}
    clock.set(last_at + 5_000)  # ready 5 s after the last submit
    s.run_until_idle()
    assert s.task(ids[0]).status == "terminal"
    again = s.submit("plain", memos={"n": 10}, debounce=debounce)
    assert again != ids[0]  # after the task became ready: a new window, a new task
    assert s.submit("plain", memos={"n": 11}, debounce=debounce) == again
    other = s.submit("plain", memos={"n": 12}, debounce=Debounce(key="doc-8", wait_s=5))
    assert other != again
    assert s.task(again).memos == {"n": 11}
    assert replay(store_url).live[again].memos == {"n": 11}


def test_rule_35_a_window_ends_once_its_task_is_ready_even_if_not_yet_run(
    s: Scheduler, clock: ManualClock
) -> None:
    debounce = Debounce(key="k", wait_s=2)
    first = s.submit("plain", debounce=debounce)
    clock.advance(2_000)  # ready now, not reserved yet
    second = s.submit("plain", debounce=debounce)
    assert second != first
    s.abort(second, reason="not needed")  # an aborted window collapses nothing more
    third = s.submit("plain", debounce=debounce)
    assert third not in (first, second)


def test_two_writers_racing_for_a_new_debounce_window_open_one(
    store_url: str, clock: ManualClock, flows: Registry
) -> None:
    one = Scheduler.open(store_url, clock=clock, registry=flows, worker="w1")
    two = Scheduler.open(store_url, clock=clock, registry=flows, worker="w2")
    debounce = Debounce(key="k", wait_s=10)
    try:
        with pytest.raises(ConflictError), two.batch():
            mine = two.submit("plain", memos={"by": 2}, debounce=debounce)
            theirs = one.submit("plain", memos={"by": 1}, debounce=debounce)
        assert mine != theirs
        assert two.submit("plain", memos={"by": 2}, debounce=debounce) == theirs
        assert [t.id for t in replay(store_url).live.values()] == [theirs]
        assert one.task(theirs).memos == {"by": 2}
    finally:
        one.close()
        two.close()
