"""How many times a command waits for PostgreSQL: counted from libpq's protocol trace
(``benchmarks.postgres.RoundTrips``), a bound, never a time."""

from __future__ import annotations

import dataclasses
import importlib
import sys
import time
from pathlib import Path
from types import ModuleType

import pytest

from tasktrail.domain import ConflictError, ManualClock, Registry, Scheduler, open_store
from tasktrail.domain.store import news as news_module

pytestmark = pytest.mark.postgres

ROOT = Path(__file__).resolve().parents[1]
SUBMIT_ROUND_TRIPS = 3
"""The refresh SELECT, the one read that tells a new id from a dropped task's, and the
append (BEGIN, lock, guards, INSERT and COMMIT in one pipeline): raw psycopg takes 3 for
an INSERT and its COMMIT (BEGIN, INSERT, COMMIT)."""
GENERATED_ID_ROUND_TRIPS = 2
"""A submit that lets the scheduler draw the id skips the read: no store holds it."""


def _bench() -> ModuleType:
    if str(ROOT) not in sys.path:  # the package lives beside domain/, not in tasktrail
        sys.path.insert(0, str(ROOT))
    return importlib.import_module("benchmarks.postgres")


def test_a_submit_takes_at_most_three_round_trips(postgres_url: str) -> None:
    bench = _bench()
    with open_store(postgres_url) as store:
        scheduler = Scheduler(store, worker="a", clock=ManualClock(1_000_000))
        for n in range(12):  # the lease table; each pooled connection prepares its statements
            scheduler.submit("job", phase="start", id=f"warm-{n}")
        with bench.counting(store) as trips:
            scheduler.submit("job", phase="start", id="counted")
        assert 1 <= trips.count() <= SUBMIT_ROUND_TRIPS
        scheduler.close()


def test_a_submit_with_a_generated_id_takes_two(postgres_url: str) -> None:
    bench = _bench()
    with open_store(postgres_url) as store:
        scheduler = Scheduler(store, worker="a", clock=ManualClock(1_000_000))
        for _ in range(12):  # each pooled connection prepares its statements
            scheduler.submit("job", phase="start")
        with bench.counting(store) as trips:
            task_id = scheduler.submit("job", phase="start")
        assert 1 <= trips.count() <= GENERATED_ID_ROUND_TRIPS
        assert scheduler.task(task_id).status == "pending"
        assert [e.task_id for e in store.stream(task_id)] == [task_id]
        scheduler.close()


def test_after_another_writer_a_submit_still_takes_three(postgres_url: str) -> None:
    bench = _bench()
    with open_store(postgres_url) as store, open_store(postgres_url) as other_store:
        clock = ManualClock(1_000_000)
        scheduler = Scheduler(store, worker="a", clock=clock)
        other = Scheduler(other_store, worker="b", clock=clock)
        for n in range(12):  # each pooled connection prepares its statements
            scheduler.submit("job", phase="start", id=f"first-{n}")
        other.submit("job", phase="start", id="theirs")
        with bench.counting(store) as trips:
            scheduler.submit("job", phase="start", id="mine")
        assert trips.count() <= SUBMIT_ROUND_TRIPS
        assert scheduler.world.get("theirs") is not None  # the refresh read it
        scheduler.close()
        other.close()


def test_a_writer_overtaken_before_its_append_reads_nothing_more(postgres_url: str) -> None:
    """Another writer appends between this one's refresh and its append: the append
    brings those rows back, and this writer folds them and its own in log order
    (issue 28 item 4) without another round trip."""
    bench = _bench()
    with open_store(postgres_url) as store, open_store(postgres_url) as other_store:
        clock = ManualClock(1_000_000)
        scheduler = Scheduler(store, worker="a", clock=clock)
        other = Scheduler(other_store, worker="b", clock=clock)
        for n in range(12):  # each pooled connection prepares its statements
            scheduler.submit("job", phase="start", id=f"first-{n}")
        append = store.append

        def overtaken(*args: object, **kwargs: object) -> list[int]:
            other.submit("job", phase="start", id="theirs")
            return append(*args, **kwargs)  # type: ignore[arg-type]

        store.append = overtaken  # type: ignore[method-assign]
        with bench.counting(store) as trips:
            scheduler.submit("job", phase="start")
        store.append = append  # type: ignore[method-assign]
        assert trips.count() <= GENERATED_ID_ROUND_TRIPS
        assert scheduler.world.get("theirs") is not None  # folded from what came back
        assert scheduler.position == store.head()
        scheduler.close()
        other.close()


def test_a_refused_append_leaves_the_connection_usable(postgres_url: str) -> None:
    with open_store(postgres_url) as store:
        scheduler = Scheduler(store, worker="a", clock=ManualClock(1_000_000))
        scheduler.submit("job", phase="start", id="t")
        scheduler.submit("job", phase="start", id="u")
        first = store.stream("t")[0]
        for _ in range(6):  # more than the pool holds: every connection is refused once
            with pytest.raises(ConflictError):
                store.append([first], [1])  # version 1 of "t" is taken
            with pytest.raises(ConflictError):
                # A read guard: the decision read "u" at version 0; it is at 1 now.
                store.append([dataclasses.replace(first, task_id="v")], [1], guards={"u": 0})
        assert store.stream("v") == []
        for n in range(6):  # every connection of the pool was rolled back: appends work
            scheduler.submit("job", phase="start", id=f"after-{n}")
            assert store.stream(f"after-{n}")
        scheduler.close()


