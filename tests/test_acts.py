"""Every operator act records who did it and why: ``actor=`` and ``reason=`` on submit,
abort, retry, fork and the configure calls, kept on the events as ``actor`` / ``why``
(``None`` when not given, and in every event recorded before they were kept)."""

from __future__ import annotations

import shutil
from pathlib import Path

import orjson
import pytest
from conftest import crash, event_count, reopen
from fixtures.make_first_release import STORE

from tasktrail.domain import (
    InvalidArgument,
    ManualClock,
    Registry,
    RunSettings,
    Scheduler,
    open_store,
)
from tasktrail.domain.store.wire import fast_decode
from tasktrail.domain.tasks.fields import MAX_NAME_BYTES
from tasktrail.projections import Projector, ReadModel
from tasktrail.replay.explain import explain


def _last(scheduler: Scheduler, stream: str) -> object:
    return scheduler.store.stream(stream)[-1]


def test_each_library_act_records_its_actor_and_reason(
    store_url: str, clock: ManualClock, registry: Registry
) -> None:
    s = Scheduler.open(store_url, clock=clock, registry=registry, worker="w")
    task = s.submit("job", actor="alice", reason="nightly backfill")
    submitted = s.history(task)[0]
    assert (submitted.actor, submitted.why) == ("alice", "nightly backfill")  # type: ignore[attr-defined]
    assert s.abort(task, actor="bob", reason="stuck since 09:00")
    marked = s.history(task)[-1]
    assert (marked.actor, marked.why) == ("bob", "stuck since 09:00")  # type: ignore[attr-defined]
    s.configure_restarts(5, actor="carol", reason="flaky network")
    limit = _last(s, "settings:restarts")
    assert (limit.actor, limit.why) == ("carol", "flaky network")  # type: ignore[attr-defined]
    s.configure_turns(stall_window_ms=9_000, actor="dan", reason="slow model")
    turns = _last(s, "settings:turns")
    assert (turns.actor, turns.why, turns.stall_window_ms) == ("dan", "slow model", 9_000)  # type: ignore[attr-defined]
    s.configure_runs(settings=RunSettings(runs_per_day=4), actor="erin", reason="quota")
    runs = _last(s, "settings:runs")
    assert (runs.actor, runs.why, runs.runs_per_day) == ("erin", "quota", 4)  # type: ignore[attr-defined]
    s.close()


def test_retry_records_its_actor_and_reason(
    sqlite_url: str, clock: ManualClock, registry: Registry
) -> None:
    s = reopen(sqlite_url, clock, registry, limit=1)
    task = s.submit("job", phase="start")
    s.reserve(task)
    crash(s)
    s = reopen(sqlite_url, clock, registry, limit=1)  # recovered: parked at limit 1
    assert s.retry(task, actor="fay", reason="fixed the disk")
    cleared = s.history(task)[-1]
    assert type(cleared).__name__ == "RestartsCleared"
    assert (cleared.actor, cleared.why) == ("fay", "fixed the disk")  # type: ignore[attr-defined]
    s.close()


def test_acts_without_actor_record_none_and_rules_record_none(scheduler: Scheduler) -> None:
    owner = scheduler.submit("job", phase="start")
    child = scheduler.submit("leaf", owner=owner)
    scheduler.abort(owner, actor="gus", reason="cancel the tree")
    assert scheduler.history(owner)[0].actor is None  # type: ignore[attr-defined]
    cascade = scheduler.history(child)[-1]
    assert cascade.rule == 6 and cascade.actor is None  # the act is on the owner's mark  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("actor", "reason", "words"),
    [
        ("", None, "actor must be a non-empty string"),
        (42, None, "actor must be a non-empty string"),
        ("x" * (MAX_NAME_BYTES + 1), None, "actor is 257 bytes"),
        ("a\x00b", None, "actor holds a NUL"),
        ("ok", "  ", "reason must be a non-empty string"),
        ("ok", "r" * (64 * 1024 + 1), "reason is 65537 bytes"),
    ],
)
def test_a_bad_actor_or_reason_is_refused_and_appends_nothing(
    scheduler: Scheduler, actor: object, reason: object, words: str
) -> None:
    task = scheduler.submit("job", phase="start")
    before = event_count(scheduler.store)
    for act in (
        lambda: scheduler.submit("job", actor=actor, reason=reason),  # type: ignore[arg-type]
        lambda: scheduler.abort(task, actor=actor, reason=reason),  # type: ignore[arg-type]
        lambda: scheduler.retry(task, actor=actor, reason=reason),  # type: ignore[arg-type]
        lambda: scheduler.fork(task, actor=actor, reason=reason),  # type: ignore[arg-type]
        lambda: scheduler.configure_restarts(7, actor=actor, reason=reason),  # type: ignore[arg-type]
    ):
        with pytest.raises(InvalidArgument, match=words):
            act()
    assert event_count(scheduler.store) == before


