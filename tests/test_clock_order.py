"""Issue 17, item 6, restated by issue 28: decision times never run backwards along a
stream, nor from an event to a decision that read it.

A clock reading behind the latest time the store has read is moved up to it (and
counted); an append stamped earlier than an event its decision depended on (the
previous event of a stream it writes, an event it read) is refused inside the
append's transaction as a :class:`ClockConflict`, which the scheduler decides again on
its own. Another writer's later-stamped event of a stream this decision did not read
is no reason to refuse it, so ``replay --until TIME`` folds every event stamped at or
before TIME, in log order: one writer's log is a prefix.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers.cli import folder_state, run
from hypothesis import given
from hypothesis import strategies as st

from tasktrail.domain import ClockConflict, ManualClock, Scheduler, open_store
from tasktrail.domain.tasks.events import AbortMarked, TaskSubmitted
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


def _submitted(task_id: str, at: float) -> TaskSubmitted:
    return TaskSubmitted(task_id=task_id, at=at, kind="k", version=1, phase="p")


def test_an_append_stamped_before_its_streams_last_event_is_a_clock_conflict(
    store_url: str,
) -> None:
    ahead = open_store(store_url)
    behind = open_store(store_url)
    ahead.append([_submitted("a", START)], [1])
    head = ahead.head()
    marked = AbortMarked(task_id="a", at=START - 1, rule=5)
    with pytest.raises(ClockConflict) as caught:
        behind.append([marked], [2])
    assert "is stamped later" in str(caught.value) and str(START) in str(caught.value)
    assert behind.head() == head  # nothing appended
    assert behind.latest_at == START  # its next decision is stamped no earlier
    behind.append([AbortMarked(task_id="a", at=START, rule=5)], [2])
    ahead.close()
    behind.close()


def test_an_append_stamped_before_an_event_it_read_is_a_clock_conflict(store_url: str) -> None:
    ahead = open_store(store_url)
    behind = open_store(store_url)
    ahead.append([_submitted("read", START)], [1])
    with pytest.raises(ClockConflict):
        behind.append([_submitted("written", START - 1)], [1], guards={"read": 1})
    behind.append([_submitted("written", START)], [1], guards={"read": 1})
    ahead.close()
    behind.close()


def test_a_writer_that_waited_appends_at_its_own_time(store_url: str) -> None:
    """Issue 28: another writer's later-stamped event of another stream, appended while
    this one waited for the lock, is no reason to refuse it: it did not read it."""
    ahead = open_store(store_url)
    behind = open_store(store_url)
    ahead.append([_submitted("a", START)], [1])
    behind.append([_submitted("b", START - 1)], [1])
    assert _ats(store_url) == [START, START - 1]
    ahead.close()
    behind.close()


def test_a_scheduler_that_waited_is_not_refused(store_url: str) -> None:
    """Writer B decided at its (earlier) time; writer A, clock ahead, appended between
    B's decision and B's append. B's decision read nothing A wrote: it is appended as
    decided, and a replay until B's time holds B's task and not A's."""
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
    assert raced and b.task("from-b").submitted_at == START and b.conflicts == 0
    a.close()
    b.close()
    assert set(replay(store_url, until=float(START)).tasks) == {"from-b"}
    assert set(replay(store_url, until=float(START + 5_000)).tasks) == {"from-a", "from-b"}


def test_a_decision_not_clamped_to_what_it_read_is_decided_again(store_url: str) -> None:
    """A stamp that missed the clamp (a process that never read the event its decision
    depends on) is refused inside the append and decided again, later, unseen by the
    caller."""
    a = Scheduler.open(store_url, clock=ManualClock(START + 5_000), worker="a")
    b = Scheduler.open(store_url, clock=ManualClock(START), worker="b")
    a.submit("job", phase="p", id="task")
    stamp = b.store.stamp

    def unclamped_once(reading: float) -> float:
        b.store.stamp = stamp  # type: ignore[method-assign]
        return reading

    b.store.stamp = unclamped_once  # type: ignore[method-assign]
    b.abort("task")
    assert b.conflicts >= 1
    ats = [r.event.at for r in b.store.stream_records("task")]
    assert ats == sorted(ats) and ats[-1] == START + 5_000
    a.close()
    b.close()


def _asked(store: object) -> list[list[tuple[str, int]]]:
    """What the store's time guard is handed to read back, append by append."""
    recorder = store.app.recorder  # type: ignore[attr-defined]
    insert, asked = recorder.insert_events, []

    def recording(rows: object, **kwargs: object) -> object:
        asked.append(list(kwargs["depended"]))  # type: ignore[call-overload]
        return insert(rows, **kwargs)

    recorder.insert_events = recording
    return asked


def test_the_time_guard_reads_back_only_events_the_store_does_not_know(store_url: str) -> None:
    """Issue 43 (a cheaper task): an event this store appended, or a scheduler folded,
    is known stamped no later than the next append: its guard reads nothing back. An
    event it never saw, or one it knows stamped later, is still read and still trips."""
    ahead, behind = open_store(store_url), open_store(store_url)
    asked_ahead, asked_behind = _asked(ahead), _asked(behind)
    ahead.append([_submitted("a", START)], [1])
    ahead.append([AbortMarked(task_id="a", at=START, rule=5)], [2], guards={})
    assert asked_ahead == [[], []]  # its own version 1: known
    with pytest.raises(ClockConflict):  # behind never read version 2: asked, refused
        behind.append([AbortMarked(task_id="a", at=START - 1, rule=5)], [3])
    assert asked_behind == [[("a", 2)]]
    with pytest.raises(ClockConflict):  # known, but stamped later than the append: asked
        ahead.append([AbortMarked(task_id="a", at=START - 1, rule=5)], [3])
    assert asked_ahead[-1] == [("a", 2)]
    ahead.close()
    behind.close()
    # A scheduler that folded another writer's events of a task asks nothing of them.
    writer = Scheduler.open(store_url, clock=ManualClock(START), worker="w")
    reader = Scheduler.open(store_url, clock=ManualClock(START), worker="r")
    writer.submit("job", phase="p", id="folded")
    asked = _asked(reader.store)
    reader.abort("folded")
    assert asked == [[]] and reader.conflicts == 0
    writer.close()
    reader.close()


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
