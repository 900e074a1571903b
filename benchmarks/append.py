"""1 and 2: appending commands, one transaction each and many in one unit of work."""

from __future__ import annotations

import time
from pathlib import Path

from . import plain_es, raw
from .report import Figure, median_rate, pair, rate_figure
from .workload import COMMANDS_PER_CYCLE, batch_of, cycle, open_scheduler, steps, stored_rows

SYNCHRONOUS = {"full": "FULL", "normal": "NORMAL"}


def _fresh(workdir: Path, name: str) -> Path:
    path = workdir / name
    for suffix in ("", "-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    return path


def per_command(workdir: Path, durability: str, cycles: int, rounds: int = 3) -> Figure:
    """Cycles of the mixed workload, each command its own transaction, against raw
    commits of the very rows tasktrail wrote, a transaction per command (the rows each
    command wrote), at the same ``synchronous`` level."""
    synchronous = SYNCHRONOUS[durability]
    ours: list[float] = []
    limit: list[float] = []
    plain: list[float] = []
    events = es_events = 0
    for _ in range(rounds):
        path = _fresh(workdir, f"command-{durability}.db")
        scheduler, clock = open_scheduler(path, durability)
        groups: list[int] = []
        written = 0
        started = time.perf_counter()
        for n in range(cycles):
            for _ in steps(scheduler, clock, n):
                # The rows of one command: what the raw limit commits at once.
                groups.append(scheduler.events_written - written)
                written = scheduler.events_written
        ours.append(time.perf_counter() - started)
        events = scheduler.events_written
        scheduler.close()
        rows = stored_rows(path)
        limit.append(
            raw.commit_per_row(_fresh(workdir, "raw-commit.db"), rows, synchronous, groups)
        )
        if durability == "full":
            # eventsourcing writes four-event lives: as many events as tasktrail wrote.
            seconds, es_events = plain_es.save_per_event(
                _fresh(workdir, "es-command.db"), max(1, events // 4)
            )
            plain.append(seconds)
    commands = cycles * COMMANDS_PER_CYCLE
    return rate_figure(
        f"1 append, a transaction a command ({synchronous})",
        f"mixed workload, {commands} commands",
        0.0,
        "ev/s",
        pair=pair(events, ours, len(rows), limit),
        eventsourcing=median_rate(es_events, plain) if plain else None,
        goal_ratio=0.5,
        note=(
            "limit: sqlite3 BEGIN/INSERT(s)/COMMIT of the same rows, a transaction per "
            "command, same synchronous (a controller pass's several commits count as one); "
            "eventsourcing: one save() per event"
            + ("" if plain else " (n/a: its SQLite recorder is always synchronous=FULL)")
        ),
        extra={"commands_per_s": median_rate(commands, ours), "events": events},
    )


def batched(workdir: Path, cycles: int, rounds: int = 3) -> list[Figure]:
    """Many commands of the mixed workload in one ``Scheduler.batch()``, end to end
    (decide, evolve, encode, store), against raw ``executemany`` of the same rows with
    and without the unique index."""
    ours: list[float] = []
    limit: list[float] = []
    bare: list[float] = []
    plain: list[float] = []
    events = es_events = 0
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
        seconds, es_events = plain_es.save_many(_fresh(workdir, "es-many.db"), events // 4)
        plain.append(seconds)
    with_index = pair(events, ours, len(rows), limit)
    without = pair(events, ours, len(rows), bare)
    es = median_rate(es_events, plain)
    section = "2 append, many commands in one batch"
    return [
        rate_figure(
            section,
            f"{cycles * COMMANDS_PER_CYCLE} commands end to end",
            0.0,
            "ev/s",
            pair=with_index,
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
            0.0,
            "ev/s",
            pair=without,
            eventsourcing=es,
            note="for reference: executemany into a table with no index",
        ),
    ]