def test_the_benchmark_runs_and_counts(postgres_url: str) -> None:
    bench = _bench()
    url = postgres_url.split("?", 1)[0]
    figures = bench.run(url, commands=10, rounds=1)
    assert figures["tasktrail_per_s"][0] > 0 and figures["raw_per_s"][0] > 0
    assert 1 <= figures["round_trips_tasktrail"] <= GENERATED_ID_ROUND_TRIPS
    assert 1 <= figures["round_trips_chosen_ids"] <= SUBMIT_ROUND_TRIPS
    assert figures["round_trips_raw"] >= 1


def _refusals_hold(store: object, scheduler: Scheduler) -> None:
    """A taken version, a read guard and the time guard each refuse an append whole."""
    from tasktrail.domain import ClockConflict

    scheduler.submit("job", phase="start", id="t")
    scheduler.submit("job", phase="start", id="u")
    first = store.stream("t")[0]  # type: ignore[attr-defined]
    with pytest.raises(ConflictError):
        store.append([first], [1])  # type: ignore[attr-defined]
    with pytest.raises(ConflictError):
        store.append(  # type: ignore[attr-defined]
            [dataclasses.replace(first, task_id="v")], [1], guards={"u": 0}
        )
    with pytest.raises(ClockConflict):  # stamped before the event of "t" it read
        store.append(  # type: ignore[attr-defined]
            [dataclasses.replace(first, task_id="w", at=first.at - 1_000)], [1], guards={"t": 1}
        )
    assert store.stream("v") == [] and store.stream("w") == []  # type: ignore[attr-defined]
    assert [e.task_id for e in store.stream("t")] == ["t"]  # type: ignore[attr-defined]


def test_an_append_is_one_call_of_the_store_function(postgres_url: str) -> None:
    with open_store(postgres_url) as store:
        recorder = store.app.recorder

        def no_pipeline(*args: object) -> None:
            raise AssertionError("appended through the pipeline, not the function")

        recorder._insert_in_pipeline = no_pipeline
        scheduler = Scheduler(store, worker="a", clock=ManualClock(1_000_000))
        _refusals_hold(store, scheduler)
        assert recorder._has_function
        scheduler.close()


def test_a_store_without_the_function_appends_through_the_pipeline(postgres_url: str) -> None:
    """Tables an earlier release made, opened by a writer that created nothing."""
    with open_store(postgres_url) as store:
        recorder = store.app.recorder
        with recorder.datastore.get_connection() as conn:
            schema = recorder.datastore.schema
            conn.execute(f'DROP FUNCTION "{schema}"."{recorder.append_function}"')
        scheduler = Scheduler(store, worker="a", clock=ManualClock(1_000_000))
        _refusals_hold(store, scheduler)
        assert not recorder._has_function
        scheduler.close()


def test_a_page_of_rows_is_what_eventsourcing_selects(postgres_url: str) -> None:
    """``select_rows`` (a refresh, a replay's pages) returns the rows eventsourcing's
    ``select_notifications`` does, from any start, to any stop, within any limit."""
    with open_store(postgres_url) as store:
        scheduler = Scheduler(store, worker="a", clock=ManualClock(1_000_000))
        for n in range(7):
            scheduler.submit("job", phase="start", id=f"t-{n}")
        recorder = store.app.recorder
        for start, limit, stop in [(1, 100, None), (3, 2, None), (2, 100, 5), (9, 10, None)]:
            expected = [
                (n.id, n.originator_id, n.originator_version, n.topic, n.state)
                for n in recorder.select_notifications(start=start, limit=limit, stop=stop)
            ]
            assert recorder.select_rows(start, limit, stop) == expected
        assert [r.position for r in store.read(after=2, until=5)] == [3, 4, 5]
        scheduler.close()


QUIET_AFTER_S = 0.2
"""Shorter than the store's (1 s), for a quick test."""


def _listening(scheduler: Scheduler) -> None:
    news = scheduler.store.news
    news.wait(news.generation, 0.01)  # the listener starts with the first waiter
    deadline = time.monotonic() + 5
    while not news.listening and time.monotonic() < deadline:
        time.sleep(0.01)
    assert news.listening


def _quiet_look(bench: ModuleType, scheduler: Scheduler) -> tuple[int, list[str]]:
    """The round trips and result of a first look made when no news came since the look
    before it began, nor for QUIET_AFTER_S before it. (The listener hears every store
    of the server: other tests' too.)"""
    news = scheduler.store.news
    for _ in range(50):
        before = news.foreign
        time.sleep(QUIET_AFTER_S * 1.5)
        scheduler.runnable()
        with bench.counting(scheduler.store) as trips:
            runnable = scheduler.runnable()
        if news.foreign == before:
            return trips.count(), runnable
    pytest.skip("other appends on this server never paused for two looks")


def test_a_first_look_reads_the_server_only_after_another_writers_append_is_heard(
    postgres_url: str, registry: Registry, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With the store's listener connected, every other writer's append is heard: a
    worker's first look at what can run (and a group's decisions) reads the log only
    when one was, not at each look (a round trip a group, a fifth of a busy worker's
    CPU). This store's own appends are folded as they are made."""
    monkeypatch.setattr(news_module, "QUIET_AFTER_S", QUIET_AFTER_S)
    bench = _bench()
    with Scheduler.open(postgres_url, worker="a", registry=registry) as mine:
        _listening(mine)
        assert _quiet_look(bench, mine) == (0, [])
        own = mine.submit("job", phase="start")
        assert _quiet_look(bench, mine) == (0, [own])
        with Scheduler.open(postgres_url, worker="b", registry=registry) as other:
            heard = mine.store.news.foreign
            theirs = other.submit("job", phase="start")
            deadline = time.monotonic() + 5
            while mine.store.news.foreign == heard and time.monotonic() < deadline:
                time.sleep(0.01)
        with bench.counting(mine.store) as trips:
            assert mine.runnable() == [own, theirs]
        assert trips.count() >= 1
