"""The console's follower (issue 46): the store folded read-only and kept current; no
event appended while it looks is ever passed over."""

from __future__ import annotations

from typing import Any

from helpers.console_server import small_store
from helpers.retention_world import opened, record

from tasktrail.domain import ManualClock, Scheduler
from tasktrail.replay import replay
from tasktrail.replay.console.model.follow import Follower, Notice


def caught_up(follower: Follower) -> None:
    while follower.catch_up():
        pass


def test_the_follower_folds_what_replay_folds(store_url: str) -> None:
    small_store(store_url)
    follower = Follower(store_url)
    try:
        caught_up(follower)
        assert follower.world.tasks == replay(store_url).world.tasks
        assert follower.extras.order[:3] == ["tree-1", "job-ok", "job-bad"]
        assert follower.extras.children["tree-1"] == ["job-ok", "job-bad"]
        assert follower.extras.actors == {"tree-1": {"carol"}, "job-stuck": {"dave"}}
    finally:
        follower.close()


def test_an_event_appended_while_the_follower_looks_is_folded(store_url: str) -> None:
    """An append that commits between the follower's look at the head and its read (or
    its read and its look) is folded at once or at the next look, never passed over as a
    gap in the positions."""
    small_store(store_url)
    follower = Follower(store_url)
    heard: list[Notice] = []
    try:
        caught_up(follower)
        follower.subscribe(heard.extend)
        with Scheduler.open(store_url, worker="other") as other:
            looked = follower.store.head

            def head_meanwhile() -> int:
                if "meanwhile" not in follower.world.tasks and not other.events_written:
                    other.submit("job", id="meanwhile", phase="run")
                return looked()

            follower.store.head = head_meanwhile  # type: ignore[method-assign]
            caught_up(follower)
            follower.store.head = looked  # type: ignore[method-assign]
            caught_up(follower)
        assert "meanwhile" in follower.world.tasks
        assert [(n.task_id, n.type) for n in heard] == [("meanwhile", "TaskSubmitted")]
    finally:
        follower.close()


def test_a_stopping_server_ends_every_stream(sqlite_url: str) -> None:
    small_store(sqlite_url)
    follower = Follower(sqlite_url)
    told: list[list[Any]] = []
    follower.subscribe(told.append)
    follower.hang_up()
    follower.close()
    assert told == [[]]


def test_a_tree_erased_while_the_console_follows_leaves_its_fold(
    store_url: str, clock: ManualClock
) -> None:
    """The console folded a tree's values before another process erased it: once it
    folds the erasure its world holds the tree as a fresh fold of the store would (the
    values gone, from its tasks and their other streams), while another tree keeps its."""
    s = opened(store_url, clock)
    trees = record(s, clock, trees=2, secret="f0rget")
    follower = Follower(store_url)
    try:
        caught_up(follower)
        assert "f0rget-result-0" in repr(follower.world.tasks)
        erased = trees.finished[0]
        search = follower.extras.words
        search[erased] = "held before"
        s.erase(erased, actor="dpo", reason="request 11")
        caught_up(follower)
        held = repr((follower.world.tasks, follower.world.streams))
        assert "f0rget-result-1" in held  # the other tree's values stay
        tails = ("", "-memo", "-message", "-err", "-result")
        assert not any(f"f0rget{tail}-0" in held for tail in tails)
        fresh = replay(store_url, snapshots=False).world
        assert follower.world.tasks == fresh.tasks
        assert erased not in search
    finally:
        follower.close()
        s.close()
