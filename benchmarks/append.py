"""1 and 2: appending commands, one transaction each and many in one unit of work."""

from __future__ import annotations

import time
from pathlib import Path

from . import plain_es, raw
from .report import Figure, median_rate, paired, rate_figure
from .workload import COMMANDS_PER_CYCLE, batch_of, cycle, open_scheduler, stored_rows

SYNCHRONOUS = {"full": "FULL", "normal": "NORMAL"}


def _fresh(workdir: Path, name: str) -> Path:
    path = workdir / name
    for suffix in ("", "-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    return path


def per_command(workdir: Path, durability: str, cycles: int, rounds: int = 3) -> Figure:
    """Cycles of four commands, each its own transaction, against raw commit-per-row of
    the very rows tasktrail wrote, at the same ``synchronous`` level."""
    synchronous = SYNCHRONOUS[durability]
    ours: list[float] = []
    limit: list[float] = []
    plain: list[float] = []
    events = 0
    for _ in range(rounds):
        path = _fresh(workdir, f"command-{durability}.db")
        scheduler, clock = open_scheduler(path, durability)
        started = time.perf_counter()
        for n in range(cycles):
            cycle(scheduler, clock, n)
        ours.append(time.perf_counter() - started)
        events = scheduler.events_written
        scheduler.close()
        rows = stored_rows(path)
        limit.append(raw.commit_per_row(_fresh(workdir, "raw-commit.db"), rows, synchronous))
        if durability == "full":
            seconds, _ = plain_es.save_per_event(_fresh(workdir, "es-command.db"), cycles)
            plain.append(seconds)
    commands = cycles * COMMANDS_PER_CYCLE
    value, limit_rate, ratio = paired(events, ours, len(rows), limit)
    return rate_figure(
        f"1 append, a transaction a command ({synchronous})",
        "submit/reserve/checkpoint/finish",
        value,
        "ev/s",
        limit=limit_rate,
        ratio=ratio,
        eventsourcing=median_rate(commands, plain) if plain else None,
        goal_ratio=0.5,
        note=(
            "limit: sqlite3 BEGIN/INSERT/COMMIT per row of the same rows, same synchronous; "
            "eventsourcing: one save() per event"
            + ("" if plain else " (n/a: its SQLite recorder is always synchronous=FULL)")
        ),
        extra={"commands_per_s": median_rate(commands, ours), "events": events},
    )


def batched(workdir: Path, cycles: int, rounds: int = 3) -> list[Figure]:
    """Many commands in one ``Scheduler.batch()``, end to end (decide, evolve, encode,
    store), against raw ``executemany`` of the same rows with and without the unique index."""
    ours: list[float] = []
    limit: list[float] = []
    bare: list[float] = []
    plain: list[float] = []
    events = 0
    for _ in range(rounds):
        path = _fresh(workdir, "batched.db")
        scheduler, clock = open_scheduler(path, "full")
        started = time.perf_counter()
        with batch_of(scheduler):
            for n in range(cycles):
                cycle(scheduler, clock, n)
        ours.append(time.perf_counter() - started)
        events = scheduler.events_written
        scheduler.close()
        rows = stored_rows(path)
        limit.append(raw.executemany(_fresh(workdir, "raw-many.db"), rows, "FULL"))
        bare.append(raw.executemany(_fresh(workdir, "raw-bare.db"), rows, "FULL", unique=False))
        seconds, _ = plain_es.save_many(_fresh(workdir, "es-many.db"), cycles)
        plain.append(seconds)
    rate, with_index, ratio = paired(events, ours, len(rows), limit)
    _, without, bare_ratio = paired(events, ours, len(rows), bare)
    es = median_rate(cycles * COMMANDS_PER_CYCLE, plain)
    section = "2 append, many commands in one batch"
    return [
        rate_figure(
            section,
            f"{cycles * COMMANDS_PER_CYCLE} commands end to end",
            rate,
            "ev/s",
            limit=with_index,
            ratio=ratio,
            eventsourcing=es,
            goal_ratio=0.35,
            note="limit: one executemany in one transaction, with the (originator_id, "
            "originator_version) unique index; eventsourcing: save() of many aggregates, "
            "their method calls included",
            extra={"events": events},
        ),
        rate_figure(
            section,
            "limit without the unique index",
            rate,
            "ev/s",
            limit=without,
            ratio=bare_ratio,
            eventsourcing=es,
            note="for reference: executemany into a table with no index",
        ),
    ]
