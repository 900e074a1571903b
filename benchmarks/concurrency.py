"""``python -m benchmarks.concurrency``: agent work that waits (issue 27).

Tasks of three phases that each wait 100 ms (``time.sleep`` in sync phases,
``await asyncio.sleep`` in async ones), run by one worker process at concurrency 1,
8, 32 and 128 and by four at 32, on SQLite and PostgreSQL; and **DBOS Transact**
running the same workload in the same run: a workflow of three steps that each wait
100 ms, enqueued on a queue with the same ``worker_concurrency``, on the same kind of
database (its SQLite system database; PostgreSQL). Each run: a fresh store (a SQLite
file, a PostgreSQL schema dropped after), the worker processes started and ready,
``max(20, workers x concurrency x 10)`` tasks submitted in one transaction, and the
clock from the first phase's start to the last task's end (:mod:`.concurrency_runs`).

Beside each rate: the **ideal**, workers x concurrency / 0.3 s, capped by what the
system takes on that store (**cap**: the same run with phases that do not wait), the
ratio to it, the CPU the worker processes spent per task, and the min-max over the
rounds. Goals: one worker at 32 on SQLite at least 0.8 of the ideal; four workers at
32 at least 3x one where the store is not the bound; ahead of DBOS everywhere.
DBOS needs the ``bench`` extra (``pip install -e '.[bench]'``); without it, or with
``--systems tasktrail``, only tasktrail runs.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from dataclasses import replace
from pathlib import Path
from typing import Any

from .concurrency_runs import Run, measure
from .fleet import POSTGRES, Stores
from .report import machine

CONFIGS = ((1, 1), (1, 8), (1, 32), (1, 128), (4, 32))
"""(worker processes, concurrency of each)."""
PHASE_S = 0.1
PHASES = 3


def tasks_for(workers: int, concurrency: int, scale: float = 1.0) -> int:
    """Enough tasks for a few seconds of work at the ideal rate."""
    return max(2, round(max(20, workers * concurrency * 10) * scale))


def spread(values: list[float]) -> dict[str, float]:
    """Median, min and max over the rounds."""
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


def _parse_configs(text: str) -> list[tuple[int, int]]:
    try:
        pairs = [tuple(int(n) for n in item.split("x")) for item in text.split(",")]
    except ValueError:
        message = f"--configs: not WORKERSxCONCURRENCY,...: {text!r}"
        raise argparse.ArgumentTypeError(message) from None
    if not pairs or any(len(p) != 2 or min(p) < 1 for p in pairs):
        raise argparse.ArgumentTypeError(f"--configs: not WORKERSxCONCURRENCY,...: {text!r}")
    return [(p[0], p[1]) for p in pairs]


def dbos_installed() -> bool:
    """Whether DBOS Transact can be imported (the ``bench`` extra)."""
    try:
        import dbos  # noqa: F401
    except ImportError:
        return False
    return True


def run_all(args: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    """Every round of every configuration asked for; the figures by key
    ``store/system/kind/WORKERSxCONCURRENCY``."""
    results: dict[str, Any] = {}
    stores = Stores(workdir, args.postgres or None)
    try:
        for store in args.stores:
            for kind in args.kinds:
                for workers, concurrency in args.configs:
                    tasks = tasks_for(workers, concurrency, args.scale)
                    rounds: dict[str, list[Any]] = {system: [] for system in args.systems}
                    for _ in range(args.rounds):
                        for system in args.systems:  # side by side in each round
                            run = Run(system, store, kind, workers, concurrency, tasks)
                            run = replace(run, dbos_poll_s=_poll(system, args))
                            rounds[system].append(measure(stores, run))
                    for system in args.systems:
                        cap = None
                        if args.cap:
                            run = Run(system, store, kind, workers, concurrency, tasks, 0.0)
                            run = replace(run, dbos_poll_s=_poll(system, args))
                            cap = measure(stores, run).tasks_per_s
                        key = f"{store}/{system}/{kind}/{workers}x{concurrency}"
                        results[key] = _figures(rounds[system], workers * concurrency, tasks, cap)
                        print(key, format_row(key, results[key]), file=sys.stderr, flush=True)
                        stores.drop()
                        stores.schemas.clear()
    finally:
        stores.drop()
    return results


def _poll(system: str, args: argparse.Namespace) -> float:
    """A DBOS queue's polling interval: its default (1 s), or ``--dbos-fast-poll``."""
    return args.dbos_fast_poll if system == "dbos-fast" else 1.0


def _figures(rounds: list[Any], slots: int, tasks: int, cap: float | None) -> dict[str, Any]:
    ideal = slots / (PHASES * PHASE_S)
    if cap is not None:
        ideal = min(ideal, cap)
    rates = [r.tasks_per_s for r in rounds]
    return {
        "tasks": tasks,
        "tasks_per_s": spread(rates),
        "ideal": ideal,
        "unbounded_ideal": slots / (PHASES * PHASE_S),
        "cap": cap,
        "ratio": spread([rate / ideal for rate in rates]),
        "cpu_ms_per_task": spread([r.cpu_ms_per_task for r in rounds]),
    }


