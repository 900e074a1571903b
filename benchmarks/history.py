"""``python -m benchmarks.history [--sizes 10000,100000,1000000] [--rounds N] [--out PATH]``:
what an open, a command, a tick and each CLI command cost against finished history.

For each size, a SQLite store of that many events of finished history with every
stream kind in it and exactly 100 live tasks (:mod:`.history_store`; built once and
cached under ``--cache``, keyed by size and generator version), copied to a scratch
folder so measuring never changes the cached store. Then, each figure in rounds:

* ``Scheduler.open`` in a fresh process per round: seconds, peak RSS, the tasks and
  streams the world holds;
* on one open scheduler (one process): each tick with nothing to do, a command's
  latency, the ``ConflictError`` of a batch another writer overtook, and
  ``tasktrail project`` with one new event since the last;
* each CLI command as a whole process: ``explain``, ``trace``, ``tasks``, ``replay``
  and ``verify`` to the end, ``replay --until`` near the start, middle and end.

Each row gives the median and the min-max over rounds per size, and its growth per
10x of history; the goals (every row flat, <= 1.5x per 10x; the 1M open < 1 s and
< 150 MB; ``replay --until`` of the 1M log < 2 s) are printed met or missed.
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from . import history_store
from .history_probe import run_cli
from .report import machine, machine_line

ROOT = Path(__file__).resolve().parent.parent
FLAT = 1.5
"""The most a flat row may grow per 10x of history."""
OPEN_GOAL_S, OPEN_GOAL_MB, UNTIL_GOAL_S, GOAL_SIZE = 1.0, 150.0, 2.0, 1_000_000
HISTORY_TASK = "h000000-0-agent"
"""A finished task with Turns, in every size's history: the one-task tools' subject."""
LIVE_TASK = "live-parent-000"


def spread(values: list[float]) -> dict[str, float]:
    """Median, min and max of a row's rounds."""
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


def growth(by_size: dict[int, dict[str, Any]]) -> list[float]:
    """The growth of the median per 10x of history, between each pair of sizes."""
    sizes = sorted(s for s, v in by_size.items() if "median" in v)
    factors = []
    for small, big in itertools.pairwise(sizes):
        a, b = by_size[small]["median"], by_size[big]["median"]
        if a > 0:
            factors.append((b / a) ** (1 / math.log10(big / small)))
    return factors


