"""Issue 30, item 2: seals kept outside the store. ``tasktrail seal`` prints one JSON line
committing to the whole log up to a position (an RFC 6962 Merkle root over every
event, its peaks, count, position, time, the marker, the latest snapshot, a MAC when
keyed); ``verify --seals FILE`` reports, with the position where the log stops
agreeing, each tampering the public digest scheme lets pass.
"""

from __future__ import annotations

import hashlib
import shutil
from dataclasses import replace
from pathlib import Path

import orjson
import pytest
from helpers.cli import folder_state, run
from helpers.tamper_rows import Tamperer
from test_keyed_chain import KEY, START, registry, workload

from tasktrail.domain import InvalidArgument, ManualClock, Scheduler, open_store
from tasktrail.domain.commands.sealing import take_seal
from tasktrail.domain.store.chain import unseal
from tasktrail.domain.store.seals import extends, leaf_hash, parse_seal
from tasktrail.replay import export, replay, verify
from tasktrail.replay.cli.common import EXIT_UNCHECKED


def seal_line(location: str, key: bytes | None = None) -> str:
    with open_store(location, read_only=True, chain_key=key) as store:
        return take_seal(store).to_json()


def seal_findings(location: str, seals: Path) -> list[tuple[str, tuple[int, ...]]]:
    report = verify(location, seals=seals, chain_key=None)
    return [(v.message, v.positions) for v in report.violations if v.check == "seals"]


def chain_findings(location: str) -> list[str]:
    return [v.message for v in verify(location).violations if v.check == "chain"]


@pytest.fixture
def sealed(store_url: str, tmp_path: Path) -> tuple[str, Tamperer, Path]:
    """An unkeyed store (the public scheme: what the chain alone cannot hold) and its
    seal, kept in a file outside it."""
    workload(store_url, key=None, tasks=12)
    seals = tmp_path / "seals.jsonl"
    seals.write_text(seal_line(store_url) + "\n")
    assert verify(store_url, seals=seals).ok
    return store_url, Tamperer(store_url), seals


def stops_at(found: list[tuple[str, tuple[int, ...]]], tampered: int) -> int:
    """The position a seal finding names: never after the tampered one."""
    assert found, "the seals caught nothing"
    position = found[0][1][0]
    assert position <= tampered, (position, tampered, found)
    return position


def test_the_root_is_rfc_6962s_merkle_tree_hash_of_every_event(store_url: str) -> None:
    workload(store_url, key=None, tasks=5)
    line = orjson.loads(seal_line(store_url))
    rows = Tamperer(store_url).rows()
    leaves = [leaf_hash(p, s, v, t, state) for p, s, v, t, state in rows]

    def mth(nodes: list[bytes]) -> bytes:  # RFC 6962, section 2.1, as written there
        if len(nodes) == 1:
            return nodes[0]
        split = 1 << ((len(nodes) - 1).bit_length() - 1)
        left, right = mth(nodes[:split]), mth(nodes[split:])
        return hashlib.sha256(b"\x01" + left + right).digest()

    assert line["root"] == mth(leaves).hex()
    assert line["count"] == len(rows) and line["position"] == rows[-1][0]
    assert len(line["peaks"]) == bin(len(rows)).count("1") and line["mac"] is None
    assert leaves[0] == hashlib.sha256(b"\x00" + leaf_bytes(rows[0])).digest()


def leaf_bytes(row: tuple[int, str, int, str, bytes]) -> bytes:
    position, stream, version, topic, state = row
    return (
        position.to_bytes(8, "big")
        + version.to_bytes(8, "big")
        + len(stream.encode()).to_bytes(8, "big")
        + len(topic.encode()).to_bytes(8, "big")
        + stream.encode()
        + topic.encode()
        + state
    )


