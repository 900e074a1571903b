"""4: rebuilding the read models, and how far behind a following projector stays."""

from __future__ import annotations

import json
import multiprocessing
import time
from pathlib import Path

from tasktrail.projections import Projector

from . import raw
from .report import Figure, pair, rate_figure
from .workload import open_scheduler


def rebuild(store: Path, workdir: Path, rounds: int = 3) -> Figure:
    """``Projector.rebuild()`` of every read model from position 0, events/s."""
    ours: list[float] = []
    limit: list[float] = []
    events = rows = 0
    for n in range(rounds):
        views = workdir / f"rebuild-{n}.views.db"
        with Projector(store, views) as projector:
            started = time.perf_counter()
            report = projector.rebuild()
            ours.append(time.perf_counter() - started)
            events = report.read
        seconds, rows = raw.fetch_decode(store)
        limit.append(seconds)
    return rate_figure(
        "4 projections",
        "rebuild of every read model",
        0.0,
        "ev/s",
        pair=pair(events, ours, rows, limit),
        goal_ratio=0.25,
        note="limit: sqlite3 fetch of every row + orjson.loads of its state",
        extra={"events": events},
    )


def _writer(path: str, rate: float, seconds: float, out: str) -> None:
    """Append one command (one event) every 1/rate s for ``seconds``; note each commit."""
    scheduler, clock = open_scheduler(path, "normal")
    commits: list[tuple[int, float]] = []
    interval = 1.0 / rate
    started = time.perf_counter()
    total = int(rate * seconds)
    task_id = None
    for n in range(total):
        due = started + n * interval
        delay = due - time.perf_counter()
        if delay > 0:
            time.sleep(delay)
        step = n % 4
        if step == 0:
            task_id = scheduler.submit("job", id=f"lag-{n:09d}")
        elif step == 1:
            scheduler.reserve(task_id)  # type: ignore[arg-type]
        elif step == 2:
            scheduler.checkpoint(task_id, "write")  # type: ignore[arg-type]
        else:
            scheduler.finish(task_id, "completed")  # type: ignore[arg-type]
            clock.advance(1)
        commits.append((scheduler.position, time.time()))
    scheduler.close()
    Path(out).write_text(json.dumps(commits))


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def lag(
    workdir: Path, rate: float = 1_000.0, seconds: float = 5.0, interval: float = 0.01
) -> Figure:
    """A writer process appends ``rate`` events/s; a projector here follows (polling every
    ``interval`` s). Lag: from an event's commit to its batch of rows committing."""
    store = workdir / "lag.db"
    views = workdir / "lag.views.db"
    for path in (store, views):
        for suffix in ("", "-wal", "-shm"):
            Path(f"{path}{suffix}").unlink(missing_ok=True)
    open_scheduler(store, "normal")[0].close()  # create the schema before both start
    out = workdir / "lag-commits.json"
    context = multiprocessing.get_context("spawn")
    writer = context.Process(target=_writer, args=(str(store), rate, seconds, str(out)))
    applied: list[tuple[int, float]] = []
    with Projector(store, views) as projector:
        writer.start()

        def stop() -> bool:
            return writer.exitcode is not None and projector.folded >= projector.store.head()

        projector.follow(
            interval=interval,
            stop=stop,
            on_batch=lambda report: applied.append((report.position, time.time())),
        )
    writer.join()
    commits = json.loads(out.read_text())
    lags = []
    cursor = 0
    for position, committed in commits:
        while applied[cursor][0] < position:
            cursor += 1
        lags.append((applied[cursor][1] - committed) * 1000.0)
    p50, p99 = _percentile(lags, 0.50), _percentile(lags, 0.99)
    return Figure(
        "4 projections",
        f"incremental lag at {rate:.0f} ev/s, p50 / p99",
        p99,
        "ms",
        goal="p99 < 100 ms",
        met=p99 < 100.0,
        note=f"p50 {p50:.1f} ms, p99 {p99:.1f} ms, max {max(lags):.1f} ms over {len(lags)} "
        f"events; writer process at durability normal, projector polling every "
        f"{interval * 1000:.0f} ms",
        extra={"p50_ms": p50, "p99_ms": p99, "max_ms": max(lags), "events": len(lags)},
    )
