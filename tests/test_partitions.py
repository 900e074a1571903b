"""Past one store (docs/scaling.md): task trees partitioned by their root across stores,
each partition owned by its own group of workers, projections following each partition,
and the one thing that stays global — a daily cap — kept exact by a quota table that
every partition's minting takes a slot from.

A simulation on SQLite files (one store a partition) and on PostgreSQL schemas.
"""

from __future__ import annotations

import hashlib
import sqlite3
import threading
import uuid
from pathlib import Path
from typing import Any

import pytest

from tasktrail.domain import ManualClock, Registry, Scheduler, TaskDefinition
from tasktrail.projections import Projector, ReadModel
from tasktrail.replay import verify

PARTITIONS = 3
TREES = 24


def partition_of(root_id: str, partitions: int) -> int:
    """Rendezvous hashing: a tree's partition, stable as long as the partitions are."""
    return max(
        range(partitions),
        key=lambda p: hashlib.blake2b(f"{p}:{root_id}".encode(), digest_size=8).digest(),
    )


def tree_registry() -> Registry:
    def plan(inv: Any) -> None:
        inv.wait([inv.submit("leaf") for _ in range(2)], "all", then="done")

    return Registry(
        [
            TaskDefinition("tree", 1, {"plan": plan, "done": lambda inv: inv.finish()}),
            TaskDefinition("leaf", 1, {"go": lambda inv: inv.finish()}),
        ]
    )


class DailyQuota:
    """The global part: a day's cap as numbered slots with a unique key. A mint in any
    partition first takes the next slot; two takers of one slot cannot both win."""

    def __init__(self, path: Path, cap: int) -> None:
        self.path, self.cap = path, cap
        with sqlite3.connect(path) as db:
            db.execute(
                "CREATE TABLE IF NOT EXISTS quota (day TEXT, slot INTEGER, owner TEXT, "
                "PRIMARY KEY (day, slot))"
            )

    def take(self, day: str, owner: str) -> int | None:
        """The slot taken for ``owner``, or ``None`` when the day's cap is reached."""
        while True:
            with sqlite3.connect(self.path, timeout=30, isolation_level=None) as db:
                (used,) = db.execute("SELECT count(*) FROM quota WHERE day = ?", (day,)).fetchone()
                if used >= self.cap:
                    return None
                try:
                    db.execute("INSERT INTO quota VALUES (?, ?, ?)", (day, used + 1, owner))
                    return int(used + 1)
                except sqlite3.IntegrityError:
                    continue  # another partition took that slot first: try the next


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def partition_stores(request: pytest.FixtureRequest, tmp_path: Path) -> list[str]:
    if request.param == "sqlite":
        return [str(tmp_path / f"partition-{p}.db") for p in range(PARTITIONS)]
    import psycopg
    from conftest import _admin_dsn, require_postgres

    require_postgres()
    # Unique per run: the server is shared (parallel sessions, a run killed before its
    # finalizer dropped them), and the temp folder's name is the same every run.
    run = uuid.uuid4().hex[:12]
    names = [f"tt_part_{p}_{run}" for p in range(PARTITIONS)]
    with psycopg.connect(_admin_dsn(), autocommit=True) as conn:
        for name in names:
            conn.execute(f'CREATE SCHEMA "{name}"')
    request.addfinalizer(lambda: _drop(names))
    return [f"{_admin_dsn()}?schema={name}" for name in names]


def _drop(names: list[str]) -> None:
    import psycopg
    from conftest import _admin_dsn

    with psycopg.connect(_admin_dsn(), autocommit=True) as conn:
        for name in names:
            conn.execute(f'DROP SCHEMA IF EXISTS "{name}" CASCADE')


def test_trees_partitioned_by_root_run_and_project_per_partition(
    partition_stores: list[str], tmp_path: Path
) -> None:
    clock = ManualClock(1_000_000)
    registry = tree_registry()
    # Two workers a partition: each group owns its partition's store and nothing else.
    groups = [
        [
            Scheduler.open(location, clock=clock, registry=registry, worker=f"p{p}-w{n}")
            for n in range(2)
        ]
        for p, location in enumerate(partition_stores)
    ]
    roots: dict[str, int] = {}
    for n in range(TREES):
        root_id = f"tree-{n:03d}"
        p = partition_of(root_id, PARTITIONS)
        groups[p][n % 2].submit("tree", id=root_id)
        roots[root_id] = p
    assert len(set(roots.values())) == PARTITIONS  # every partition got work
    for _ in range(20):
        progressed = False
        for group in groups:
            for scheduler in group:
                progressed |= any(r.progressed for r in scheduler.run_until_idle())
        if not progressed:
            break
    for p, group in enumerate(groups):
        tasks = group[0].tasks()
        # A tree never crosses partitions: every task's root lives here.
        for task in tasks:
            root = task
            while root.owner_id is not None:
                root = group[0].task(root.owner_id)
            assert roots[root.id] == p
        assert all(task.status == "terminal" for task in tasks)
        assert len(tasks) == 3 * sum(1 for q in roots.values() if q == p)
        for scheduler in group:
            scheduler.close()
    # Projections follow each partition on their own; together they cover every tree.
    audited = 0
    for p, location in enumerate(partition_stores):
        assert verify(location).ok
        with Projector(location, tmp_path / f"views-{p}.db") as projector:
            projector.catch_up()
            model = ReadModel(projector)
            assert model.live_tasks() == []
            audited += sum(1 for root in roots if roots[root] == p and model.audit(root))
    assert audited == TREES


def test_a_global_daily_cap_stays_exact_across_partitions(tmp_path: Path) -> None:
    quota = DailyQuota(tmp_path / "quota.db", cap=10)
    taken: list[int | None] = []
    lock = threading.Lock()
    barrier = threading.Barrier(PARTITIONS)

    def partition_mints(p: int) -> None:
        barrier.wait()
        for n in range(8):
            slot = quota.take("2026-01-05", f"p{p}-run{n}")
            with lock:
                taken.append(slot)

    threads = [threading.Thread(target=partition_mints, args=(p,)) for p in range(PARTITIONS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    slots = [slot for slot in taken if slot is not None]
    assert sorted(slots) == list(range(1, 11))  # exactly the cap, each slot once
    assert taken.count(None) == PARTITIONS * 8 - 10
