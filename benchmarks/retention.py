"""``python -m benchmarks.retention [--events N] [--live N] [--tasks N] [--dir DIR]
[--json PATH]``: history kept for years (issue 45), measured.

A SQLite store of ``--events`` events of finished task trees (a root with memos and a
message, two children, one failing with an error detail, a result: 13 events a tree,
built through the Scheduler in batches on a manual clock, a minute apart), then
``--live`` live tasks. Then:

* **archive**: ``tasktrail archive --before`` the time 90% of the trees had ended, run as
  a process of its own: its wall time and peak memory (the child's max RSS), the store's
  bytes before and after (the file and its WAL), the segments' bytes;
* **history**: ``history`` of an archived task read across the archive, in process (the
  store opened, its segment found, checked and read): goal under 1 s;
* **throughput**: two workers (``Worker.run``, concurrency 4), each a process on its own
  copy of the store made before the archive, one alone and one with a retention policy
  whose keeper thread works through it beside it (acts of 500 events), alive side by
  side and timed in alternated windows of ``--tasks`` quick tasks, ``--rounds`` each
  (:mod:`.retention_runs`): the median of each round's ratio, and their spread; goal at
  least 0.9x.
"""

from __future__ import annotations

import argparse
import json
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from tasktrail.domain import ManualClock, Registry, Scheduler, TaskDefinition, open_store
from tasktrail.domain.retention.across import reading_archive

from .retention_runs import alternated

START_MS = 1_767_603_600_000
EVENTS_PER_TREE = 11
TREES_A_BATCH = 200


def registry() -> Registry:
    """A kind whose phase ends at once (the throughput runs), and one never run."""
    return Registry(
        [
            TaskDefinition("quick", 1, {"start": lambda inv: inv.finish("completed")}),
            TaskDefinition("job", 1, {"start": lambda inv: None}),
        ]
    )


def build(path: Path, events: int, live: int) -> tuple[list[str], float]:
    """The store: finished trees, then live tasks; the roots, and the end of 90% of them."""
    clock = ManualClock(START_MS)
    s = Scheduler.open(str(path), clock=clock, registry=registry(), snapshot_every=None)
    roots: list[str] = []
    trees = max(1, events // EVENTS_PER_TREE)
    cut = 0.0
    for start in range(0, trees, TREES_A_BATCH):
        with s.batch():
            for n in range(start, min(trees, start + TREES_A_BATCH)):
                root = s.submit("job", phase="start", memos={"customer": f"c-{n}"})
                s.reserve(root)
                s.memo(root, "note", {"seen": n})
                s.send(root, "hello", {"n": n})
                kids = [s.submit("job", owner=root, phase="start") for _ in range(2)]
                for kid in kids:
                    s.reserve(kid)
                s.finish(kids[0], "completed", result={"ok": n})
                s.finish(kids[1], "failed", error={"message": "no", "detail": {"n": n}})
                s.finish(root, "completed", result={"total": n})
                roots.append(root)
                clock.advance(60_000)
                if len(roots) == int(trees * 0.9):
                    cut = clock()
    with s.batch():
        for _ in range(live):
            s.submit("job", phase="start")
    s.close()
    return roots, cut


def stored_bytes(path: Path) -> int:
    """The store's file and its WAL, once checkpointed."""
    with open_store(str(path)) as store:
        conn: Any = store.app.recorder.datastore
        with conn._lock:
            (conn._connection or conn._connect())._sqlite_conn.execute(
                "PRAGMA wal_checkpoint(TRUNCATE)"
            )
    return sum(p.stat().st_size for p in (path, Path(f"{path}-wal")) if p.exists())


def archive_process(path: Path, cut: float, folder: Path) -> tuple[float, int]:
    """``tasktrail archive`` as a process: its wall seconds and its peak RSS (bytes)."""
    started = time.perf_counter()
    subprocess.run(
        [
            sys.executable,
            "-m",
            "tasktrail",
            "archive",
            str(path),
            "--before",
            str(cut),
            "--to",
            str(folder),
            "--reason",
            "benchmark",
        ],
        check=True,
        capture_output=True,
    )
    seconds = time.perf_counter() - started
    peak_kib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return seconds, peak_kib * 1024


def history_across(path: Path, folder: Path, task_id: str) -> float:
    """Seconds to read one archived task's history across the archive, in process."""
    started = time.perf_counter()
    with reading_archive(folder), open_store(str(path), read_only=True) as store:
        records = store.stream_records(task_id)
    assert records, task_id
    return time.perf_counter() - started


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.retention")
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--live", type=int, default=1_000)
    parser.add_argument("--tasks", type=int, default=5_000, help="tasks each timed window ends")
    parser.add_argument("--rounds", type=int, default=5, help="alternated windows of each worker")
    parser.add_argument("--dir", type=Path, default=None)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)
    folder = Path(tempfile.mkdtemp(dir=args.dir, prefix="tasktrail-retention-"))
    try:
        figures = run(folder, args.events, args.live, args.tasks, args.rounds)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    for name, value in figures.items():
        print(f"{name:<34} {value}")
    if args.json is not None:
        args.json.write_text(json.dumps(figures, indent=2) + "\n")
    return 0


def run(folder: Path, events: int, live: int, tasks: int, rounds: int = 5) -> dict[str, Any]:
    """Every figure, on stores in ``folder``."""
    store = folder / "trail.db"
    started = time.perf_counter()
    roots, cut = build(store, events, live)
    built = time.perf_counter() - started
    copies = [folder / "alone.db", folder / "beside.db"]
    for copy in copies:
        shutil.copy(store, copy)
    before = stored_bytes(store)
    with open_store(str(store), read_only=True) as opened:
        count = opened.head()
    segments = folder / "archive"
    segments.mkdir()
    seconds, peak = archive_process(store, cut, segments)
    after = stored_bytes(store)
    archived = sum(p.stat().st_size for p in segments.iterdir())
    read = history_across(store, segments, roots[len(roots) // 2])
    runs = alternated(copies[0], copies[1], folder / "beside-archive", tasks, rounds)
    return {
        "events": count,
        "build_s": round(built, 1),
        "archive_s": round(seconds, 1),
        "archive_peak_rss_mib": round(peak / 2**20, 1),
        "store_bytes_before": before,
        "store_bytes_after": after,
        "segment_bytes": archived,
        "history_archived_task_s": round(read, 3),
        "worker_tasks_per_s_alone": round(runs["alone_median"], 1),
        "worker_tasks_per_s_with_retention": round(runs["beside_median"], 1),
        "throughput_ratio": round(runs["ratio_median"], 3),
        "throughput_ratios_by_round": runs["ratios"],
        "worker_tasks_per_s_alone_by_round": runs["alone"],
        "worker_tasks_per_s_with_retention_by_round": runs["beside"],
        "workers_settled_s": runs["settled_s"],
        "retention_acts_during_run": runs["acts"],
        "goals": {
            "history_under_1s": read < 1.0,
            "throughput_at_least_0.9x": runs["ratio_median"] >= 0.9,
        },
    }


if __name__ == "__main__":
    sys.exit(main())
