"""Issue 45, item 2, as a property: for any generated history (tasks, owned trees, waits,
messages, keys, runs, schedules, turns), archived at any time, the replay of the store
read across its archive equals the replay of the store before archiving, every seal
taken before still verifies, and live work stays in the store."""

from __future__ import annotations

import tempfile
from pathlib import Path

from conftest import examples
from hypothesis import given, settings
from hypothesis import strategies as st

from tasktrail.domain.commands.sealing import take_seal
from tasktrail.domain.retention.archiving import archive
from tasktrail.replay import replay, verify
from tasktrail.replay.harness import Harness
from tasktrail.replay.strategies import command_sequences


@settings(max_examples=examples(10, 100))
@given(command_sequences(), st.floats(0, 1), st.integers(1, 50))
def test_replay_across_an_archive_equals_replay_before(steps, when, batch) -> None:  # type: ignore[no-untyped-def]
    with tempfile.TemporaryDirectory() as folder, Harness.temporary() as h:
        h.run(steps)
        store = h.store
        before = replay(store, snapshots=False)
        sealed = Path(folder) / "seals.jsonl"
        sealed.write_text(take_seal(store).to_json() + "\n")
        cut = h.clock() * when + (1 - when) * 1_767_603_600_000
        report = archive(store, before=cut + 1, to=folder, batch=batch)
        live = {t for t, task in before.tasks.items() if task.live}
        after = replay(store, snapshots=False)
        assert live <= set(after.tasks)
        assert replay(store, before.position, archive=folder) == before
        assert set(replay(store, snapshots=False).tasks) | {
            t for act in report.acts for t in act.trees
        } <= set(before.tasks)
        assert verify(store, seals=sealed).ok


@settings(max_examples=examples(50, 500))
@given(st.lists(st.integers(1, 5), min_size=1, max_size=60), st.data())
def test_a_scan_that_lets_taken_rows_go_still_knows_every_kept_rows_leaf(steps, data) -> None:  # type: ignore[no-untyped-def]
    """``TreeScan.took``: after spans of rows are taken, in any batches, each row still
    in the log has the leaf it had, and the taken rows it still holds are never more
    than half of what it holds."""
    from array import array

    from tasktrail.domain.retention.trees import TreeScan

    positions = [sum(steps[: n + 1]) for n in range(len(steps))]  # rising, with gaps
    scan = TreeScan()
    scan._positions, scan._leaf = array("q", positions), array("q", range(len(positions)))
    taken: set[int] = set()
    for _ in range(data.draw(st.integers(1, 6))):
        left = [n for n, p in enumerate(positions) if p not in taken]
        if not left:
            break
        chosen = sorted(data.draw(st.lists(st.sampled_from(left), unique=True)))
        spans: list[tuple[int, int]] = []  # rows next to each other in the log: one span
        for n in chosen:
            if (
                spans
                and spans[-1][1] == positions[n - 1]
                and positions[n - 1] in taken | {positions[m] for m in chosen}
            ):
                spans[-1] = (spans[-1][0], positions[n])
            else:
                spans.append((positions[n], positions[n]))
        scan.took(spans)
        taken.update(positions[n] for n in chosen)
        held = set(scan._positions)
        assert 2 * len(held & taken) <= len(held)
        for n, position in enumerate(positions):
            if position not in taken:
                assert scan.leaf_of(position) == n
