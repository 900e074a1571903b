"""Old events: a log the first release wrote is upcast when read, and still means
what it meant.

``fixtures/first-release.sqlite`` was recorded by tasktrail's first release (every
task event at ``class_version`` 1; see ``fixtures/README.md``). Since then
``TaskSubmitted`` is at version 2 (it gained ``priority``): reading the old log
runs ``TaskSubmitted.upcast_v1_v2`` on each old submission, and the fold gives
exactly the states recorded with the fixture.
"""

from __future__ import annotations

import contextlib
import shutil
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest
from fixtures.make_first_release import EXPECTED, FIRST_RELEASE_TOPICS, STORE, summarize
from helpers.checks import file_digest, fold, verify_problems, world_problems

from tasktrail.domain import ManualClock, Scheduler, open_store
from tasktrail.domain.errors import NewerEventVersion
from tasktrail.domain.store.transcoder import decode_event
from tasktrail.domain.tasks.events import EVENT_TYPES, TaskSubmitted
from tasktrail.projections import Projector


@pytest.fixture
def old_log(tmp_path: Path) -> Iterator[str]:
    """A copy of the first release's store (opening the original would add -wal files)."""
    before = file_digest([STORE])
    copy = tmp_path / "first-release.db"
    shutil.copy(STORE, copy)
    yield str(copy)
    assert file_digest([STORE]) == before
    assert not STORE.with_name(STORE.name + "-wal").exists()


def _rows(path: str) -> list[tuple[str, str, bytes]]:
    with contextlib.closing(sqlite3.connect(path)) as conn:
        return conn.execute(
            "SELECT originator_id, topic, state FROM stored_events ORDER BY rowid"
        ).fetchall()


def test_the_fixture_is_a_first_release_log(old_log: str) -> None:
    rows = _rows(old_log)
    assert {topic for _, topic, _ in rows} == set(FIRST_RELEASE_TOPICS)
    for _, _, state in rows:
        payload = orjson.loads(state)
        assert "class_version" not in payload and "priority" not in payload


def test_old_submissions_are_upcast_when_read(
    old_log: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert TaskSubmitted.class_version == 2
    calls = []
    upcast = TaskSubmitted.upcast_v1_v2

    def counted(payload: dict[str, object]) -> None:
        calls.append(dict(payload))
        upcast(payload)

    monkeypatch.setattr(TaskSubmitted, "upcast_v1_v2", staticmethod(counted))
    with open_store(old_log) as store:
        events = [r.event for r in store.read()]
    submitted = [e for e in events if isinstance(e, TaskSubmitted)]
    assert len(calls) == len(submitted) == 10
    assert all(e.priority == 0 for e in submitted)
    # An event recorded at the current version is not upcast.
    current = decode_event(
        "tasktrail.TaskSubmitted",
        "t",
        orjson.dumps(
            {"at": 1, "kind": "k", "version": 1, "phase": "p", "priority": 5, "class_version": 2}
        ),
    )
    assert isinstance(current, TaskSubmitted) and current.priority == 5
    assert len(calls) == 10


def test_the_old_log_folds_to_what_it_meant(old_log: str) -> None:
    folded = fold(old_log)
    expected = orjson.loads(EXPECTED.read_bytes())
    assert [summarize(t) for t in folded.world.tasks.values()] == expected
    assert world_problems(folded.world) == []
    violations = verify_problems(old_log)
    assert not violations, violations


def test_opening_the_old_log_recovers_it_and_writes_the_current_version(old_log: str) -> None:
    head = len(_rows(old_log))
    s = Scheduler.open(old_log, clock=ManualClock(1_767_700_000_000), restart_limit=3)
    # The first release's log ended in a crash with "parked" and "legacy" running.
    assert s.task("parked").status == "pending" and s.task("parked").restarts == 1
    assert s.task("legacy").status == "pending" and s.task("legacy").version == 2
    new = s.submit("research", phase="plan", id="after-upgrade")
    s.close()

    rows = _rows(old_log)
    assert len(rows) > head + 1  # recovery, then the new submission
    state = orjson.loads(rows[-1][2])
    assert rows[-1][:2] == (new, "tasktrail.TaskSubmitted")
    assert state["class_version"] == 2 and state["priority"] == 0
    # Old and new rows read back side by side, and the read models agree.
    folded = fold(old_log)
    assert world_problems(folded.world) == []
    with Projector(old_log, Path(old_log).with_suffix(".views.db")) as projector:
        projector.catch_up()
        incremental = projector.table_checksums()
        projector.rebuild()
        assert projector.table_checksums() == incremental


def test_an_event_from_a_newer_version_is_refused_by_name() -> None:
    newer = orjson.dumps({"at": 1, "kind": "k", "version": 1, "phase": "p", "class_version": 9})
    with pytest.raises(NewerEventVersion) as caught:
        decode_event("tasktrail.TaskSubmitted", "t", newer, 42)
    assert caught.value.position == 42 and caught.value.version == 9
    assert "upgrade" in str(caught.value)


def test_every_event_class_upcasts_each_version_it_skipped() -> None:
    for topic, cls in EVENT_TYPES.items():
        for version in range(1, cls.class_version):
            assert callable(getattr(cls, f"upcast_v{version}_v{version + 1}", None)), topic
