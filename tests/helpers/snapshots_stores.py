"""What the snapshot tests (``test_snapshots*.py``) share: a fresh store of each kind,
and the check that a world says of every stream what the full fold says."""

from __future__ import annotations

import contextlib
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import postgres_schema

from tasktrail.domain import World, ledger_of
from tasktrail.domain.history.codec import WORLD_PARTS


@contextlib.contextmanager
def fresh(kind: str) -> Iterator[str]:
    """A new, empty store location of ``kind`` (one per hypothesis example)."""
    if kind == "sqlite":
        with tempfile.TemporaryDirectory() as folder:
            yield str(Path(folder) / "trail.db")
    else:
        with postgres_schema() as url:
            yield url


def compacted(world: World) -> dict[str, object]:
    """A world's parts after compaction (on a copy)."""
    copy = world.copy()
    copy.compact()
    return {part: getattr(copy, part) for part in WORLD_PARTS}


def assert_same_as_full_fold(world: World, full: World) -> None:
    """``world`` (live work, the rest read back) says of every stream what the full fold says."""
    assert compacted(world) == compacted(full)
    assert {t: world.tasks[t] for t in world.live} == {t: full.tasks[t] for t in full.live}
    assert world.counts == full.counts and world.folded == full.folded
    for name in ("pending_wakeups", "task_pass_retries", "open_cleanups"):
        assert world.indexes.get(name, {}) == full.indexes.get(name, {}), name
    ledger, whole = ledger_of(world), ledger_of(full)
    assert ledger.live == whole.live and ledger.schedules == whole.schedules
    assert {r: ledger.runs[r] for r in ledger.live} == {r: whole.runs[r] for r in whole.live}
    for task_id, task in full.tasks.items():
        assert world.get(task_id) == task, task_id
    for stream_id, state in full.streams.items():
        assert world.stream(stream_id) == state, stream_id
        assert world.version_of(stream_id, False) == full.stream_versions[stream_id]


kinds = pytest.mark.parametrize(
    "kind", ["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)]
)
