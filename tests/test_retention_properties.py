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
