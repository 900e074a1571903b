"""Issue 45, items 1-3: finished task trees archived to segments (proofs kept), read
back in place by every read command, segments that fail found; on both stores."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from helpers.cli import run
from helpers.retention_world import opened, record

from tasktrail.domain import ManualClock, open_store
from tasktrail.domain.commands.sealing import take_seal
from tasktrail.domain.retention.segments import read_segment
from tasktrail.domain.store.gaps import gaps_of, history_acts
from tasktrail.replay import replay, verify


def cli(capsys: pytest.CaptureFixture[str], *argv: str):  # type: ignore[no-untyped-def]
    return run(list(argv), capsys)


@pytest.fixture
def archived(store_url: str, clock: ManualClock, tmp_path: Path) -> dict[str, object]:
    """A store with finished trees and live work, sealed, then archived."""
    s = opened(store_url, clock)
    trees = record(s, clock)
    before = replay(store_url, snapshots=False)
    seals = tmp_path / "seals.jsonl"
    seals.write_text(take_seal(s.store).to_json() + "\n")
    folder = tmp_path / "archive"
    folder.mkdir()
    report = s.archive(before=clock(), to=folder, batch=40, actor="ops", reason="a test")
    s.close()
    return {
        "url": store_url,
        "trees": trees,
        "before": before,
        "seals": seals,
        "folder": folder,
        "report": report,
    }


def test_archive_moves_finished_trees_and_leaves_live_work(archived: dict) -> None:
    url, trees, report = archived["url"], archived["trees"], archived["report"]
    assert report.trees == len(trees.finished) and len(report.acts) > 1
    with open_store(url, read_only=True) as store:
        for root in trees.finished:
            assert store.stream_records(root) == []
            assert all(store.stream_records(kid) == [] for kid in trees.children[root])
            assert store.stream_records(f"key:{trees.keys[root]}") == []
        for task in trees.live + trees.waiting:
            assert store.stream_records(task)
        acts = history_acts(store)
    assert [act.payload["actor"] for act in acts] == ["ops"] * len(report.acts)
    for act in report.acts:
        read = read_segment(archived["folder"] / act.segment)
        assert len(read.rows) == act.events and read.seal["count"] == act.events


def test_replay_across_the_archive_equals_replay_before(archived: dict) -> None:
    url, before = archived["url"], archived["before"]
    after = replay(url, archive=archived["folder"])
    assert after.tasks == before.tasks
    position = before.position  # the acts come after: the same prefix, the same tables
    assert replay(url, position, archive=archived["folder"], audit=True) == before
    alone = replay(url, snapshots=False)
    assert set(alone.tasks) < set(before.tasks)


def test_verify_with_seals_from_before_the_archive(archived: dict) -> None:
    url, seals = archived["url"], archived["seals"]
    plain = verify(url, seals=seals)
    assert plain.ok, plain.violations
    across = replay(url, archive=archived["folder"])  # the segments read whole
    assert across.tasks
    from tasktrail.domain.retention.across import findings, reading_archive

    with reading_archive(archived["folder"]) as views:
        report = verify(url, seals=seals)
    assert report.ok, report.violations
    assert findings(views) == []
    with open_store(url, read_only=True) as store:  # a seal after: the same tree
        assert take_seal(store).count > 0


@pytest.mark.parametrize("damage", ["missing", "altered", "swapped"])
def test_a_damaged_segment_is_a_finding_naming_it(
    archived: dict, damage: str, capsys: pytest.CaptureFixture[str]
) -> None:
    url, folder, report = archived["url"], archived["folder"], archived["report"]
    first, second = report.acts[0].segment, report.acts[1].segment
    if damage == "missing":
        (folder / first).unlink()
    elif damage == "swapped":
        shutil.copy(folder / second, folder / first)
    else:
        import zstandard

        with open(folder / first, "rb") as compressed:
            raw = zstandard.ZstdDecompressor().stream_reader(compressed).read()
        raw = raw.replace(b"s3cret-memo", b"s3cret-m3mo", 1)
        (folder / first).write_bytes(zstandard.ZstdCompressor().compress(raw))
    result = cli(capsys, "verify", url, "--archive", str(folder), "--seals", str(archived["seals"]))
    assert result.code == 1, result.out + result.err
    assert first in result.err
    if damage == "altered":
        assert "at position" in result.err and "differ from those the act took" in result.err
    result = cli(capsys, "replay", url, "--archive", str(folder))
    assert result.code == 1 and first in result.err


def test_read_commands_take_the_archive(
    archived: dict, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url, folder, trees = archived["url"], archived["folder"], archived["trees"]
    root = trees.finished[0]
    without = cli(capsys, "history", url, root)
    assert without.code == 2 and "skipped archived ranges" in without.err
    across = cli(capsys, "history", url, root, "--archive", str(folder))
    assert across.code == 0, across.err
    assert "TaskSubmitted" in across.out and "TaskEnded" in across.out
    assert cli(capsys, "explain", url, root, "--archive", str(folder)).code == 0
    assert cli(capsys, "replay", url, "--until", "5", "--archive", str(folder)).code == 0
    out = tmp_path / "all.jsonl"
    assert cli(capsys, "export", url, str(out), "--archive", str(folder)).code == 0
    assert replay(out).tasks == archived["before"].tasks
    page = tmp_path / "report.html"
    assert cli(capsys, "report", url, root, "--out", str(page), "--archive", str(folder)).code == 0
    assert root in page.read_text()


def test_dry_run_says_what_would_move_and_writes_nothing(
    store_url: str, clock: ManualClock, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    s = opened(store_url, clock)
    trees = record(s, clock, trees=4)
    s.close()
    folder = tmp_path / "dry"
    result = cli(
        capsys,
        "archive",
        store_url,
        "--before",
        str(clock()),
        "--to",
        str(folder),
        "--dry-run",
        "--json",
    )
    assert result.code == 0, result.err
    import orjson

    said = orjson.loads(result.out)
    assert said["trees"] == len(trees.finished) and said["segment_bytes"] > 0
    assert said["stored_bytes"] > said["segment_bytes"]
    assert not folder.exists()
    with open_store(store_url, read_only=True) as store:
        assert gaps_of(history_acts(store)) == []
        assert store.stream_records(trees.finished[0])


def test_an_archive_of_a_keyed_store_verifies_under_its_key(
    store_url: str, clock: ManualClock, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from helpers.retention_world import registry

    from tasktrail.domain import Scheduler

    key = b"k" * 32
    s = Scheduler.open(store_url, clock=clock, registry=registry(), chain_key=key)
    record(s, clock, trees=4)
    seals = tmp_path / "seals.jsonl"
    seals.write_text(s.seal().to_json() + "\n")
    folder = tmp_path / "archive"
    folder.mkdir()
    report = s.archive(before=clock(), to=folder)
    s.close()
    seal = read_segment(folder / report.acts[0].segment).seal
    assert seal is not None and seal["mac"] and seal["key_id"]
    from tasktrail.domain.retention.across import findings, reading_archive

    with reading_archive(folder) as views:
        assert verify(store_url, seals=seals, chain_key=key).ok
        assert replay(store_url, snapshots=False).tasks
    assert findings(views) == []
    import zstandard

    path = folder / report.acts[0].segment
    with open(path, "rb") as compressed:
        raw = zstandard.ZstdDecompressor().stream_reader(compressed).read()
    forged = raw.replace(seal["mac"].encode(), b"0" * 64)  # a MAC made without the key
    path.write_bytes(zstandard.ZstdCompressor().compress(forged))
    keyfile = tmp_path / "chain.key"
    keyfile.write_bytes(key)
    ran = cli(capsys, "verify", store_url, "--archive", str(folder), "--key-file", str(keyfile))
    assert ran.code == 1 and "MAC" in ran.err, ran.err


def test_disk_is_given_back_after_an_archive(
    store_url: str, clock: ManualClock, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    s = opened(store_url, clock)
    record(s, clock, trees=30, secret="x" * 2000)  # about 600 KB of values
    s.close()
    files = [Path(store_url), Path(f"{store_url}-wal")]
    stored = sum(f.stat().st_size for f in files if f.exists()) if "://" not in store_url else 0
    folder = tmp_path / "archive"
    ran = cli(
        capsys,
        "archive",
        store_url,
        "--before",
        str(clock()),
        "--to",
        str(folder),
        "--vacuum",
        "--json",
    )
    assert ran.code == 0, ran.err
    import orjson

    before, after = orjson.loads(ran.out)["vacuum"]
    if not store_url.startswith("postgresql"):  # PostgreSQL reuses it: docs/scaling.md
        assert after < stored / 3, (stored, before, after)  # the archive gave it back
        assert Path(store_url).stat().st_size == after
