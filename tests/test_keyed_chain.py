"""Issue 30, item 1: a keyed chain. With a key, every digest is an HMAC-SHA256 under it;
the store's marker says it is keyed and names the key by an identifier, never the key;
a writer without the key, or with another, is refused; ``verify`` with the key catches
an edit whose digests were recomputed without it (the public scheme), and without the
key says it could not check the keys (its own line and exit code, never "ok").
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest
from helpers.cli import folder_state, run
from helpers.tamper_rows import Tamperer

from tasktrail.domain import (
    ManualClock,
    Registry,
    Scheduler,
    StoreError,
    TaskDefinition,
    open_store,
)
from tasktrail.domain.store.chain import unseal
from tasktrail.domain.store.keys import KEY_ENV, key_id
from tasktrail.replay import export, import_log, verify
from tasktrail.replay.cli.common import EXIT_UNCHECKED

KEY = b"the auditor's chain key"
START = 1_767_603_600_000


def registry() -> Registry:
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


def workload(location: str, key: bytes | None = KEY, tasks: int = 4, name: str = "job") -> None:
    """Tasks run to their end, one of them aborted: a TaskEnded ``aborted`` to edit."""
    s = Scheduler.open(location, clock=ManualClock(START), registry=registry(), chain_key=key)
    for n in range(tasks):
        s.submit("job", id=f"{name}-{n}")
    s.abort(f"{name}-{tasks // 2}")
    s.run_until_idle()
    s.close()


def chain_findings(location: str, key: bytes | None = KEY) -> list[tuple[str, tuple[int, ...]]]:
    report = verify(location, chain_key=key)
    return [(v.message, v.positions) for v in report.violations if v.check == "chain"]


@pytest.fixture
def keyed(store_url: str) -> tuple[str, Tamperer]:
    workload(store_url)
    report = verify(store_url, chain_key=KEY)
    assert report.ok and report.chain is not None and report.chain.chained == report.events
    return store_url, Tamperer(store_url)


def test_a_keyed_store_records_an_identifier_of_its_key_never_the_key(
    keyed: tuple[str, Tamperer],
) -> None:
    location, tamper = keyed
    marker = tamper.marker()
    assert marker["chain_key_id"] == key_id(KEY) and marker["keyed_after"] == "0"
    assert not any(KEY.decode() in value for value in marker.values())
    assert all(KEY not in row[4] for row in tamper.rows())
    # Its digests are not the public scheme's: without the key, none would verify.
    unkeyed = verify(location, chain_key=None)
    assert unkeyed.chain is not None and unkeyed.chain.chained == 0
    assert unkeyed.chain.unverified == unkeyed.events and not unkeyed.violations


def test_a_writer_without_the_key_or_with_another_is_refused_and_appends_nothing(
    keyed: tuple[str, Tamperer],
) -> None:
    location, tamper = keyed
    before = tamper.rows()
    with pytest.raises(StoreError, match=r"is keyed .* a writer needs its key"):
        Scheduler.open(location, clock=ManualClock(START), registry=registry())
    with pytest.raises(StoreError, match="is not this store's"):
        Scheduler.open(location, clock=ManualClock(START), registry=registry(), chain_key="x")
    with pytest.raises(StoreError, match="is not this store's"):
        open_store(location, read_only=True, chain_key="x")  # a reader with a wrong key too
    assert tamper.rows() == before
    # With the key, a writer appends keyed digests that verify.
    workload(location, tasks=1, name="later")
    assert len(tamper.rows()) > len(before) and verify(location, chain_key=KEY).ok


def test_the_key_comes_from_the_environment(
    sqlite_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(KEY_ENV, KEY.decode())
    workload(sqlite_url, key=None)
    assert Tamperer(sqlite_url).marker()["chain_key_id"] == key_id(KEY)
    assert verify(sqlite_url).ok
    monkeypatch.delenv(KEY_ENV)
    assert verify(sqlite_url).unchecked


def test_an_edit_with_its_streams_digests_recomputed_is_caught_with_the_key(
    keyed: tuple[str, Tamperer],
) -> None:
    location, tamper = keyed
    position, stream, _, _, state = tamper.find("tasktrail.TaskEnded", b'"aborted"')
    tamper.set_state(position, state.replace(b'"aborted"', b'"completed"'))
    tamper.rechain(stream, start=len(tamper.stream(stream)))  # the end, its last event
    assert tamper.stream(stream)[-1][0] == position
    found = chain_findings(location)
    assert found[0][1] == (position,), found
    assert "does not match its keyed digest (recomputed without the key?)" in found[0][0]


def test_a_middle_event_removed_with_later_versions_renumbered_is_caught(
    keyed: tuple[str, Tamperer],
) -> None:
    location, tamper = keyed
    events = tamper.stream("job-1")
    tamper.delete(events[1][0])
    tamper.rechain("job-1", start=2)
    found = chain_findings(location)
    # The event that took the removed one's version no longer matches its keyed digest.
    assert (events[2][0],) in [positions for _, positions in found], found


def test_a_submission_copied_under_a_new_id_is_caught(keyed: tuple[str, Tamperer]) -> None:
    location, tamper = keyed
    _, _, _, topic, state = tamper.find("tasktrail.TaskSubmitted", b'"job"')
    tamper.insert("job-forged", 1, topic, state)
    tamper.rechain("job-forged")  # a digest of its own, by the public scheme
    assert verify(location, chain_key=None).chain.chained == 0  # type: ignore[union-attr]
    found = chain_findings(location)
    assert [positions for _, positions in found] == [(tamper.rows()[-1][0],)], found


def test_digests_stripped_and_the_marker_lowered_is_caught_with_the_key(
    keyed: tuple[str, Tamperer],
) -> None:
    location, tamper = keyed
    for position, *_, state in tamper.rows():
        tamper.set_state(position, _strip(state))
    tamper.set_marker("chain_key_id", None)
    tamper.set_marker("keyed_after", None)
    tamper.set_marker("chained_after", str(tamper.rows()[-1][0]))  # "recorded before the chain"
    # Without the key the chain holds nothing to it; the snapshot, sealed under the key
    # while the store was keyed, no longer opens by the public scheme: the downgrade shows.
    report = verify(location, chain_key=None)
    assert [v.check for v in report.violations] == ["snapshots"], report.violations
    assert "digest" in report.violations[0].message
    found = chain_findings(location)
    assert len(found) == 1 and "the store's marker records none" in found[0][0]


def test_keyed_after_moved_past_digests_rechained_without_the_key_is_caught(
    keyed: tuple[str, Tamperer],
) -> None:
    location, tamper = keyed
    rows = tamper.rows()
    for stream in sorted({row[1] for row in rows}):
        tamper.rechain(stream)  # every digest the public scheme's ...
    tamper.set_marker("keyed_after", str(rows[-1][0]))  # ... and the marker says "not keyed"
    found = chain_findings(location)
    assert found == [
        (
            f"stream {rows[-1][1]}: the marker's keyed_after ({rows[-1][0]}) is not the one the "
            "key vouched for: the marker was moved or edited, and the events before it escape "
            "the key",
            (rows[-1][0],),
        )
    ]
    tamper.set_marker("keyed_after", str(rows[-1][0] + 100))  # past the log's end
    found = chain_findings(location)
    assert len(found) == 1 and "which the log no longer holds" in found[0][0]


def _strip(state: bytes) -> bytes:
    return unseal(state)[0]


def test_cli_verify_without_the_key_says_so_with_its_own_exit_code(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    location = str(tmp_path / "t.db")
    workload(location)
    key_file = tmp_path / "chain.key"
    key_file.write_bytes(KEY + b"\n")  # a trailing newline is not part of the key
    other = tmp_path / "other.key"
    other.write_bytes(b"not it")
    before = folder_state(tmp_path)
    ran = run(["verify", location], capsys)
    assert ran.code == EXIT_UNCHECKED and " ok" not in ran.out.splitlines()[0]
    assert "keys not checked:" in ran.out and "no key was given" in ran.out
    ran = run(["verify", location, "--json"], capsys)
    report = orjson.loads(ran.out)
    assert ran.code == EXIT_UNCHECKED and report["ok"] is False and report["unchecked"]
    ran = run(["verify", location, "--key-file", str(key_file)], capsys)
    assert ran.code == 0 and ran.out.splitlines()[0].endswith(": ok"), ran.out
    ran = run(["verify", location, "--key-file", str(other)], capsys)
    assert ran.code == 2 and "is not this store's" in ran.err
    ran = run(["verify", location, "--key-file", str(tmp_path / "missing.key")], capsys)
    assert ran.code == 2 and "cannot read the key file" in ran.err
    # Edited and rechained: exit 1 with the key, never 0 without it.
    tamper = Tamperer(location)
    position, stream, *_, state = tamper.find("tasktrail.TaskEnded", b'"aborted"')
    tamper.set_state(position, state.replace(b'"aborted"', b'"completed"'))
    tamper.rechain(stream, start=len(tamper.stream(stream)))
    ran = run(["verify", location, "--key-file", str(key_file)], capsys)
    assert ran.code == 1 and f"(positions {position})" in ran.out
    assert run(["verify", location], capsys).code == EXIT_UNCHECKED
    assert folder_state(tmp_path) != before  # the edit; and nothing else wrote
    assert sorted(folder_state(tmp_path)) == sorted(before)


def test_an_unkeyed_store_is_keyed_from_its_head_on(store_url: str) -> None:
    workload(store_url, key=None)
    head = Tamperer(store_url).rows()[-1][0]
    workload(store_url, tasks=1, name="later")  # a writer with a key
    marker = Tamperer(store_url).marker()
    assert marker["keyed_after"] == str(head) and marker["chain_key_id"] == key_id(KEY)
    report = verify(store_url, chain_key=KEY)
    assert report.ok and report.chain is not None and report.chain.chained == report.events


def test_a_keyed_export_imports_as_a_keyed_store(
    keyed: tuple[str, Tamperer], tmp_path: Path
) -> None:
    location, _ = keyed
    out = tmp_path / "keyed.jsonl"
    count = export(location, out, chain_key=KEY)
    assert verify(out, chain_key=KEY).ok
    assert verify(out).unchecked  # the export's keyed digests, without the key
    with pytest.raises(StoreError, match="is not this store's"):
        verify(out, chain_key="another key")
    copy = str(tmp_path / "copy.db")
    assert import_log(out, copy) == count
    assert Tamperer(copy).marker()["chain_key_id"] == key_id(KEY)
    assert verify(copy, chain_key=KEY).ok