def test_explain_and_the_audit_read_model_show_actor_and_reason(
    scheduler: Scheduler, tmp_path: Path
) -> None:
    task = scheduler.submit("job", phase="start", actor="hana")
    scheduler.abort(task, actor="ivan", reason="wrong input")
    steps = explain(scheduler.store, task)
    assert [(s.actor, s.reason) for s in steps] == [("hana", None), ("ivan", "wrong input")]
    assert str(steps[1]).endswith("abort() by ivan: wrong input")
    assert steps[1].to_dict()["actor"] == "ivan"
    with Projector(scheduler.store, tmp_path / "views.db") as projector:
        projector.catch_up()
        rows = ReadModel(projector).audit(task)
    assert [(r["actor"], r["reason"]) for r in rows] == [("hana", None), ("ivan", "wrong input")]
    assert "actor" not in rows[1]["detail"]  # a column of its own, not repeated


def test_a_first_release_log_reads_with_no_actor(tmp_path: Path) -> None:
    copy = tmp_path / "old.db"
    shutil.copy(STORE, copy)
    with open_store(copy, read_only=True) as store:
        events = [r.event for r in store.read()]
    acts = [e for e in events if hasattr(e, "actor")]
    assert acts and all(e.actor is None and e.why is None for e in acts)  # type: ignore[attr-defined]
    submitted = [e for e in events if type(e).__name__ == "TaskSubmitted"]
    assert all(e.memos is None and e.attempt is None for e in submitted)  # type: ignore[attr-defined]


def test_an_older_submission_without_the_new_fields_takes_the_fast_reader() -> None:
    # The second release's TaskSubmitted (class_version 2, before memos and acts).
    state = orjson.dumps(
        {"at": 1, "kind": "k", "version": 1, "phase": "p", "owner_id": None,
         "conversation_id": None, "project_ids": [], "trace": None,
         "abandon_on_restart": False, "priority": 0, "class_version": 2}
    )  # fmt: skip
    event = fast_decode("tasktrail.TaskSubmitted", "t1", state)
    assert event is not None
    assert (event.memos, event.attempt, event.actor, event.why) == (None, None, None, None)  # type: ignore[attr-defined]


def test_the_acts_canned_query_lists_who_did_what_and_forks(
    scheduler: Scheduler, tmp_path: Path
) -> None:
    import json
    import sqlite3

    from tasktrail.projections.datasette import METADATA_FILE

    task = scheduler.submit("job", phase="start", actor="ana", reason="by hand")
    fork = scheduler.fork(task, actor="ben", reason="again")
    scheduler.submit("leaf")  # no actor: not an act anyone named
    with Projector(scheduler.store, tmp_path / "views.db") as projector:
        projector.catch_up()
    metadata = json.loads(METADATA_FILE.read_text())
    sql = metadata["databases"]["tasktrail-demo-views"]["queries"]["acts"]["sql"]
    with sqlite3.connect(tmp_path / "views.db") as conn:
        rows = conn.execute(sql).fetchall()
    assert [(r[2], r[3], r[4], r[5], r[6]) for r in rows] == [
        ("fork", fork, "ben", "again", task),  # said submit before issue 40 (item 5)
        ("submit", task, "ana", "by hand", None),
    ]
