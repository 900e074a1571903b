"""Schedules (issue 42 item 6, rule 26): when a cron schedule ticks. Catch-up after
downtime submits the latest tick or each, within a bound; time zones across a DST
change (nine o'clock kept, a tick in an hour the change skips or repeats runs once);
a bad cron or an unknown zone is refused by rule 26 and appends nothing."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from conftest import event_count
from helpers.schedules import MINUTE, T0
from helpers.schedules import clock as clock  # a fixture, overriding the suite's
from helpers.schedules import registry as registry  # a fixture, overriding the suite's

from tasktrail.domain import ManualClock, RuleViolation
from tasktrail.domain.schedules.cron import CATCH_UP_LIMIT
from tasktrail.domain.schedules.events import schedule_stream_id


def ms(text: str) -> int:
    """An ISO time with its offset, as scheduler ms."""
    return int(datetime.fromisoformat(text).timestamp() * 1000)


@pytest.mark.parametrize("catch_up", [False, True])
def test_after_downtime_catch_up_submits_the_latest_tick_or_each(
    fleet: Any, clock: ManualClock, catch_up: bool
) -> None:
    s = fleet()
    s.schedule("beat", "report", cron="*/10 * * * *", catch_up=catch_up)
    clock.advance(10 * MINUTE)
    assert s.submit_due_schedules() == [f"sched:beat:{T0 + 10 * MINUTE}"]
    clock.advance(45 * MINUTE)  # down: the ticks at +20, +30, +40 and +50 are missed
    missed = [f"sched:beat:{T0 + n * 10 * MINUTE}" for n in (2, 3, 4, 5)]
    assert s.submit_due_schedules() == (missed if catch_up else missed[-1:])
    stream = s.store.stream(schedule_stream_id("beat"))
    (tick,) = [e for e in stream if getattr(e, "due_at", None) == T0 + 20 * MINUTE]
    assert (tick.tick_at, tick.next_at) == (T0 + 50 * MINUTE, T0 + 60 * MINUTE)
    assert s.submit_due_schedules() == []


def test_catch_up_is_bounded(fleet: Any, clock: ManualClock) -> None:
    s = fleet()
    s.schedule("beat", "report", cron="* * * * *", catch_up=True)
    clock.advance(3 * CATCH_UP_LIMIT * MINUTE)  # down three times longer than the bound
    submitted = s.submit_due_schedules()
    assert len(submitted) == CATCH_UP_LIMIT
    assert submitted[-1] == f"sched:beat:{T0 + 3 * CATCH_UP_LIMIT * MINUTE}"


@pytest.mark.parametrize(
    ("cron", "tz"),
    [
        ("61 * * * *", "UTC"),
        ("* * * *", "UTC"),
        ("0 0 30 2 *", "UTC"),  # never ticks: February has no 30th
        ("every minute", "UTC"),
        ("*/5 * * * *", "Mars/Olympus_Mons"),
        ("*/5 * * * *", ""),
        ("*/5 * * * *", "../etc/passwd"),
    ],
)
def test_a_bad_cron_or_an_unknown_zone_is_refused_by_rule_26_and_appends_nothing(
    fleet: Any, cron: str, tz: str
) -> None:
    s = fleet()
    before = event_count(s.store)
    with pytest.raises(RuleViolation, match="rule 26") as refused:
        s.schedule("bad", "report", cron=cron, tz=tz)
    assert refused.value.rule == 26
    assert event_count(s.store) == before and s.schedules() == []


def test_a_daily_schedule_keeps_nine_oclock_paris_time_across_the_dst_change(
    fleet: Any, clock: ManualClock
) -> None:
    clock.set(ms("2026-03-27T12:00:00+01:00"))  # Paris moves to summer time on the 29th
    s = fleet()
    s.schedule("morning", "report", cron="0 9 * * *", tz="Europe/Paris")
    seen = []
    for _ in range(4):
        due = s.next_schedule_due()
        assert due is not None
        clock.set(due)
        (task_id,) = s.submit_due_schedules()
        seen.append(int(task_id.rsplit(":", 1)[1]))
    paris = ZoneInfo("Europe/Paris")
    local = [datetime.fromtimestamp(t / 1000, UTC).astimezone(paris) for t in seen]
    assert [(d.day, d.hour, d.minute) for d in local] == [
        (28, 9, 0),
        (29, 9, 0),
        (30, 9, 0),
        (31, 9, 0),
    ]
    # In UTC: 08:00 before the change, 07:00 after it.
    assert [datetime.fromtimestamp(t / 1000, UTC).hour for t in seen] == [8, 7, 7, 7]


@pytest.mark.parametrize(
    ("start", "expected"),
    [
        # Spring: 02:30 does not exist on the 29th; Debian's cron runs it at 03:00.
        ("2026-03-28T12:00:00+01:00", ["03-29T03:00+02:00", "03-30T02:30+02:00"]),
        # Autumn: 02:30 comes twice on the 25th; it runs once, at the first.
        ("2026-10-24T12:00:00+02:00", ["10-25T02:30+02:00", "10-26T02:30+01:00"]),
    ],
)
def test_a_tick_in_an_hour_a_dst_change_skips_or_repeats_runs_once(
    fleet: Any, clock: ManualClock, start: str, expected: list[str]
) -> None:
    clock.set(ms(start))
    s = fleet()
    s.schedule("night", "report", cron="30 2 * * *", tz="Europe/Paris")
    paris = ZoneInfo("Europe/Paris")
    seen = []
    for _ in expected:
        due = s.next_schedule_due()
        assert due is not None
        clock.set(due)
        (task_id,) = s.submit_due_schedules()
        when = datetime.fromtimestamp(int(task_id.rsplit(":", 1)[1]) / 1000, UTC).astimezone(paris)
        seen.append(when.strftime("%m-%dT%H:%M%z"))
    assert seen == [e.replace("+02:00", "+0200").replace("+01:00", "+0100") for e in expected]
