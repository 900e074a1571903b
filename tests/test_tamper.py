"""Issue 17, item 7: tamper evidence. Each event carries a digest chained to the
previous event of its stream; ``verify`` reports an edited, removed, reordered or
forged event with its position; exports record the stream heads, which
``verify --against`` holds a store to later; events recorded before the chain
verify as unchained, not as errors.
"""

from __future__ import annotations

import shutil
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pytest
from fixtures.make_first_release import STORE as FIRST_RELEASE
from helpers.cli import folder_state, run

from tasktrail.domain import ManualClock, Registry, Scheduler, TaskDefinition, open_store
from tasktrail.domain.store.chain import digest, seal, unseal
from tasktrail.replay import export, import_log, verify


def _registry() -> Registry:
    def cleanup(inv: Any) -> None:
        inv.finish("aborted", reason="operator")

    return Registry(
        [
            TaskDefinition(
                "job",
                1,
                {"a": lambda inv: "b", "b": lambda inv: inv.finish("completed")},
                abort=cleanup,
            )
        ]
    )


def _workload(location: str) -> None:
    s = Scheduler.open(location, clock=ManualClock(1_767_603_600_000), registry=_registry())
    for n in range(4):
        s.submit("job", id=f"job-{n}")
    s.abort("job-2")
    s.run_until_idle()
    s.close()