def test_scheduler_seal_and_the_cli_give_the_same_seal(
    sqlite_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    s = Scheduler.open(sqlite_url, clock=ManualClock(START), registry=registry(), chain_key=KEY)
    s.submit("job", id="one")
    s.run_until_idle()
    sealed = s.seal()
    s.close()
    before = folder_state(tmp_path)
    ran = run(["seal", sqlite_url], capsys)
    assert ran.code == 0 and folder_state(tmp_path) == before  # a reader: wrote nothing
    printed = orjson.loads(ran.out)
    assert len(ran.out.splitlines()) == 1 and printed["mac"] is None  # no key: no MAC
    key_file = tmp_path / "k"
    key_file.write_bytes(KEY)
    until = str(sealed.position)
    ran = run(["seal", sqlite_url, "--key-file", str(key_file), "--until", until], capsys)
    printed = orjson.loads(ran.out)
    assert printed["count"] == sealed.count, (printed, sealed)
    assert printed["root"] == sealed.root, (printed, sealed)
    # Taken later (and after the close's snapshot): its own time, its own MAC, both valid.
    again = parse_seal(ran.out.strip(), "stdout")
    assert sealed.mac == sealed.expected_mac(KEY) and again.mac == again.expected_mac(KEY)
    assert again.key_id == sealed.key_id is not None


def test_an_edit_with_its_streams_digests_recomputed_is_caught_by_the_seal(
    sealed: tuple[str, Tamperer, Path],
) -> None:
    location, tamper, seals = sealed
    position, stream, _, _, state = tamper.find("tasktrail.TaskEnded", b'"aborted"')
    tamper.set_state(position, state.replace(b'"aborted"', b'"completed"'))
    tamper.rechain(stream)
    assert chain_findings(location) == []  # the public scheme alone cannot see it
    found = seal_findings(location, seals)
    stops_at(found, position)
    assert "one was edited, removed, reordered or forged" in found[0][0]


def test_a_middle_event_removed_with_later_versions_renumbered(
    sealed: tuple[str, Tamperer, Path],
) -> None:
    location, tamper, seals = sealed
    removed = tamper.stream("job-1")[1][0]
    tamper.delete(removed)
    tamper.rechain("job-1")
    stops_at(seal_findings(location, seals), removed)


def test_a_streams_last_events_cut(sealed: tuple[str, Tamperer, Path]) -> None:
    location, tamper, seals = sealed
    cut = [row[0] for row in tamper.stream("job-3")[-2:]]
    tamper.delete(*cut)  # on PostgreSQL a plain DELETE: its positions may have gaps
    found = seal_findings(location, seals)
    stops_at(found, cut[0])


def test_the_logs_last_events_cut_with_the_snapshot_row(
    sealed: tuple[str, Tamperer, Path],
) -> None:
    location, tamper, seals = sealed
    assert tamper.snapshot_positions()  # the close took one
    cut = [row[0] for row in tamper.rows()[-3:]]
    tamper.delete(*cut)
    tamper.delete_snapshots(at_or_after=cut[0])
    found = seal_findings(location, seals)
    messages = " ".join(message for message, _ in found)
    assert "events were cut from the log" in messages and "snapshot rows were deleted" in messages
    short = next(f for f in found if "were cut" in f[0])
    assert short[1][0] <= cut[0]


def test_two_events_of_different_streams_swapped(sealed: tuple[str, Tamperer, Path]) -> None:
    location, tamper, seals = sealed
    first = tamper.stream("job-4")[-1][0]
    second = next(row[0] for row in tamper.rows() if row[0] > first and row[1] != "job-4")
    tamper.swap(first, second)
    assert chain_findings(location) == []  # each stream's own order still holds
    stops_at(seal_findings(location, seals), first)


def test_a_submission_forged_before_the_seal(sealed: tuple[str, Tamperer, Path]) -> None:
    location, tamper, seals = sealed
    _, _, _, topic, state = tamper.find("tasktrail.TaskSubmitted", b'"job"')
    position = tamper.stream("job-5")[0][0]  # its place taken by a copy under a new id
    tamper.set_row(position, "job-forged", 1, topic, state)
    tamper.rechain("job-forged")
    found = seal_findings(location, seals)
    stops_at(found, position)


def test_every_digest_stripped_and_the_marker_lowered(sealed: tuple[str, Tamperer, Path]) -> None:
    location, tamper, seals = sealed
    for position, *_, state in tamper.rows():
        tamper.set_state(position, unseal(state)[0])
    tamper.set_marker("chained_after", str(tamper.rows()[-1][0]))  # "all before the chain"
    assert chain_findings(location) == []  # reads as a store recorded before the chain
    found = seal_findings(location, seals)
    assert any("the marker was lowered" in message for message, _ in found)
    assert stops_at(found, 1) == tamper.rows()[0][0]


def test_a_keyed_store_unkeyed_shows_in_its_seal(sqlite_url: str, tmp_path: Path) -> None:
    workload(sqlite_url)
    seals = tmp_path / "seals.jsonl"
    seals.write_text(seal_line(sqlite_url, KEY) + "\n")
    tamper = Tamperer(sqlite_url)
    tamper.set_marker("chain_key_id", None)
    tamper.set_marker("keyed_after", None)
    for stream in sorted({row[1] for row in tamper.rows()}):
        tamper.rechain(stream)  # every digest the public scheme's
    report = verify(sqlite_url, seals=seals, chain_key=KEY)
    found = [v for v in report.violations if v.check == "seals"]
    assert any("downgraded" in v.message and v.positions == (1,) for v in found), found


def test_the_store_rolled_back_to_an_older_copy(sqlite_url: str, tmp_path: Path) -> None:
    workload(sqlite_url, key=None, tasks=3, name="monday")
    older = tmp_path / "older.db"
    shutil.copy(sqlite_url, older)
    held = len(Tamperer(sqlite_url).rows())
    workload(sqlite_url, key=None, tasks=3, name="tuesday")
    seals = tmp_path / "seals.jsonl"
    seals.write_text(seal_line(sqlite_url) + "\n")
    shutil.copy(older, sqlite_url)
    assert verify(sqlite_url).ok  # an older copy is a good log in itself
    found = seal_findings(sqlite_url, seals)
    assert "rolled back to an older copy" in found[0][0] and f"after {held} events" in found[0][0]


def test_snapshot_rows_deleted(sealed: tuple[str, Tamperer, Path]) -> None:
    location, tamper, seals = sealed
    snapshot = tamper.snapshot_positions()[-1]
    tamper.delete_snapshots()
    assert verify(location).ok  # snapshots are derived: the log alone cannot miss them
    assert seal_findings(location, seals) == [
        (
            f"seal line 1: the seal ({_describe(seals)}) saw a snapshot at position {snapshot}; "
            "the store holds none at or after it: snapshot rows were deleted",
            (snapshot,),
        )
    ]


def _describe(seals: Path) -> str:
    line = orjson.loads(seals.read_text().splitlines()[0])
    return f"{line['count']} events to position {line['position']}, at {line['at']}"


def test_a_later_seal_extends_an_earlier_one_and_a_tampering_between_them_is_placed(
    sqlite_url: str, tmp_path: Path
) -> None:
    workload(sqlite_url, key=None, tasks=3, name="monday")
    seals = tmp_path / "seals.jsonl"
    first = seal_line(sqlite_url)
    workload(sqlite_url, key=None, tasks=3, name="tuesday")
    seals.write_text(first + "\n" + seal_line(sqlite_url) + "\n")
    assert verify(sqlite_url, seals=seals).ok
    tamper = Tamperer(sqlite_url)
    position = tamper.stream("tuesday-2")[-1][0]
    tamper.delete(position)
    found = seal_findings(sqlite_url, seals)
    # The earlier seal still holds; only the later one, past its position, does not.
    assert [message.split(":")[0] for message, _ in found] == ["seal line 2"]
    assert orjson.loads(first)["position"] < found[0][1][0] <= position


def test_keyed_seals_carry_a_mac_checked_under_the_key(
    sqlite_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    workload(sqlite_url)
    key_file = tmp_path / "chain.key"
    key_file.write_bytes(KEY)
    seals = tmp_path / "seals.jsonl"
    seals.write_text(run(["seal", sqlite_url, "--key-file", str(key_file)], capsys).out)
    ran = run(["verify", sqlite_url, "--seals", str(seals), "--key-file", str(key_file)], capsys)
    assert ran.code == 0, ran.out
    ran = run(["verify", sqlite_url, "--seals", str(seals)], capsys)
    assert ran.code == EXIT_UNCHECKED and "seal MACs not checked" in ran.out
    # A seal rewritten to another time: its MAC no longer matches.
    forged = orjson.loads(seals.read_text())
    forged["at"] = "2020-01-01T00:00:00.000Z"
    seals.write_bytes(orjson.dumps(forged) + b"\n")
    ran = run(["verify", sqlite_url, "--seals", str(seals), "--key-file", str(key_file)], capsys)
    assert ran.code == 1 and "its MAC does not match" in ran.out


def test_an_export_carries_the_seal_of_its_position(
    sealed: tuple[str, Tamperer, Path], tmp_path: Path
) -> None:
    location, tamper, _ = sealed
    out = tmp_path / "kept.jsonl"
    export(location, out)
    assert verify(location, seals=out).ok and verify(out, seals=out).ok
    position, stream, _, _, state = tamper.find("tasktrail.TaskEnded", b'"aborted"')
    tamper.set_state(position, state.replace(b'"aborted"', b'"completed"'))
    tamper.rechain(stream)
    stops_at(seal_findings(location, out), position)


def test_a_bad_seals_file_is_bad_input_naming_its_line(
    sealed: tuple[str, Tamperer, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    location, _, seals = sealed
    with pytest.raises(InvalidArgument, match="against a log, not a state"):
        verify(replay(location), seals=seals)
    line = orjson.loads(seals.read_text())
    line["count"] += 1  # its peaks no longer fit its count
    seals.write_text(seals.read_text() + orjson.dumps(line).decode() + "\n")
    ran = run(["verify", location, "--seals", str(seals)], capsys)
    assert ran.code == 2 and f"{seals}:2:" in ran.err
    seals.write_text("")
    ran = run(["verify", location, "--seals", str(seals)], capsys)
    assert ran.code == 2 and "holds no seal" in ran.err


def test_a_later_seal_is_proved_to_extend_an_earlier_one_from_the_events_between(
    store_url: str,
) -> None:
    workload(store_url, key=None, tasks=5, name="monday")
    with open_store(store_url, read_only=True) as store:
        earlier = take_seal(store)
    workload(store_url, key=None, tasks=7, name="tuesday")
    with open_store(store_url, read_only=True) as store:
        later = take_seal(store)
    between = [row for row in Tamperer(store_url).rows() if row[0] > earlier.position]
    assert extends(earlier, later, between)
    edited = [*between[:-1], (*between[-1][:4], between[-1][4].replace(b'"at"', b'"at" '))]
    assert not extends(earlier, later, edited)
    assert not extends(earlier, later, between[:-1])
    # An earlier seal that is not a prefix of this log (another store's): no proof.
    other = replace(earlier, peaks=(later.peaks[0], *earlier.peaks[1:]))
    assert not extends(other, later, between)


def test_a_snapshot_records_the_seal_of_its_position_and_verify_holds_the_log_to_it(
    sqlite_url: str,
) -> None:
    """Issue 30: a snapshot records the seal of the log up to its position; the next
    snapshot resumes the tree from it; ``verify`` (no ``--seals``) reports an event
    edited before a snapshot's position, with its stream rechained by the public
    scheme, which the plain chain cannot see."""
    from tasktrail.domain.history import SnapshotTable
    from tasktrail.domain.history.sealed import recorded_seal

    workload(sqlite_url, key=None, tasks=3, name="monday")
    workload(sqlite_url, key=None, tasks=3, name="tuesday")
    with open_store(sqlite_url, read_only=True) as store:
        table = SnapshotTable(store)
        positions = table.positions()
        assert len(positions) == 2
        seals = [recorded_seal(table.at(p).body, None) for p in positions]  # type: ignore[union-attr]
        for position, recorded in zip(positions, seals, strict=True):
            assert recorded is not None and recorded.position == position
            assert recorded.root == take_seal(store, until=position).root
        rows = [(p, s, v, t, bytes(b)) for p, s, v, t, b in store.rows()]
    assert seals[0] is not None and seals[1] is not None
    assert extends(seals[0], seals[1], rows)
    assert verify(sqlite_url).ok
    tamper = Tamperer(sqlite_url)
    position, *_, state = tamper.stream("monday-1")[-1]  # the aborted task's end
    edited = state.replace(b'"aborted"', b'"completed"')
    assert edited != state
    tamper.set_state(position, edited)
    tamper.rechain("monday-1")
    assert [v.check for v in verify(sqlite_url, seals=None).violations if v.check == "chain"] == []
    report = verify(sqlite_url)
    assert [v.check for v in report.violations] == ["snapshots", "snapshots"], report.violations
    first = report.violations[0]
    assert "the seal the snapshot at position" in first.message
    assert first.positions and first.positions[0] <= position
