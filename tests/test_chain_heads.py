"""A writer keeps the digest of each row another writer appended as it folds it
(issue 28): its next append to that stream chains to it without reading the row back,
and the chain it writes verifies."""

from __future__ import annotations

from typing import Any

from tasktrail.domain import ManualClock, Registry, Scheduler
from tasktrail.replay.verify import verify


def test_an_append_after_anothers_chains_to_the_digest_the_fold_kept(
    store_url: str, clock: ManualClock, registry: Registry
) -> None:
    here = Scheduler.open(store_url, clock=clock, registry=registry, worker="here")
    there = Scheduler.open(store_url, clock=clock, registry=registry, worker="there")
    task_id = there.submit("job")  # its first row, sealed by the other writer
    read_back: list[Any] = []
    original = here.store._previous_row

    def counted(stream_id: str, version: int) -> bytes | None:
        read_back.append((stream_id, version))
        return original(stream_id, version)

    here.store._previous_row = counted  # type: ignore[method-assign]
    here.refresh()
    here.reserve(task_id)
    assert read_back == []  # the fold kept the digest of version 1
    here.close()
    there.close()
    assert verify(store_url).ok
