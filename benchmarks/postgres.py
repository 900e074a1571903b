"""PostgreSQL, one writer: ``submit`` through the Scheduler beside a raw psycopg
``INSERT`` + ``COMMIT`` per row into a table with the same unique key, side by side
in one run, and the round trips each takes.

    python -m benchmarks.postgres                  # 2,000 commands x 5 rounds
    python -m benchmarks.postgres --commands 500 --rounds 5 --url postgresql://...

Each round times tasktrail and the raw insert back to back on a fresh schema; the
table gives the medians over rounds, the spread (min-max) and the median of the
rounds' own ratios. Round trips are counted from libpq's protocol trace (see
:class:`RoundTrips`): one is each time the client sends and then waits for the
server's answer.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import psycopg

DEFAULT_URL = os.environ.get("TASKTRAIL_TEST_POSTGRES", "postgresql://postgres@127.0.0.1:5432/test")
RAW_TABLE = (
    "CREATE TABLE raw_events (originator_id text NOT NULL, originator_version bigint NOT NULL, "
    "topic text, state bytea, notification_id bigserial, "
    "PRIMARY KEY (originator_id, originator_version))"
)


class RoundTrips:
    """Counts the round trips of psycopg connections through libpq's trace: the
    frontend's messages up to the point where the backend answers are one round
    trip. Works with both psycopg implementations (the trace is libpq's own)."""

    def __init__(self) -> None:
        self._files: list[Any] = []
        self._traced: list[Any] = []

    def trace(self, connection: psycopg.Connection[Any]) -> None:
        """Trace one connection until :meth:`stop` (a file each: libpq buffers its trace)."""
        pgconn = connection.pgconn
        self._files.append(tempfile.TemporaryFile())  # noqa: SIM115 (closed by close())
        pgconn.trace(self._files[-1].fileno())
        pgconn.set_trace_flags(psycopg.pq.Trace.SUPPRESS_TIMESTAMPS)
        self._traced.append(pgconn)

    def stop(self) -> None:
        for pgconn in self._traced:
            pgconn.untrace()
        self._traced.clear()

    def messages(self) -> list[list[tuple[str, str]]]:
        """Each connection's traced messages as ``(direction, type)``: ``F`` sent,
        ``B`` received."""
        connections = []
        for file in self._files:
            file.seek(0)
            seen = []
            for line in file.read().decode("utf-8", "replace").splitlines():
                parts = line.split("\t")
                if len(parts) >= 3 and parts[0] in ("F", "B"):
                    seen.append((parts[0], parts[2].split(" ", 1)[0]))
            connections.append(seen)
        return connections

    def count(self) -> int:
        """Round trips so far: each run of sent messages that a received one follows."""
        trips = 0
        for messages in self.messages():
            sending = False
            for direction, _ in messages:
                if direction == "F":
                    sending = True
                elif sending:
                    trips, sending = trips + 1, False
        return trips

    def close(self) -> None:
        self.stop()
        for file in self._files:
            file.close()


def store_connections(store: Any) -> list[psycopg.Connection[Any]]:
    """Every connection a PostgreSQL store's pool holds now (idle in the pool)."""
    pool = store.app.recorder.datastore.pool
    pool.open(wait=True)
    return list(pool._pool)  # psycopg_pool keeps its idle connections in a deque


@contextmanager
def counting(store: Any) -> Iterator[RoundTrips]:
    """Count the round trips of a PostgreSQL store's pool while the block runs."""
    trips = RoundTrips()
    for connection in store_connections(store):
        trips.trace(connection)
    try:
        yield trips
    finally:
        trips.stop()  # the files stay readable until the RoundTrips is collected


def _schema_url(url: str, schema: str) -> str:
    return f"{url}{'&' if '?' in url else '?'}schema={schema}"


@contextmanager
def _fresh_schema(url: str) -> Iterator[str]:
    schema = f"bench_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{schema}"')
    try:
        yield schema
    finally:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA "{schema}" CASCADE')


def tasktrail_round(url: str, commands: int, chosen_ids: bool = False) -> tuple[float, float]:
    """Seconds for ``commands`` submits through one Scheduler, and round trips per submit:
    ids drawn by the scheduler (the default use), or ``chosen_ids`` given by the caller
    (one more read each: a chosen id may name a task dropped from memory)."""
    from tasktrail.domain.app.scheduler import Scheduler
    from tasktrail.domain.store.store import open_store

    with _fresh_schema(url) as schema:
        store = open_store(_schema_url(url, schema))
        scheduler = Scheduler(store, worker="bench")
        try:
            for n in range(20):  # warm: the lease table, prepared statements, the pool
                scheduler.submit("job", phase="start", id=f"warm-{n}")
            with counting(store) as trips:
                for n in range(20):
                    scheduler.submit("job", phase="start", id=f"count-{n}" if chosen_ids else None)
                per_command = trips.count() / 20
            started = time.perf_counter()
            for n in range(commands):
                scheduler.submit("job", phase="start", id=f"t-{n}" if chosen_ids else None)
            elapsed = time.perf_counter() - started
        finally:
            scheduler.close()
            store.close()
    return elapsed, per_command


def raw_round(url: str, rows: list[tuple[str, int, str, bytes]]) -> tuple[float, float]:
    """Seconds for a raw ``INSERT`` + ``COMMIT`` per row (same unique key), and round trips
    per row."""
    insert = (
        "INSERT INTO raw_events (originator_id, originator_version, topic, state) "
        "VALUES (%s, %s, %s, %s)"
    )
    with _fresh_schema(url) as schema, psycopg.connect(url) as conn:
        conn.execute(f'SET search_path TO "{schema}"')
        conn.execute(RAW_TABLE)
        conn.commit()
        for n in range(20):
            conn.execute(insert, (f"warm-{n}", 1, "t", b"{}"), prepare=True)
            conn.commit()
        trips = RoundTrips()
        trips.trace(conn)
        for n in range(20):
            conn.execute(insert, (f"count-{n}", 1, "t", b"{}"), prepare=True)
            conn.commit()
        trips.stop()
        per_row = trips.count() / 20
        trips.close()
        started = time.perf_counter()
        for row in rows:
            conn.execute(insert, row, prepare=True)
            conn.commit()
        return time.perf_counter() - started, per_row


def run(url: str, commands: int, rounds: int) -> dict[str, Any]:
    """Time both, ``rounds`` times back to back; the medians, spreads and ratios."""
    state = b'{"at": 1.0, "name": "job", "args": [], "kwargs": {}}'
    rows = [(f"t-{n}", 1, "tasktrail.submitted", state) for n in range(commands)]
    ours, raw, ratios, trips_ours, trips_raw = [], [], [], [], []
    chosen, chosen_ratios, trips_chosen = [], [], []
    for _ in range(rounds):
        seconds, per_command = tasktrail_round(url, commands)
        chosen_seconds, per_chosen = tasktrail_round(url, commands, chosen_ids=True)
        raw_seconds, per_row = raw_round(url, rows)
        ours.append(commands / seconds)
        chosen.append(commands / chosen_seconds)
        raw.append(commands / raw_seconds)
        ratios.append(ours[-1] / raw[-1])
        chosen_ratios.append(chosen[-1] / raw[-1])
        trips_ours.append(per_command)
        trips_chosen.append(per_chosen)
        trips_raw.append(per_row)
    return {
        "chosen_ids_per_s": chosen,
        "chosen_ids_ratios": chosen_ratios,
        "round_trips_chosen_ids": statistics.median(trips_chosen),
        "commands": commands,
        "rounds": rounds,
        "driver": psycopg.pq.__impl__,
        "tasktrail_per_s": ours,
        "raw_per_s": raw,
        "ratios": ratios,
        "round_trips_tasktrail": statistics.median(trips_ours),
        "round_trips_raw": statistics.median(trips_raw),
    }


def _spread(values: list[float]) -> str:
    return f"{statistics.median(values):,.0f} ({min(values):,.0f}-{max(values):,.0f})"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", default=DEFAULT_URL)
    parser.add_argument("--commands", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args(argv)
    figures = run(args.url, args.commands, args.rounds)
    ratio = statistics.median(figures["ratios"])
    print(
        f"psycopg {psycopg.__version__} ({figures['driver']} libpq wrapper), "
        f"{args.commands} commands x {args.rounds} rounds"
    )
    print(
        f"  tasktrail submit   {_spread(figures['tasktrail_per_s'])} commands/s, "
        f"{figures['round_trips_tasktrail']:.2f} round trips a command"
    )
    print(
        f"  ... with chosen ids {_spread(figures['chosen_ids_per_s'])} commands/s, "
        f"{figures['round_trips_chosen_ids']:.2f} round trips a command, "
        f"ratio {statistics.median(figures['chosen_ids_ratios']):.2f}x "
        f"({min(figures['chosen_ids_ratios']):.2f}-{max(figures['chosen_ids_ratios']):.2f})"
    )
    print(
        f"  raw INSERT+COMMIT  {_spread(figures['raw_per_s'])} rows/s, "
        f"{figures['round_trips_raw']:.2f} round trips a row"
    )
    low, high = min(figures["ratios"]), max(figures["ratios"])
    verdict = "met" if ratio >= 0.5 else "MISSED"
    print(f"  ratio (drawn ids) {ratio:.2f}x ({low:.2f}-{high:.2f}); goal >= 0.5x raw: {verdict}")


if __name__ == "__main__":
    main()
