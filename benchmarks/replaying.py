"""3: replay to ``SchedulerState`` from SQLite and from JSONL, beside raw fetch + decode."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from tasktrail.domain import open_store
from tasktrail.replay import export, fold, replay
from tasktrail.replay.log import LogReader

from . import plain_es, raw
from .report import Figure, median_rate, pair, rate_figure, spread_of

GOALS = {"every read model": 0.35, "audit=False": 0.5}
"""Issue 15's goals, as ratios of the raw limit: a replay that also builds every read
model (the audit trail's row per event included) has the lower one."""


def replay_options() -> list[tuple[str, dict[str, Any]]]:
    """The ways to replay measured: the default (every read model, audit included), and
    the lean options the replay API offers, if it offers them. Each folds the whole log
    (``snapshots=False``): a replay from the latest snapshot folds only its tail."""
    import inspect

    parameters = inspect.signature(replay).parameters
    whole: dict[str, Any] = {"snapshots": False} if "snapshots" in parameters else {}
    options: list[tuple[str, dict[str, Any]]] = [("every read model", dict(whole))]
    if "audit" in parameters:
        options.append(("audit=False", {"audit": False, **whole}))
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
    es = median_rate(es_events, plain)
    floors = _floors(store, jsonl, rounds)
    for name, _ in options:
        figures.append(
            rate_figure(
                "3 replay to SchedulerState",
                f"from SQLite, {name}",
                0.0,
                "ev/s",
                pair=pair(events, ours_sqlite[name], rows, limit_sqlite),
                eventsourcing=es,
                goal_ratio=GOALS[name],
                note="limit: sqlite3 fetch of every row + orjson.loads of its state; "
                "eventsourcing: select_notifications + mapper.to_domain_event",
                extra={"events": events},
            )
        )
        figures.append(
            rate_figure(
                "3 replay to SchedulerState",
                f"from JSONL, {name}",
                0.0,
                "ev/s",
                pair=pair(events, ours_jsonl[name], lines, limit_jsonl),
                goal_ratio=GOALS[name],
                note="limit: orjson.loads of every line of the same file",
                extra={"events": events},
            )
        )
    for (name, count, seconds), limit in zip(
        floors,
        (
            median_rate(rows, limit_sqlite),
            median_rate(rows, limit_sqlite),
            median_rate(lines, limit_jsonl),
        ),
        strict=True,
    ):
        figure = rate_figure(
            "3 replay to SchedulerState",
            name,
            median_rate(count, seconds),
            "ev/s",
            limit=limit,
            note="what bounds replay: the same work with less of the fold (no goal)",
        )
        figure.spread = spread_of(count, seconds)
        figures.append(figure)
    return figures


def _floors(store: Path, jsonl: Path, rounds: int) -> list[tuple[str, int, list[float]]]:
    """Replay's parts alone: rows decoded to events; events folded into the world."""
    decode: list[float] = []
    world: list[float] = []
    lines: list[float] = []
    count = 0
    with open_store(store) as opened:
        for _ in range(rounds):
            started = time.perf_counter()
            count = sum(1 for _ in opened.read())
            decode.append(time.perf_counter() - started)
            started = time.perf_counter()
            fold(opened.read(), projections=[])
            world.append(time.perf_counter() - started)
            started = time.perf_counter()
            for _ in LogReader(jsonl):
                pass
            lines.append(time.perf_counter() - started)
    return [
        ("bound: SQLite rows decoded to events, no fold", count, decode),
        ("bound: events folded into the world, no read model", count, world),
        ("bound: JSONL lines decoded to events, no fold", count, lines),
    ]
