"""Issue 17, item 6: decision times never run backwards within a store.

A clock reading behind the latest time the store holds is moved up to it (and
counted); an append whose events are stamped earlier than the event before it in
the store (another writer's clock ran ahead, between this one's decision and its
append) is refused inside the append's transaction as a :class:`ClockConflict`,
which the scheduler decides again on its own. So ``replay --until TIME`` is a
prefix of the log.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers.cli import folder_state, run
from hypothesis import given
from hypothesis import strategies as st

from tasktrail.domain import ClockConflict, ManualClock, Scheduler, open_store
from tasktrail.domain.tasks.events import TaskSubmitted
from tasktrail.replay import replay

START = 1_767_603_600_000


class WallClock:
    """A clock that, like a wall clock stepped by NTP, may go backwards."""

    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def set(self, now: float) -> None:
        self.now = now


def _ats(location: str | Path) -> list[float]:
    with open_store(location, read_only=True) as store:
        return [recorded.event.at for recorded in store.read()]


def test_a_clock_running_backwards_is_clamped_and_counted(store_url: str) -> None:
    clock = WallClock(START)
    s = Scheduler.open(store_url, clock=clock)
    s.submit("job", phase="a", id="first")
    clock.set(START - 60_000)  # the clock stepped back a minute
    s.submit("job", phase="a", id="second")
    assert s.task("second").submitted_at == START
    assert s.store.clamped >= 1
    s.close()
    # A fresh process with a clock behind the store reads the store's latest time first.
    late = Scheduler.open(store_url, clock=WallClock(START - 3_600_000))
    late.submit("job", phase="a", id="third")
    late.close()
    ats = _ats(store_url)
    assert ats == sorted(ats) and ats[-1] >= START


def test_an_append_stamped_before_the_store_latest_event_is_a_clock_conflict(
    store_url: str,
) -> None:
    ahead = open_store(store_url)
    behind = open_store(store_url)
    ahead.append([TaskSubmitted(task_id="a", at=START, kind="k", version=1, phase="p")], [1])
    head = ahead.head()
    with pytest.raises(ClockConflict) as caught:
        behind.append(
            [TaskSubmitted(task_id="b", at=START - 1, kind="k", version=1, phase="p")], [1]
        )
    assert "stamped later" in str(caught.value)
    assert behind.head() == head  # nothing appended
    behind.append([TaskSubmitted(task_id="b", at=START, kind="k", version=1, phase="p")], [1])
    ahead.close()
    behind.close()


def test_a_scheduler_that_lost_the_time_race_decides_again(store_url: str) -> None:
    """Writer B decided at its (earlier) time; writer A, clock ahead, appended between
    B's decision and B's append. B's append is refused and B decides again, later."""
    a_clock, b_clock = ManualClock(START + 5_000), ManualClock(START)
    a = Scheduler.open(store_url, clock=a_clock, worker="a")
    b = Scheduler.open(store_url, clock=b_clock, worker="b")
    real_append = b.store.append
    raced = []

    def append_after_a(*args: object, **kwargs: object) -> list[int]:
        if not raced:
            raced.append(True)
            a.submit("job", phase="p", id="from-a")
        return real_append(*args, **kwargs)  # type: ignore[arg-type]

    b.store.append = append_after_a  # type: ignore[method-assign]
    b.submit("job", phase="p", id="from-b")
    assert raced and b.task("from-b").submitted_at == START + 5_000
    a.close()
    b.close()
    ats = _ats(store_url)
    assert ats == sorted(ats)


moves = st.lists(st.integers(min_value=-5_000, max_value=5_000), min_size=1, max_size=30)


@given(moves=moves)
def test_replay_until_a_time_is_a_prefix_of_the_log(moves: list[int], tmp_path_factory) -> None:
    path = tmp_path_factory.mktemp("order") / "s.db"
    clock = WallClock(START)
    s = Scheduler.open(path, clock=clock)
    for n, move in enumerate(moves):
        clock.set(max(0, clock.now + move))
        s.submit("job", phase="p", id=f"t{n}")
    s.close()
    with open_store(path, read_only=True) as store:
        stamped = [(r.position, r.event.at) for r in store.read()]
    assert [at for _, at in stamped] == sorted(at for _, at in stamped)
    for _, at in stamped:
        prefix = [position for position, stamp in stamped if stamp <= at]
        assert prefix == list(range(1, len(prefix) + 1))  # a prefix of positions
        assert replay(path, until=float(at)) == replay(path, until=prefix[-1])  # a time


def test_cli_replay_until_a_time_after_the_clock_ran_backwards(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    clock = WallClock(START + 10_000)
    s = Scheduler.open(tmp_path / "s.db", clock=clock)
    s.submit("job", phase="p", id="late")
    clock.set(START)
    s.submit("job", phase="p", id="early-by-the-clock")
    s.close()
    before = folder_state(tmp_path)
    ran = run(["replay", str(tmp_path / "s.db"), "--until", "2026-01-05T09:00:05Z"], capsys)
    assert ran.code == 0 and "as of position 0 (0 events)" in ran.out
    ran = run(["replay", str(tmp_path / "s.db"), "--until", "2026-01-05T09:00:10Z"], capsys)
    assert ran.code == 0 and "as of position 2 (2 events): 2 tasks" in ran.out
    ran = run(["replay", str(tmp_path / "s.db"), "--until", "soon"], capsys)
    assert ran.code == 2 and "--until: until 'soon' is neither a position" in ran.err
    assert folder_state(tmp_path) == before