def format_row(key: str, f: dict[str, Any]) -> str:
    """One configuration as a markdown table row."""
    store, system, kind, config = key.split("/")
    t, r, c = f["tasks_per_s"], f["ratio"], f["cpu_ms_per_task"]
    cap = "-" if f["cap"] is None else f"{f['cap']:.0f}"
    return (
        f"| {store} | {system} | {kind} | {config} | {f['tasks']} "
        f"| {t['median']:.1f} ({t['min']:.1f}-{t['max']:.1f}) | {f['ideal']:.1f} | {cap} "
        f"| {r['median']:.2f} ({r['min']:.2f}-{r['max']:.2f}) "
        f"| {c['median']:.1f} ({c['min']:.1f}-{c['max']:.1f}) |"
    )


def format_table(results: dict[str, Any]) -> str:
    """Every configuration, then the goals."""
    lines = [
        "| store | system | phases | workers x concurrency | tasks | tasks/s median (min-max) "
        "| ideal | cap (no wait) | ratio to ideal | CPU ms/task |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    lines += [format_row(key, f) for key, f in results.items()]
    lines += ["", "| goal | figures | verdict |", "|---|---|---|"]
    lines += [f"| {g} | {figures} | {verdict} |" for g, figures, verdict in goals(results)]
    return "\n".join(lines)


def goals(results: dict[str, Any]) -> list[tuple[str, str, str]]:
    """The goals of issue 27, each with its figures and verdict (``-``: not measured)."""
    out = []
    median = {k: f["tasks_per_s"]["median"] for k, f in results.items()}
    for kind in ("sync3", "async3"):
        key = f"sqlite/tasktrail/{kind}/1x32"
        if key in results:
            ratio = results[key]["ratio"]["median"]
            out.append(
                (f"1x32 on SQLite >= 0.8 of ideal ({kind})", f"{ratio:.2f}", _met(ratio >= 0.8))
            )
        for store in ("sqlite", "postgresql"):
            one, four = (f"{store}/tasktrail/{kind}/{c}" for c in ("1x32", "4x32"))
            if one in results and four in results:
                times = median[four] / median[one]
                bound = results[four]["ideal"] < results[four]["unbounded_ideal"]
                verdict = "store-bound: no verdict" if bound else _met(times >= 3)
                out.append((f"4x32 >= 3x 1x32 on {store} ({kind})", f"{times:.2f}x", verdict))
            ours = [k for k in results if k.startswith(f"{store}/tasktrail/{kind}/")]
            for other in ("dbos", "dbos-fast"):
                pairs = [(k, k.replace("/tasktrail/", f"/{other}/")) for k in ours]
                pairs = [(a, b) for a, b in pairs if b in results]
                if pairs:
                    ratios = ", ".join(
                        f"{a.split('/')[-1]} {median[a] / median[b]:.2f}x" for a, b in pairs
                    )
                    ahead = all(median[a] > median[b] for a, b in pairs)
                    out.append((f"ahead of {other} on {store} ({kind})", ratios, _met(ahead)))
    return out


def _met(ok: bool) -> str:
    return "**met**" if ok else "**missed**"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.concurrency", description=__doc__)
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.add_argument("--rounds", type=int, default=3, help="rounds of each (default 3)")
    parser.add_argument("--scale", type=float, default=1.0, help="times the task counts")
    parser.add_argument(
        "--configs",
        type=_parse_configs,
        default=list(CONFIGS),
        help="WORKERSxCONCURRENCY,... (default 1x1,1x8,1x32,1x128,4x32)",
    )
    parser.add_argument("--stores", default="sqlite,postgresql", help="sqlite,postgresql")
    parser.add_argument("--kinds", default="sync3,async3", help="phase kinds: sync3,async3")
    parser.add_argument(
        "--systems",
        default="tasktrail,dbos,dbos-fast",
        help="tasktrail,dbos,dbos-fast (default all three)",
    )
    parser.add_argument(
        "--no-cap",
        dest="cap",
        action="store_false",
        help="skip the no-wait runs that cap the ideal",
    )
    parser.add_argument(
        "--dbos-fast-poll",
        type=float,
        default=0.1,
        help="queue polling interval of 'dbos-fast', s (default 0.1; 'dbos' polls at "
        "DBOS's default, 1 s)",
    )
    parser.add_argument("--postgres", default=POSTGRES, help="server URL")
    parser.add_argument("--json", default=None, help="also write the figures to this file")
    args = parser.parse_args(argv)
    args.stores = _choice(parser, "--stores", args.stores, {"sqlite", "postgresql"})
    args.kinds = _choice(parser, "--kinds", args.kinds, {"sync3", "async3"})
    args.systems = _choice(parser, "--systems", args.systems, {"tasktrail", "dbos", "dbos-fast"})
    if not dbos_installed() and set(args.systems) - {"tasktrail"}:
        print(
            "DBOS Transact is not installed (pip install -e '.[bench]'): tasktrail only",
            file=sys.stderr,
        )
        args.systems = [s for s in args.systems if s == "tasktrail"]
    if args.rounds < 1 or not args.scale > 0:
        parser.error("--rounds must be >= 1 and --scale > 0")
    with tempfile.TemporaryDirectory(prefix="tasktrail-concurrency-") as tmp:
        results = run_all(args, Path(tmp))
    print(format_table(results))
    results = {"machine": machine(), "runs": results}
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2) + "\n")
    return 0


def _choice(parser: argparse.ArgumentParser, flag: str, text: str, allowed: set[str]) -> list[str]:
    items = [item for item in text.split(",") if item]
    unknown = [item for item in items if item not in allowed]
    if unknown or not items:
        parser.error(f"{flag}: {', '.join(unknown) or 'nothing'} not among {sorted(allowed)}")
    return items


if __name__ == "__main__":
    sys.exit(main())
