"""3: replay to ``SchedulerState`` from SQLite and from JSONL, beside raw fetch + decode."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from tasktrail.replay import export, replay

from . import plain_es, raw
from .report import Figure, best_rate, rate_figure


def replay_options() -> list[tuple[str, dict[str, Any]]]:
    """The ways to replay measured: the default (every read model, audit included), and
    the lean options the replay API offers, if it offers them."""
    import inspect

    options: list[tuple[str, dict[str, Any]]] = [("every read model", {})]
    if "audit" in inspect.signature(replay).parameters:
        options.append(("audit=False", {"audit": False}))
    return options


def replay_figures(store: Path, es_store: Path, jsonl: Path, rounds: int = 3) -> list[Figure]:
    """Replay ``store`` (and its JSONL export) against the raw limits of the same bytes."""
    if not jsonl.exists():
        export(store, jsonl)
    options = replay_options()
    ours_sqlite: dict[str, list[float]] = {name: [] for name, _ in options}
    ours_jsonl: dict[str, list[float]] = {name: [] for name, _ in options}
    limit_sqlite: list[float] = []
    limit_jsonl: list[float] = []
    plain: list[float] = []
    events = rows = lines = es_events = 0
    for _ in range(rounds):
        for name, kwargs in options:
            started = time.perf_counter()
            state = replay(store, **kwargs)
            ours_sqlite[name].append(time.perf_counter() - started)
            events = state.events
            started = time.perf_counter()
            replay(jsonl, **kwargs)
            ours_jsonl[name].append(time.perf_counter() - started)
            del state
        seconds, rows = raw.fetch_decode(store)
        limit_sqlite.append(seconds)
        seconds, lines = raw.jsonl_loads(jsonl)
        limit_jsonl.append(seconds)
        seconds, es_events = plain_es.read_decode(es_store)
        plain.append(seconds)
    figures = []
    es = best_rate(es_events, plain)
    for name, _ in options:
        figures.append(
            rate_figure(
                "3 replay to SchedulerState",
                f"from SQLite, {name}",
                best_rate(events, ours_sqlite[name]),
                "ev/s",
                limit=best_rate(rows, limit_sqlite),
                eventsourcing=es,
                goal_ratio=0.5,
                note="limit: sqlite3 fetch of every row + orjson.loads of its state; "
                "eventsourcing: select_notifications + mapper.to_domain_event",
                extra={"events": events},
            )
        )
        figures.append(
            rate_figure(
                "3 replay to SchedulerState",
                f"from JSONL, {name}",
                best_rate(events, ours_jsonl[name]),
                "ev/s",
                limit=best_rate(lines, limit_jsonl),
                goal_ratio=0.5,
                note="limit: orjson.loads of every line of the same file",
                extra={"events": events},
            )
        )
    return figures
