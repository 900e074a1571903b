"""yui, round ten (seed 000: yui 0.6.4 -> 0.6.6, ``FileTaskController``): a failed per-task
pass is retried after the delivery retry delay. ``#scheduleTaskPassRetry`` backs off from
``#deliveryRetryMs``; tasktrail had its own base for it, which now follows the delivery
base unless a host sets one. Each test names the behaviour it pins and fails when it
breaks; docs/seed-fidelity.md, "Round ten", says what changed."""

from __future__ import annotations

import math
from typing import Any

import orjson
import pytest
from helpers.probes import of_type

from tasktrail.domain import InvalidArgument, ManualClock, Scheduler
from tasktrail.domain.store.transcoder import decode_checked, decode_event
from tasktrail.domain.turns.events import TURN_SETTINGS_STREAM, TurnSettingsChanged
from tasktrail.domain.turns.keys import task_key
from tasktrail.domain.turns.pass_events import TaskPassRetryScheduled
from tasktrail.domain.turns.runtime import Runtime
from tasktrail.domain.turns.settings import TurnSettings, turn_settings_of
from tasktrail.replay import replay


class Failing(Runtime):
    """Delivering any Turn raises, so every per-task pass fails."""

    def deliver(self, task_id: str, role: str, turn_id: str, attempt: int) -> Any:
        raise RuntimeError(f"{task_id}: socket closed")


def _delays(scheduler: Scheduler, clock: ManualClock, task_id: str, failures: int) -> list[float]:
    """Fail ``task_id``'s per-task pass, then each retry it arms as it comes due, until
    ``failures`` passes failed; each armed retry's delay (ms from its record)."""
    scheduler.controller_pass([task_key(task_id)], runtime=Failing())
    for _ in range(failures - 1):
        retry = scheduler.task_pass_retry(task_id)
        assert retry is not None
        clock.set(retry.retry_at)
        scheduler.controller_pass(["operator"], runtime=Failing())
    armed = of_type(scheduler, TaskPassRetryScheduled)
    return [r.retry_at - r.at for r in armed if r.task_id == task_id]


def _failing_task(scheduler: Scheduler, task_id: str) -> None:
    scheduler.submit("job", id=task_id)
    scheduler.start_turn(task_id, "worker")


def test_yui_failed_task_pass_is_retried_after_the_delivery_retry_delay(
    scheduler: Scheduler, clock: ManualClock
) -> None:
    """000 ``#scheduleTaskPassRetry``: ``min(2000, #deliveryRetryMs * 2**min(n, 3))``. With
    the delivery base at 400 ms a failed pass is retried after 400, then 800 ms (not 250
    and 500); a base of the pass retry's own, when a host sets one, wins; set back to
    ``None`` it follows the delivery base again."""
    assert TurnSettings().task_pass_retry_base_ms is None  # unset: follow delivery
    scheduler.configure_turns(delivery_retry_base_ms=400, task_pass_retry_limit=3)
    _failing_task(scheduler, "follows")
    assert _delays(scheduler, clock, "follows", 3) == [400, 800, 1600]
    assert scheduler.turn_settings.pass_retry_base_ms == 400
    scheduler.configure_turns(task_pass_retry_base_ms=300)
    _failing_task(scheduler, "own")
    assert _delays(scheduler, clock, "own", 2) == [300, 600]
    scheduler.configure_turns(task_pass_retry_base_ms=None)
    _failing_task(scheduler, "again")
    assert _delays(scheduler, clock, "again", 1) == [400]


@pytest.mark.parametrize("bad", [0, -1, math.inf, math.nan, "250", True])
def test_yui_pass_retry_base_of_its_own_is_a_positive_number_or_none(bad: Any) -> None:
    """yui's ``positiveInteger`` refuses a delay that is not positive; tasktrail's own
    pass retry base is a positive finite number of ms, or ``None`` (follow delivery)."""
    with pytest.raises(InvalidArgument, match=r"task_pass_retry_base_ms .* or None"):
        TurnSettings(task_pass_retry_base_ms=bad)
    assert TurnSettings(task_pass_retry_base_ms=None).pass_retry_base_ms == 250


def _settings_row(**overrides: Any) -> bytes:
    """A stored ``TurnSettingsChanged`` payload as every release recorded it: the whole
    settings, a number for the pass retry base before it could be unset."""
    recorded = {
        "at": 0,
        "task_id": "",
        "aggregation_window_ms": 60_000,
        "force_window_ms": 600_000,
        "stall_window_ms": 1_800_000,
        "delivery_retry_base_ms": 400,
        "delivery_retry_limit": 60,
        "task_pass_retry_base_ms": 250,
        "task_pass_retry_limit": 2,
        "task_concurrency": 4,
    }
    return orjson.dumps({**recorded, **overrides})


@pytest.mark.parametrize("decode", [decode_event, decode_checked])
def test_yui_settings_recorded_with_a_pass_retry_base_keep_it(decode: Any) -> None:
    """A log written before the pass retry base could follow delivery holds the number
    then in force: it is read (the fast and the checked way) and folded as a base of the
    pass retry's own, so a replay decides as the scheduler that wrote it did. A new
    log's ``None`` reads back as ``None``."""
    old = decode("tasktrail.TurnSettingsChanged", TURN_SETTINGS_STREAM, _settings_row(), 1)
    assert isinstance(old, TurnSettingsChanged) and old.task_pass_retry_base_ms == 250
    unset = _settings_row(task_pass_retry_base_ms=None)
    new = decode("tasktrail.TurnSettingsChanged", TURN_SETTINGS_STREAM, unset, 2)
    assert isinstance(new, TurnSettingsChanged) and new.task_pass_retry_base_ms is None


def test_yui_store_whose_settings_hold_a_pass_retry_base_retries_after_it(
    scheduler: Scheduler, clock: ManualClock, sqlite_url: str
) -> None:
    """Settings recorded with a number (as an earlier release recorded every change)
    keep retrying after it, whatever the delivery base; a host that sets it to ``None``
    makes the pass retry follow the delivery base from then on. Replay folds the
    settings in force as the scheduler decided with them."""
    scheduler.configure_turns(delivery_retry_base_ms=400, task_pass_retry_base_ms=250)
    _failing_task(scheduler, "kept")
    assert _delays(scheduler, clock, "kept", 1) == [250]
    assert turn_settings_of(replay(sqlite_url).held).pass_retry_base_ms == 250
    scheduler.configure_turns(task_pass_retry_base_ms=None)
    last = of_type(scheduler, TurnSettingsChanged)[-1]
    assert last.task_pass_retry_base_ms is None  # recorded unset, not as 400
    _failing_task(scheduler, "follows")
    assert _delays(scheduler, clock, "follows", 1) == [400]
    folded = turn_settings_of(replay(sqlite_url).held)
    assert (folded.task_pass_retry_base_ms, folded.pass_retry_base_ms) == (None, 400)