class Rows:
    """The raw rows of a store, SQLite or PostgreSQL: read, rewrite, delete, insert."""

    def __init__(self, location: str) -> None:
        self.location = location
        self.postgres = location.startswith("postgresql://")

    def _sql(self, statement: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        if self.postgres:
            import psycopg

            dsn, schema = self.location.split("?schema=")
            with psycopg.connect(dsn, autocommit=True) as conn:
                conn.execute(f'SET search_path TO "{schema}"')
                statement = statement.replace("?", "%s").replace("rowid", "notification_id")
                statement = statement.replace("stored_events", "tasktrail_events")
                cursor = conn.execute(statement, params)
                return [tuple(r) for r in cursor.fetchall()] if cursor.description else []
        with sqlite3.connect(self.location) as conn:
            rows = conn.execute(statement, params).fetchall()
        conn.close()
        return rows

    def all(self) -> list[tuple[int, str, int, str, bytes]]:
        return [
            (p, o, v, t, bytes(s))
            for p, o, v, t, s in self._sql(
                "SELECT rowid, originator_id, originator_version, topic, state "
                "FROM stored_events ORDER BY rowid"
            )
        ]

    def find(self, topic: str, contains: bytes) -> tuple[int, str, int, str, bytes]:
        return next(r for r in self.all() if r[3] == topic and contains in r[4])

    def set_state(self, position: int, state: bytes, topic: str | None = None) -> None:
        self._sql("UPDATE stored_events SET state = ? WHERE rowid = ?", (state, position))
        if topic is not None:
            self._sql("UPDATE stored_events SET topic = ? WHERE rowid = ?", (topic, position))

    def delete(self, position: int) -> None:
        self._sql("DELETE FROM stored_events WHERE rowid = ?", (position,))

    def insert(self, stream: str, version: int, topic: str, state: bytes) -> None:
        self._sql(
            "INSERT INTO stored_events (originator_id, originator_version, topic, state) "
            "VALUES (?, ?, ?, ?)",
            (stream, version, topic, state),
        )

    def last_position(self) -> int:
        return self.all()[-1][0]


def _chain_violations(location: str) -> list[tuple[str, tuple[int, ...]]]:
    return [(v.message, v.positions) for v in verify(location).violations if v.check == "chain"]


@pytest.fixture
def trail(store_url: str) -> tuple[str, Rows]:
    _workload(store_url)
    report = verify(store_url)
    assert report.ok and report.chain is not None
    assert report.chain.chained == report.events and report.chain.unchained == 0
    return store_url, Rows(store_url)


def test_an_aborted_end_edited_to_completed_is_reported_at_its_position(
    trail: tuple[str, Rows],
) -> None:
    location, rows = trail
    position, _, _, _, state = rows.find("tasktrail.TaskEnded", b'"aborted"')
    rows.set_state(position, state.replace(b'"aborted"', b'"completed"'))
    found = _chain_violations(location)
    assert len(found) == 1 and found[0][1] == (position,)
    assert "does not match its digest" in found[0][0]


def test_a_submission_copied_under_a_new_id_is_reported(trail: tuple[str, Rows]) -> None:
    location, rows = trail
    _, _, _, topic, state = rows.find("tasktrail.TaskSubmitted", b'"job"')
    rows.insert("job-forged", 1, topic, state)
    found = _chain_violations(location)
    assert [positions for _, positions in found] == [(rows.last_position(),)]
    assert "copied from another stream" in found[0][0]


def test_a_removed_event_is_reported(trail: tuple[str, Rows]) -> None:
    location, rows = trail
    stream = [r for r in rows.all() if r[1] == "job-1"]
    rows.delete(stream[1][0])
    messages = [m for m, _ in _chain_violations(location)]
    assert any("jumps from version 1 to 3: version 2 removed" in m for m in messages)
    if not rows.postgres:  # SQLite's positions have no gaps of their own
        assert any(f"position {stream[1][0]} is missing" in m for m in messages)


def test_reordered_events_are_reported(trail: tuple[str, Rows]) -> None:
    location, rows = trail
    first, second = [r for r in rows.all() if r[1] == "job-0"][1:3]
    rows.set_state(first[0], second[4], second[3])  # each event in the other's place
    rows.set_state(second[0], first[4], first[3])
    found = {positions for _, positions in _chain_violations(location)}
    # Both moved events, and where the stream's chain resumes after them.
    assert {(first[0],), (second[0],)} <= found
    assert len(found) <= 3


def test_a_forged_event_and_a_stripped_digest_are_reported(trail: tuple[str, Rows]) -> None:
    location, rows = trail
    position, stream, version, _, state = rows.all()[-1]
    payload, _ = unseal(state)
    rows.insert(stream, version + 1, "tasktrail.CheckpointCommitted", b'{"at":1,"phase":"x"}')
    rows.set_state(position, payload)  # the digest taken off: it reads as "unchained"
    found = _chain_violations(location)
    assert {positions for _, positions in found} == {(position,), (rows.last_position(),)}
    assert all("carries no digest" in message for message, _ in found)


def test_a_stream_rewritten_digests_and_all_is_caught_by_an_earlier_export(
    trail: tuple[str, Rows], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    location, rows = trail
    kept = tmp_path / "monday.jsonl"
    export(location, kept)
    # Someone who knows the scheme rewrites job-3's end and recomputes its digests.
    stream = [r for r in rows.all() if r[1] == "job-3"]
    previous = unseal(stream[-2][4])[1] or ""
    position, _, version, topic, state = stream[-1]
    payload = unseal(state)[0].replace(b'"completed"', b'"failed"')
    rows.set_state(position, seal(payload, digest(previous, "job-3", version, topic, payload)))
    assert _chain_violations(location) == []  # the chain alone cannot see it
    ran = run(["verify", location, "--against", str(kept)], capsys)
    assert ran.code == 1 and "another digest than the head recorded earlier" in ran.out
    assert f"(positions {position})" in ran.out
    # And the events removed from a stream's end, against the same export.
    rows.delete(position)
    ran = run(["verify", location, "--against", str(kept)], capsys)
    assert ran.code == 1 and "which the log no longer holds: events removed" in ran.out


def test_exports_record_the_heads_and_an_edited_export_shows(
    trail: tuple[str, Rows], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    location, rows = trail
    out = tmp_path / "trail.jsonl"
    count = export(location, out)
    lines = out.read_bytes().splitlines(keepends=True)
    heads, sealed = orjson.loads(lines[-2]), orjson.loads(lines[-1])
    assert list(heads) == ["heads", "events", "chained_after"] and heads["events"] == count
    assert sealed["seal"] == 1 and sealed["count"] == count  # the seal of its position
    assert heads["heads"]["job-1"][0] == max(r[2] for r in rows.all() if r[1] == "job-1")
    assert verify(out).ok and import_log(out, tmp_path / "copy.db") == count
    assert verify(str(tmp_path / "copy.db")).ok  # the chain travels with the events
    # An event line removed from the export: its heads line no longer agrees.
    before = folder_state(tmp_path)
    edited = tmp_path / "edited.jsonl"
    edited.write_bytes(b"".join(lines[:5] + lines[6:]))
    ran = run(["verify", str(edited)], capsys)
    assert ran.code == 1 and "lines added or removed" in ran.out
    assert folder_state(tmp_path) == {**before, **folder_state(tmp_path)}


def test_events_recorded_before_the_chain_verify_as_unchained(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    old = tmp_path / "first-release.db"
    shutil.copy(FIRST_RELEASE, old)
    report = verify(str(old))
    assert report.ok and report.chain is not None
    assert report.chain.unchained == report.events and report.chain.chained == 0
    ran = run(["verify", str(old)], capsys)
    assert ran.code == 0 and f"0 events chained, {report.events} unchained" in ran.out
    # Opened by this release: recovery appends chained events after the old ones.
    Scheduler.open(old, clock=ManualClock(1_767_700_000_000), restart_limit=3).close()
    report = verify(str(old))
    assert report.ok and report.chain is not None and report.chain.chained > 0
    with open_store(old, read_only=True) as store:
        assert store.chained_after == report.chain.unchained


@pytest.mark.parametrize(
    "tamper",
    ["edit", "copy", "remove", "strip"],
)
def test_cli_verify_reports_tampering_with_exit_1_and_changes_nothing(
    tamper: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    location = str(tmp_path / "t.db")
    _workload(location)
    rows = Rows(location)
    edits: dict[str, Callable[[], int]] = {
        "edit": lambda: _edit(rows),
        "copy": lambda: _copy(rows),
        "remove": lambda: _remove(rows),
        "strip": lambda: _strip(rows),
    }
    position = edits[tamper]()
    before = folder_state(tmp_path)
    ran = run(["verify", location], capsys)
    assert ran.code == 1 and "chain: stream " in ran.out and f"{position}" in ran.out, ran.out
    ran = run(["verify", location, "--json"], capsys)
    report = orjson.loads(ran.out)
    assert ran.code == 1 and any(v["check"] == "chain" for v in report["violations"])
    assert folder_state(tmp_path) == before


def _edit(rows: Rows) -> int:
    position, _, _, _, state = rows.find("tasktrail.TaskEnded", b'"aborted"')
    rows.set_state(position, state.replace(b'"aborted"', b'"completed"'))
    return position


def _copy(rows: Rows) -> int:
    _, _, _, topic, state = rows.find("tasktrail.TaskSubmitted", b'"job"')
    rows.insert("job-copy", 1, topic, state)
    return rows.last_position()


def _remove(rows: Rows) -> int:
    stream = [r for r in rows.all() if r[1] == "job-0"]
    rows.delete(stream[1][0])
    return stream[1][0]


def _strip(rows: Rows) -> int:
    position, *_, state = rows.all()[3]
    rows.set_state(position, unseal(state)[0])
    return position
