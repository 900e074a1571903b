"""``python -m benchmarks.notify [--rounds N] [--seconds S] [--postgres URL]``: what a
NOTIFY in every append costs writers (issue 28 item 5), without tasktrail around it.

Each writer process holds one connection and calls, one commit a call, a PL/pgSQL
function shaped like tasktrail's append: lock the table (EXCLUSIVE), NOTIFY or not,
insert a 300-byte row. Three shapes, each with and without the NOTIFY, interleaved
round by round: 1 writer; 16 writers on one table (one store); 16 writers spread
over 4 tables in 4 schemas of one server (four stores, as partitions would be).
Each figure is appends per second, the median of the rounds with their min-max.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import statistics
import time
import uuid
from typing import Any

POSTGRES = os.environ.get("TASKTRAIL_BENCH_POSTGRES", "postgresql://postgres@127.0.0.1:5432/test")
SHAPES = ((1, 1), (16, 1), (16, 4))
"""(writer processes, stores they spread over)."""


def _make(url: str, schema: str, notify: bool) -> None:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{schema}"')
        conn.execute(f'CREATE TABLE "{schema}".t (id bigserial PRIMARY KEY, body bytea)')
        sends = f'NOTIFY "{schema}";' if notify else ""
        conn.execute(
            f'CREATE FUNCTION "{schema}".append(b bytea) RETURNS bigint LANGUAGE plpgsql AS $$ '
            f'DECLARE i bigint; BEGIN LOCK TABLE "{schema}".t IN EXCLUSIVE MODE; {sends} '
            f'INSERT INTO "{schema}".t (body) VALUES (b) RETURNING id INTO i; RETURN i; END $$'
        )


def _writer(url: str, schema: str, start: float, stop: float, counts: Any) -> None:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        while time.time() < start:
            time.sleep(0.001)
        appended = 0
        while time.time() < stop:
            conn.execute(f'SELECT "{schema}".append(%s)', (b"x" * 300,), prepare=True)
            appended += 1
        counts.put(appended)


def one_round(url: str, writers: int, stores: int, notify: bool, seconds: float) -> float:
    """Appends per second of ``writers`` processes over ``stores`` fresh tables."""
    import psycopg

    schemas = [f"notify_{uuid.uuid4().hex[:10]}" for _ in range(stores)]
    for schema in schemas:
        _make(url, schema, notify)
    counts: Any = multiprocessing.Queue()
    start = time.time() + 1.5  # every writer connected before the clock starts
    processes = [
        multiprocessing.Process(
            target=_writer, args=(url, schemas[n % stores], start, start + seconds, counts)
        )
        for n in range(writers)
    ]
    for process in processes:
        process.start()
    total = sum(counts.get() for _ in processes)
    for process in processes:
        process.join()
    with psycopg.connect(url, autocommit=True) as conn:
        for schema in schemas:
            conn.execute(f'DROP SCHEMA "{schema}" CASCADE')
    return total / seconds


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.notify", description=__doc__)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=2.0)
    parser.add_argument("--postgres", default=POSTGRES)
    args = parser.parse_args(argv)
    rates: dict[tuple[int, int, bool], list[float]] = {}
    for _ in range(args.rounds):
        for writers, stores in SHAPES:
            for notify in (True, False):
                rate = one_round(args.postgres, writers, stores, notify, args.seconds)
                rates.setdefault((writers, stores, notify), []).append(rate)
    print("| writers | stores | appends/s with NOTIFY | without | ratio |")
    print("|---|---|---|---|---|")
    for writers, stores in SHAPES:
        with_, without = rates[(writers, stores, True)], rates[(writers, stores, False)]
        ratio = statistics.median(without) / statistics.median(with_)
        print(
            f"| {writers} | {stores} | {statistics.median(with_):.0f} "
            f"({min(with_):.0f}-{max(with_):.0f}) | {statistics.median(without):.0f} "
            f"({min(without):.0f}-{max(without):.0f}) | {ratio:.2f}x |"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
