"""Issue 45, items 4 and 6: a retention policy workers keep in small acts, and seals on
their own cadence; rules 38 and 39; on both stores."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers.cli import run
from helpers.retention_world import DAY, opened, record

from tasktrail.domain import InMemoryExecutor, ManualClock, RuleViolation, open_store
from tasktrail.domain.commands.sealing import take_seal
from tasktrail.domain.retention.keeper import BATCH, Keeper
from tasktrail.domain.store.gaps import history_acts
from tasktrail.replay import replay, verify


def kept(keeper: Keeper, steps: int = 200) -> int:
    """Step a keeper until it takes nothing more (its acts)."""
    for _ in range(steps):
        keeper.next_look = 0.0
        if keeper.step() != 0.0:
            break
    return keeper.acts


def test_rule_38_a_policy_that_keeps_less_than_a_minute_is_refused(
    store_url: str, clock: ManualClock
) -> None:
    s = opened(store_url, clock)
    head = s.store.head()
    for days in (0, -1, float("nan"), "soon"):
        with pytest.raises(RuleViolation) as refused:
            s.configure_retention(keep_days=days)  # type: ignore[arg-type]
        assert refused.value.rule == 38
    with pytest.raises(RuleViolation) as refused:
        s.configure_retention(keep_days=30, per_kind={"job": 0})
    assert refused.value.rule == 38 and s.store.head() == head
    s.close()


def test_rule_39_a_seal_cadence_under_a_second_or_an_event_is_refused(
    store_url: str, clock: ManualClock
) -> None:
    s = opened(store_url, clock)
    head = s.store.head()
    for every_s, every_events in ((0.5, None), (None, 0), (float("inf"), None), (True, None)):
        with pytest.raises(RuleViolation) as refused:
            s.configure_seals(every_s=every_s, every_events=every_events)  # type: ignore[arg-type]
        assert refused.value.rule == 39
    assert s.store.head() == head
    s.close()


@pytest.mark.parametrize("to_folder", [True, False], ids=["archive", "prune"])
def test_retention_takes_old_finished_trees_in_small_acts_and_nothing_live(
    store_url: str, clock: ManualClock, tmp_path: Path, to_folder: bool
) -> None:
    s = opened(store_url, clock)
    old = record(s, clock, trees=40)
    s.schedule("beat", "job", cron="* * * * *")
    clock.advance(60_000)
    ticked = s.submit_due_schedules()
    s.configure_runs(executor=InMemoryExecutor())
    runner = s.submit("job", phase="start")
    s.mint_run(runner, trigger="manual")  # an open run, of a task that then ends
    for task in [runner, *ticked]:  # the schedule's latest tick, ended too
        s.reserve(task)
        s.finish(task, "completed")
    seals = tmp_path / "seals.jsonl"
    seals.write_text(take_seal(s.store).to_json() + "\n")
    folder = tmp_path / "archive" if to_folder else None
    s.configure_retention(keep_days=1, per_kind={"other": 30}, archive_to=folder, actor="ops")
    keeper = Keeper(s)
    assert kept(keeper) == 0  # nothing is a day old yet
    clock.advance(2 * DAY)
    fresh = record(s, clock, trees=2)  # ended now: kept
    before = replay(store_url, snapshots=False)
    acts = kept(keeper)
    keeper.close()
    assert acts >= (40 * 9) // BATCH
    # What it took left its scan whole, ids too: a keeper running for years holds what
    # the store keeps, not every tree it ever took.
    for root in old.finished:
        assert root not in keeper.scan._parent and root not in keeper.scan._tasks
    assert fresh.finished[0] in keeper.scan._parent
    with open_store(store_url, read_only=True) as store:
        held = {record.position for record in store.read()}
    assert len(keeper.scan._positions) <= 2 * len(held)  # the rows it took, mostly let go
    with open_store(store_url, read_only=True) as store:
        taken = [a for a in history_acts(store)]
        assert all(act.payload["events"] <= BATCH for act in taken)
        for root in old.finished:
            assert store.stream_records(root) == []
        for task in [*old.live, *old.waiting, *fresh.finished, *ticked, runner]:
            assert store.stream_records(task), task
    topics = {act.topic for act in taken}
    assert topics == {"tasktrail.HistoryArchived" if to_folder else "tasktrail.HistoryPruned"}
    assert verify(store_url, seals=seals).ok
    if folder is not None:
        assert replay(store_url, before.position, archive=folder) == before
    s.close()


def test_seals_on_their_own_appear_at_their_cadence_and_verify(
    store_url: str, clock: ManualClock, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    s = opened(store_url, clock)
    path = tmp_path / "seals.jsonl"
    handed: list[object] = []
    s.configure_seals(every_events=20, to=path)
    s.seal_sink = handed.append
    keeper = Keeper(s, s.seal_sink)
    counts = []
    for _ in range(5):
        record(s, clock, trees=2)  # about 25 events
        keeper.step()
        counts.append(len(path.read_text().splitlines()))
    keeper.step()  # nothing new: no seal
    keeper.close()
    assert counts == [1, 2, 3, 4, 5] and len(handed) == 5
    assert verify(store_url, seals=path).ok
    assert run(["verify", store_url, "--seals", str(path)], capsys).code == 0
    shown = run(["retention", store_url], capsys)
    assert shown.code == 0 and "every None s / 20 events" in shown.out
    s.close()


def test_the_retention_command_says_what_the_policy_would_free(
    store_url: str, clock: ManualClock, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    s = opened(store_url, clock)
    made = record(s, clock, trees=3)
    s.configure_retention(keep_days=1)
    s.close()
    import orjson

    said = orjson.loads(run(["retention", store_url, "--json"], capsys).out)
    assert said["policy"]["keep_days"] == 1.0 and said["would_free"]["trees"] == 0
    assert made.finished  # ended minutes ago, not a day: kept


def test_a_worker_with_seal_to_appends_seals_every_second(sqlite_url: str, tmp_path: Path) -> None:
    from helpers.worker_processes import processes, submit, wait_for

    path = tmp_path / "seals.jsonl"
    with processes(sqlite_url, tmp_path) as fleet:
        child = fleet.worker(
            "w1", phase_s=0.0, options=("--seal-to", str(path), "--seal-every", "1")
        )
        submit(sqlite_url, "sync", 3)
        wait_for(lambda: path.exists() and len(path.read_text().splitlines()) >= 1, 30, child)
        submit(sqlite_url, "sync", 3)
        wait_for(lambda: len(path.read_text().splitlines()) >= 2, 30, child)
    assert verify(sqlite_url, seals=path).ok
