"""Figures, the table they print as, and the machine line."""

from __future__ import annotations

import os
import platform
import sqlite3
import statistics
import time
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from importlib import metadata
from typing import Any


@dataclass
class Figure:
    """One measurement: tasktrail's figure, the physical limit and plain eventsourcing beside it.

    ``value``, ``limit`` and ``eventsourcing`` share ``unit``. ``ratio`` is
    ``value / limit`` for rates (higher is better) unless the benchmark says
    otherwise in ``note``; ``met`` is whether ``goal`` holds (``None``: no goal).
    """

    section: str
    name: str
    value: float | None
    unit: str
    limit: float | None = None
    eventsourcing: float | None = None
    ratio: float | None = None
    goal: str = ""
    met: bool | None = None
    note: str = ""
    extra: dict[str, Any] = field(default_factory=dict)
    spread: tuple[float, float] | None = None
    """min-max of ``value`` over the rounds (``None``: measured once)."""
    ratio_spread: tuple[float, float] | None = None
    """min-max of the rounds' own ratios."""

    def to_dict(self) -> dict[str, Any]:
        """The figure as JSON-ready data."""
        return asdict(self)


def rate_figure(
    section: str,
    name: str,
    value: float,
    unit: str,
    *,
    limit: float | None = None,
    eventsourcing: float | None = None,
    goal_ratio: float | None = None,
    note: str = "",
    extra: dict[str, Any] | None = None,
    ratio: float | None = None,
    pair: Pair | None = None,
) -> Figure:
    """A rate beside its limit; the goal, if any, is ``ratio >= goal_ratio`` where
    ``ratio`` is ``value / limit`` unless given (see :func:`paired`). ``pair`` gives the
    value, the limit, the ratio and their spreads over rounds at once."""
    spread = ratio_spread = None
    if pair is not None:
        value, limit, ratio = pair.value, pair.limit, pair.ratio
        spread, ratio_spread = pair.spread, pair.ratio_spread
    if ratio is None:
        ratio = value / limit if limit else None
    met = None
    goal = ""
    if goal_ratio is not None and ratio is not None:
        goal = f">= {goal_ratio:g}x limit"
        met = ratio >= goal_ratio
    return Figure(
        section,
        name,
        value,
        unit,
        limit=limit,
        eventsourcing=eventsourcing,
        ratio=ratio,
        goal=goal,
        met=met,
        note=note,
        extra=extra or {},
        spread=spread,
        ratio_spread=ratio_spread,
    )


def best_rate(count: int, runs: Iterable[float]) -> float:
    """``count`` items per second of the fastest of several timed runs (seconds)."""
    return count / min(runs)


def median_rate(count: int, runs: Iterable[float]) -> float:
    """``count`` items per second of the median of several timed runs (seconds)."""
    return count / statistics.median(runs)


def paired(
    count: int, ours: list[float], limit_count: int, limit: list[float]
) -> tuple[float, float, float]:
    """Median rates of tasktrail and of its limit over the rounds, and the median of the
    rounds' own ratios: each round times both back to back, so its ratio is the one
    least disturbed by a noisy machine."""
    ratios = [(count / a) / (limit_count / b) for a, b in zip(ours, limit, strict=True)]
    return median_rate(count, ours), median_rate(limit_count, limit), statistics.median(ratios)


@dataclass(frozen=True)
class Pair:
    """tasktrail beside its limit over rounds timed back to back: median rates, the
    median of the rounds' own ratios, and the min-max of tasktrail's rate and the ratio."""

    value: float
    limit: float
    ratio: float
    spread: tuple[float, float]
    ratio_spread: tuple[float, float]


def pair(count: int, ours: list[float], limit_count: int, limit: list[float]) -> Pair:
    """:func:`paired`, with the spreads over the rounds."""
    ratios = [(count / a) / (limit_count / b) for a, b in zip(ours, limit, strict=True)]
    rates = [count / a for a in ours]
    return Pair(
        median_rate(count, ours),
        median_rate(limit_count, limit),
        statistics.median(ratios),
        (min(rates), max(rates)),
        (min(ratios), max(ratios)),
    )


def spread_of(count: int, runs: list[float]) -> tuple[float, float]:
    """min-max of ``count`` items per second over timed runs."""
    return count / max(runs), count / min(runs)


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    """Seconds ``fn()`` took, and what it returned."""
    started = time.perf_counter()
    result = fn()
    return time.perf_counter() - started, result


def _human(value: float | None, unit: str) -> str:
    if value is None:
        return "-"
    if unit.endswith("/s"):
        if value >= 1e6:
            return f"{value / 1e6:.2f}M"
        if value >= 1e4:
            return f"{value / 1e3:.1f}k"
        if value >= 1e3:
            return f"{value / 1e3:.2f}k"
        return f"{value:.0f}"
    if value >= 100:
        return f"{value:.0f}"
    if value >= 10:
        return f"{value:.1f}"
    return f"{value:.2f}"


def format_table(figures: list[Figure]) -> str:
    """The figures as a Markdown table (it reads in a terminal too)."""
    head = ["section", "measure", "tasktrail", "limit", "eventsourcing", "unit", "ratio", "goal"]
    rows = [head, ["---"] * len(head)]
    for f in figures:
        verdict = "" if f.met is None else (" met" if f.met else " MISSED")
        value = _human(f.value, f.unit)
        if f.spread is not None:
            value += f" ({_human(f.spread[0], f.unit)}-{_human(f.spread[1], f.unit)})"
        ratio = "-" if f.ratio is None else f"{f.ratio:.2f}x"
        if f.ratio_spread is not None:
            ratio += f" ({f.ratio_spread[0]:.2f}-{f.ratio_spread[1]:.2f})"
        rows.append(
            [
                f.section,
                f.name,
                value,
                _human(f.limit, f.unit),
                _human(f.eventsourcing, f.unit),
                f.unit,
                ratio,
                (f.goal + verdict).strip() or "-",
            ]
        )
    widths = [max(len(r[i]) for r in rows) for i in range(len(head))]
    lines = []
    for row in rows:
        if row[0] == "---":
            lines.append("|" + "|".join("-" * (w + 2) for w in widths) + "|")
        else:
            cells = (cell.ljust(width) for cell, width in zip(row, widths, strict=True))
            lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def without_verdicts(figures: list[Figure]) -> None:
    """A quick run's sizes are too small to judge a goal by: keep the goals, drop the
    verdicts."""
    for f in figures:
        if f.met is not None:
            f.met = None
            f.goal = f"{f.goal} (quick: no verdict)"


def machine() -> dict[str, Any]:
    """What the figures were measured on."""
    model = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as cpuinfo:
            for line in cpuinfo:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return {
        "cpu": model,
        "cores": os.cpu_count(),
        "python": platform.python_version(),
        "sqlite": sqlite3.sqlite_version,
        "eventsourcing": metadata.version("eventsourcing"),
        "orjson": metadata.version("orjson"),
        "platform": platform.platform(),
    }


def machine_line(info: dict[str, Any]) -> str:
    """The machine as one line."""
    return (
        f"{info['cpu']}, {info['cores']} cores; Python {info['python']}; "
        f"SQLite {info['sqlite']}; eventsourcing {info['eventsourcing']}; "
        f"orjson {info['orjson']}; {info['platform']}"
    )
