"""The snapshot format follows the fold: a release that folds the same events into
another world must bump ``FORMAT``, so that opening a store passes over the snapshots
an earlier release took (a snapshot is trusted at open) and ``verify`` only notes them.

The digests are of the compacted world (what a snapshot holds) after folding two kept
logs: ``fixtures/fold-reference.jsonl`` (every stream kind, work left live at each step
of a cycle, a task rescheduled while its run ran; see ``make_fold_reference.py``) and
``fixtures/first-release.sqlite`` (every task event of the first release, upcast).
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
from fixtures.make_first_release import STORE
from fixtures.make_fold_reference import LOG

from tasktrail.domain import ManualClock, Registry, Scheduler, open_store
from tasktrail.domain.history import FORMAT, SnapshotTable, restore
from tasktrail.domain.history.codec import encode_world
from tasktrail.replay import replay, verify

FOLD_DIGESTS = {
    3: {
        "fold-reference.jsonl": "b08e5b8c5cd54914",
        "first-release.sqlite": "095cd07a42e00f66",
    },
    4: {
        "fold-reference.jsonl": "416e83816904ea5d",
        "first-release.sqlite": "962617d937937907",
    },
    5: {  # format 4's world, in a body with its heads and digest (issue 30)
        "fold-reference.jsonl": "416e83816904ea5d",
        "first-release.sqlite": "962617d937937907",
    },
    6: {  # the Service API's state (issue 42): a task's priority folded from its
        # submission (rule 19), its mailbox (rules 20-22), an outcome's result; key and
        # schedule streams
        "fold-reference.jsonl": "bf8a5c212b6460c2",
        "first-release.sqlite": "0139c6d1a3863695",
    },
    7: {  # issue 44: a task's asks (rules 30-32), output streams (rules 28-29) and flow
        # keys (rules 33-36), the limit, rate and debounce keys' streams
        "fold-reference.jsonl": "cb85ef0ee59f0a5c",
        "first-release.sqlite": "81d8493e1256cf61",
    },
}
"""The first 16 hex digits of the sha256 of each kept log's compacted world, by FORMAT
(an earlier FORMAT's entry is of the kept log as it was then: format 4 added a claimed
cleanup, a sleep that names its attempt and a recorded restart limit to
``fold-reference.jsonl``; format 4, still unreleased, was re-recorded when states' dicts
and lists became read-only and a snapshot tagged them as such)."""


@pytest.mark.parametrize("log", [LOG, STORE], ids=lambda p: Path(p).name)
def test_the_fold_of_a_kept_log_is_the_one_its_snapshot_format_names(log: Path) -> None:
    world = replay(log, audit=False, snapshots=False).world
    world.compact()
    digest = hashlib.sha256(encode_world(world)).hexdigest()[:16]
    recorded = FOLD_DIGESTS.get(FORMAT, {}).get(log.name)
    assert digest == recorded, (
        f"the fold of {log.name} is {digest}, not the {recorded} recorded for snapshot "
        f"format {FORMAT}: if the fold changed on purpose, bump FORMAT in "
        "domain/history/table.py and record the new digests here (snapshots an earlier "
        "release took would otherwise be trusted at open)"
    )


def _age(location: str, position: int) -> None:
    """Mark the snapshot at ``position`` as an earlier release's."""
    with open_store(location) as store:
        table = SnapshotTable(store)
        mark = "%s" if location.startswith("postgresql") else "?"
        with table._cursor(commit=True) as cursor:
            cursor.execute(
                f"UPDATE {table._table} SET format = {mark} WHERE position = {mark}",
                (FORMAT - 1, position),
            )


def test_an_earlier_releases_snapshot_is_passed_over_noted_and_replaced(
    store_url: str, clock: ManualClock, registry: Registry
) -> None:
    location = store_url
    s = Scheduler.open(location, clock=clock, registry=registry)
    s.submit("job", phase="a")
    s.close()
    with open_store(location) as store:
        (head,) = SnapshotTable(store).positions()
    _age(location, head)

    report = verify(location)
    assert report.ok, report.violations
    assert len(report.notes) == 1 and f"of format {FORMAT - 1}, not {FORMAT}" in report.notes[0]
    assert f"note: 1 snapshot(s) at position {head}" in str(report)
    assert report.to_dict()["notes"] == report.notes

    with open_store(location, read_only=True) as store:
        assert restore(store).snapshot is None  # folded past, not trusted
    # A snapshot at the same position (nothing new since) replaces the outdated one.
    s = Scheduler.open(location, clock=clock, registry=registry)
    assert s.snapshot() == head
    s.close()
    with open_store(location, read_only=True) as store:
        stored = SnapshotTable(store).at(head)
        assert stored is not None and stored.format == FORMAT
        assert restore(store).snapshot == head
    assert verify(location).notes == []