def _python(args: list[str], timeout: float = 3_600) -> dict[str, Any]:
    """A probe in a fresh interpreter; its JSON answer (or why there is none)."""
    done = subprocess.run(
        [sys.executable, "-m", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    if done.returncode != 0:  # the traceback's last line says what
        lines = done.stderr.strip().splitlines() or [f"exit {done.returncode}"]
        return {"error": lines[-1][-300:]}
    answer: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return answer


class Table:
    """Rows of figures by size."""

    def __init__(self) -> None:
        self.rows: dict[tuple[str, str], dict[str, Any]] = {}

    def add(self, section: str, measure: str, unit: str, size: int, values: Any) -> None:
        row = self.rows.setdefault(
            (section, measure), {"section": section, "measure": measure, "unit": unit}
        )
        sizes = row.setdefault("by_size", {})
        if isinstance(values, dict):  # a missing API or a failed probe: say so
            sizes[size] = {"missing": values.get("missing") or values.get("error")}
        elif not values:
            sizes[size] = {"missing": "no figure"}
        else:
            sizes[size] = spread([float(v) for v in values])

    def finish(self) -> list[dict[str, Any]]:
        rows = []
        for row in self.rows.values():
            factors = growth(row["by_size"])
            row["growth_per_10x"] = factors
            flat_rows = row["unit"] in ("s", "ms") or row["measure"].endswith("held")
            row["flat"] = (max(factors) <= FLAT) if factors and flat_rows else None
            rows.append(row)
        return rows


def measure_size(table: Table, store: Path, size: int, rounds: int, cli_rounds: int) -> None:
    """Every row of one size."""
    section = "open (fresh process)"
    opens = [_python(["benchmarks.history_probe", "open", str(store)]) for _ in range(rounds)]
    good = [o for o in opens if "error" not in o]
    if not good:
        table.add(section, "Scheduler.open", "s", size, opens[0])
    else:
        table.add(section, "Scheduler.open", "s", size, [o["open_s"] for o in good])
        table.add(section, "peak RSS after open", "MB", size, [o["peak_rss_mb"] for o in good])
        table.add(
            section, "RSS before open (imports)", "MB", size, [o["rss_before_mb"] for o in good]
        )
        table.add(section, "tasks held", "tasks", size, [o["tasks_held"] for o in good])
        table.add(section, "streams held", "streams", size, [o["streams_held"] for o in good])
        table.add(section, "live tasks", "tasks", size, [o["live"] for o in good])
    inside = _python(
        ["benchmarks.history_probe", "inside", str(store), str(rounds), str(cli_rounds)]
    )
    if "error" in inside:
        table.add("ticks, nothing to do", "probe", "s", size, inside)
    for name, values in inside.items():
        if name in ("error", "live after"):
            continue
        if name.startswith("tasktrail "):
            _cli_rows(table, name, size, values)
            continue
        section = (
            "command latency"
            if name.startswith("command") or "Conflict" in name
            else "ticks, nothing to do"
        )
        table.add(section, name, "ms", size, _ms(values))
    head = history_store.head(store)
    cli: list[tuple[str, list[str]]] = [
        (f"tasktrail explain STORE {HISTORY_TASK}", ["explain", str(store), HISTORY_TASK]),
        (f"tasktrail explain STORE {LIVE_TASK}", ["explain", str(store), LIVE_TASK]),
        (
            f"tasktrail trace STORE {HISTORY_TASK}",
            ["trace", str(store), HISTORY_TASK, "--out", str(store.with_suffix(".trace.json"))],
        ),
        ("tasktrail tasks STORE", ["tasks", str(store)]),
        ("tasktrail replay STORE", ["replay", str(store)]),
        ("tasktrail verify STORE", ["verify", str(store)]),
    ]
    for label, fraction in (("start", 0.01), ("middle", 0.5), ("end", 1.0)):
        until = max(1, int(head * fraction))
        cli.append(
            (
                f"tasktrail replay STORE --until P ({label})",
                ["replay", str(store), "--until", str(until)],
            )
        )
    for name, args in cli:
        _cli_rows(table, name, size, [run_cli(args) for _ in range(cli_rounds)])


def _ms(values: Any) -> Any:
    return [v * 1000 for v in values] if isinstance(values, list) else values


def _cli_rows(table: Table, name: str, size: int, runs: Any) -> None:
    section = "CLI, whole process"
    if isinstance(runs, dict):
        table.add(section, name, "s", size, runs)
        return
    failed = [r for r in runs if r["code"] != 0]
    if failed:
        table.add(
            section,
            name,
            "s",
            size,
            {"missing": f"exit {failed[0]['code']}: {failed[0]['stderr']}"},
        )
        return
    table.add(section, name, "s", size, [r["s"] for r in runs])
    table.add(section, f"{name}: peak RSS", "MB", size, [r["rss_mb"] for r in runs])


def goals(rows: list[dict[str, Any]], sizes: list[int]) -> list[dict[str, Any]]:
    """The issue's goals, each met, missed, or not measured."""

    def figure(measure: str, key: str = "max") -> float | None:
        for row in rows:
            cell = row["by_size"].get(GOAL_SIZE) if row["measure"] == measure else None
            if cell and key in cell:
                return float(cell[key])
        return None

    out = []
    timed = [r for r in rows if r["flat"] is not None]
    grown = [r["measure"] for r in timed if not r["flat"]]
    out.append(
        {
            "goal": f"every row flat (<= {FLAT}x per 10x of history)",
            "met": not grown if timed else None,
            "detail": f"{len(grown)} of {len(timed)} rows grow more: " + "; ".join(grown),
        }
    )
    for goal, value, bound in (
        (
            f"open of the 1M store < {OPEN_GOAL_S} s (median)",
            figure("Scheduler.open", "median"),
            OPEN_GOAL_S,
        ),
        (
            f"open of the 1M store < {OPEN_GOAL_MB:.0f} MB peak RSS",
            figure("peak RSS after open"),
            OPEN_GOAL_MB,
        ),
    ):
        out.append({"goal": goal, "met": None if value is None else value < bound, "detail": value})
    untils = [
        figure(f"tasktrail replay STORE --until P ({label})", "median")
        for label in ("start", "middle", "end")
    ]
    known = [u for u in untils if u is not None]
    out.append(
        {
            "goal": f"replay --until any position of the 1M log < {UNTIL_GOAL_S} s",
            "met": (max(known) < UNTIL_GOAL_S) if len(known) == 3 else None,
            "detail": untils,
        }
    )
    return out


def format_results(results: dict[str, Any]) -> str:
    """The figures as markdown tables."""
    sizes = results["sizes"]
    lines = [f"Machine: {machine_line(results['machine'])}", ""]
    builds = ", ".join(
        f"{s}: {b['events']} events, {b['seconds']:.0f} s"
        + (" (cached)" if b.get("cached") else "")
        for s, b in results["builds"].items()
    )
    lines += [f"Stores built: {builds}", ""]
    head = "| section | measure | unit | " + " | ".join(f"{s:,} events" for s in sizes)
    lines += [head + " | growth per 10x | flat |", "|---" * (len(sizes) + 5) + "|"]
    for row in results["rows"]:
        cells = []
        for size in sizes:
            cell = row["by_size"].get(size) or row["by_size"].get(str(size))
            if not cell:
                cells.append("-")
            elif "missing" in cell:
                cells.append(f"n/a ({str(cell['missing'])[:60]})")
            else:
                cells.append(f"{_num(cell['median'])} ({_num(cell['min'])}-{_num(cell['max'])})")
        factors = ", ".join(f"{f:.2f}x" for f in row["growth_per_10x"]) or "-"
        flat = {True: "yes", False: "NO", None: "-"}[row["flat"]]
        lines.append(
            f"| {row['section']} | {row['measure']} | {row['unit']} | "
            + " | ".join(cells)
            + f" | {factors} | {flat} |"
        )
    lines += ["", "| goal | verdict | figure |", "|---|---|---|"]
    for goal in results["goals"]:
        verdict = {True: "met", False: "MISSED", None: "not measured"}[goal["met"]]
        detail = goal["detail"]
        if isinstance(detail, float):
            detail = _num(detail)
        elif isinstance(detail, list):
            detail = ", ".join("-" if d is None else _num(d) for d in detail)
        lines.append(f"| {goal['goal']} | {verdict} | {detail} |")
    return "\n".join(lines)


def _num(value: float) -> str:
    if value >= 100:
        return f"{value:,.0f}"
    if value >= 1:
        return f"{value:.2f}"
    return f"{value:.3f}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.history", description=__doc__)
    parser.add_argument("--sizes", default="10000,100000,1000000", help="events of history")
    parser.add_argument("--rounds", type=int, default=5, help="rounds of each figure")
    parser.add_argument(
        "--cli-rounds", type=int, default=None, help="rounds of each CLI command (default --rounds)"
    )
    parser.add_argument("--out", type=Path, default=None, help="write the figures as JSON here")
    parser.add_argument(
        "--cache", type=Path, default=ROOT / "benchmarks" / ".cache", help="built stores"
    )
    parser.add_argument("--dir", type=Path, default=None, help="scratch folder (default: temp)")
    args = parser.parse_args(argv)
    sizes = sorted(int(s.replace("_", "")) for s in args.sizes.split(",") if s.strip())
    cli_rounds = args.cli_rounds or args.rounds
    info = machine()
    print(machine_line(info), flush=True)
    table, builds = Table(), {}
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="tasktrail-history-", dir=args.dir) as tmp:
        for size in sizes:
            log = _log
            log(f"store of {size:,} events (cache {args.cache})")
            cached, build = history_store.cached_store(args.cache, size, log=_every(20, log))
            builds[size] = build
            how = "cached" if build["cached"] else "built"
            log(f"  {how}: {build['events']} events, {build['seconds']:.0f} s to build")
            store = Path(tmp) / f"history-{size}.db"
            shutil.copyfile(cached, store)
            measure_size(table, store, size, args.rounds, cli_rounds)
            for leftover in Path(tmp).iterdir():  # the store, its -wal, its workers' locks
                if leftover.is_dir():
                    shutil.rmtree(leftover)
                else:
                    leftover.unlink()
    rows = table.finish()
    results = {
        "machine": info,
        "sizes": sizes,
        "rounds": args.rounds,
        "cli_rounds": cli_rounds,
        "builds": builds,
        "rows": rows,
        "seconds": time.perf_counter() - started,
    }
    results["goals"] = goals(rows, sizes)
    print(format_results(results))
    if args.out is not None:
        args.out.write_text(json.dumps(results, indent=2) + "\n")
    return 0


def _every(n: int, log: Any) -> Any:
    """``log``, passed on one call in ``n`` (build progress)."""
    count = [0]

    def every(message: str) -> None:
        count[0] += 1
        if count[0] % n == 0:
            log(message)

    return every


def _log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


if __name__ == "__main__":
    sys.exit(main())
