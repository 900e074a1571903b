"""Issue 45, item 1: a SIGKILL at each step of an archive leaves a store that opens,
verifies and has lost nothing: the rows are in the store, or in a segment the store
names (never a row deleted without its segment fsynced first)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from helpers.retention_world import opened, record

from tasktrail.domain import ManualClock
from tasktrail.domain.commands.sealing import take_seal
from tasktrail.domain.retention.across import findings, reading_archive
from tasktrail.domain.store.gaps import gaps_of, history_acts
from tasktrail.replay import replay, verify

HELPER = Path(__file__).parent / "helpers" / "archive_crash.py"
STEPS = ("written", "segment", "appended", "deleted", "committed")


@pytest.mark.parametrize("step", STEPS)
def test_a_kill_at_each_step_of_an_archive_loses_nothing(
    store_url: str, clock: ManualClock, tmp_path: Path, step: str
) -> None:
    s = opened(store_url, clock)
    trees = record(s, clock, trees=6)
    seals = tmp_path / "seals.jsonl"
    seals.write_text(take_seal(s.store).to_json() + "\n")
    s.close()
    before = replay(store_url, snapshots=False)
    folder = tmp_path / "archive"
    folder.mkdir()
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parent)}
    done = subprocess.run(
        [sys.executable, str(HELPER), store_url, str(folder), str(clock()), step],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == -9, done.stderr  # killed where asked
    reopened = opened(store_url, clock)  # it opens (recovery, the writers' turn)
    with_acts = gaps_of(history_acts(reopened.store))
    reopened.close()
    assert bool(with_acts) == (step == "committed")
    assert replay(store_url, archive=folder).tasks == before.tasks
    with reading_archive(folder) as views:
        report = verify(store_url, seals=seals)
    assert report.ok, report.violations
    assert findings(views) == []
    assert verify(store_url, seals=seals).ok
    kept = replay(store_url, snapshots=False)
    assert set(trees.live) <= set(kept.tasks)
