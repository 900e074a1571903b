"""``python -m benchmarks.concurrency``: agent work that waits, tasktrail beside the
job queues and DBOS (issues 27 and 43).

Tasks of three phases that each wait 200 ms (``--phase-ms``), run by worker processes
at ``WORKERSxCONCURRENCY`` 1x32, 1x128, 1x512 and 4x32, on SQLite and PostgreSQL.
tasktrail's phases are ``async def`` phases that move on by returning the next
phase's name (``next3``; ``--kinds sync3,async3`` runs issue 27's, which checkpoint
inside); beside it, in the same run and interleaved round by round, each peer on its
store: **huey** (``SqliteHuey``), **pgqueuer** and **procrastinate** (PostgreSQL),
each in its recommended async or concurrent mode, a task one job doing three awaits
(``--peer-shape chain``: a chain of three jobs), and **DBOS
Transact** on both (a workflow of three steps: ``dbos`` at its 1 s queue poll,
``dbos-fast`` at ``--dbos-fast-poll``). :mod:`.concurrency_peers` lists them and how
each runs; :mod:`.concurrency_runs` how a round runs: a fresh store, the worker
processes started and ready, ``max(20, workers x concurrency x 10)`` tasks (at most
2,560) submitted in one transaction, and the clock from the first phase's start to the
last task's end.

Beside each rate: the **ideal**, workers x concurrency / (3 x the phase), the ratio
to it, the CPU the worker processes spent per task and, on PostgreSQL, the CPU of the
server's backends that serve them (:mod:`.concurrency_server`), each as the median
and min-max over the rounds; ``--cap`` also caps the ideal by what the system takes
with phases that do not wait. The goals: :mod:`.concurrency_goals`. The peers and
DBOS are the ``bench`` extra (``pip install -e '.[bench]'``); one not installed is
named and left out, and the rest run.
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

from .concurrency_goals import goals, met
from .concurrency_peers import SYSTEMS, missing, runs, versions
from .concurrency_runs import Measured, Run, measure
from .fleet import POSTGRES, Stores
from .report import machine

CONFIGS = ((1, 32), (1, 128), (1, 512), (4, 32))
"""(worker processes, concurrency of each)."""
RESULTS = Path(__file__).resolve().parent / "concurrency-results.json"
PHASE_MS = 200.0
MAX_TASKS = 2560
"""So that the slowest system (DBOS, 15-20 tasks/s under load) fits a 1x512 run."""
PHASES = 3
KINDS = ("next3", "async3", "sync3")
_met = met  # benchmarks.roundtrip's name for it


def tasks_for(workers: int, concurrency: int, scale: float = 1.0) -> int:
    """Enough tasks for a few seconds of work at the ideal rate: ten fills of the slots,
    at most :data:`MAX_TASKS` (1x512: five fills)."""
    return max(2, round(max(20, min(workers * concurrency * 10, MAX_TASKS)) * scale))


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
    phase_s = args.phase_ms / 1000
    try:
        for store in args.stores:
            for kind in args.kinds:
                systems = [s for s in args.systems if runs(s, store, kind)]
                for workers, concurrency in args.configs:
                    tasks = tasks_for(workers, concurrency, args.scale)
                    rounds: dict[str, list[Measured]] = {system: [] for system in systems}
                    for _ in range(args.rounds):
                        for system in systems:  # side by side in each round
                            run = _run(args, system, store, kind, (workers, concurrency), tasks)
                            rounds[system].append(measure(stores, replace(run, wait_s=phase_s)))
                            stores.drop()  # a schema a run: the server's space stays small
                            stores.schemas.clear()
                    for system in systems:
                        cap = None
                        if args.cap:
                            run = _run(args, system, store, kind, (workers, concurrency), tasks)
                            cap = measure(stores, replace(run, wait_s=0.0)).tasks_per_s
                            stores.drop()
                            stores.schemas.clear()
                        key = f"{store}/{system}/{kind}/{workers}x{concurrency}"
                        slots = workers * concurrency
                        results[key] = _figures(rounds[system], slots, tasks, cap, phase_s)
                        print(format_row(key, results[key]), file=sys.stderr, flush=True)
    finally:
        stores.drop()
    return results


def _run(
    args: argparse.Namespace,
    system: str,
    store: str,
    kind: str,
    config: tuple[int, int],
    tasks: int,
) -> Run:
    """One round's run; a DBOS queue polls at its default (1 s) or ``--dbos-fast-poll``."""
    poll = args.dbos_fast_poll if system == "dbos-fast" else 1.0
    run = Run(system, store, kind, config[0], config[1], tasks, dbos_poll_s=poll)
    return replace(run, huey_workers=args.huey_workers, peer_shape=args.peer_shape)


def _figures(
    rounds: list[Measured], slots: int, tasks: int, cap: float | None, phase_s: float
) -> dict[str, Any]:
    unbounded = slots / (PHASES * phase_s)
    ideal = unbounded if cap is None else min(unbounded, cap)
    rates = [r.tasks_per_s for r in rounds]
    server = [r.server_cpu_ms_per_task for r in rounds]
    return {
        "tasks": tasks,
        "phase_s": phase_s,
        "tasks_per_s": spread(rates),
        "ideal": ideal,
        "unbounded_ideal": unbounded,
        "cap": cap,
        "ratio": spread([rate / ideal for rate in rates]),
        "cpu_ms_per_task": spread([r.cpu_ms_per_task for r in rounds]),
        "server_cpu_ms_per_task": None
        if None in server
        else spread([s for s in server if s is not None]),
    }


def format_row(key: str, f: dict[str, Any]) -> str:
    """One configuration as a markdown table row."""
    store, system, kind, config = key.split("/")
    t, r, c = f["tasks_per_s"], f["ratio"], f["cpu_ms_per_task"]
    cap = "-" if f["cap"] is None else f"{f['cap']:.0f}"
    server = f.get("server_cpu_ms_per_task")
    on_server = "-" if server is None else _spread(server, 2)
    return (
        f"| {store} | {system} | {kind} | {config} | {f['tasks']} "
        f"| {_spread(t, 1)} | {f['ideal']:.1f} | {cap} | {_spread(r, 2)} "
        f"| {_spread(c, 2)} | {on_server} |"
    )


def _spread(s: dict[str, float], digits: int) -> str:
    return f"{s['median']:.{digits}f} ({s['min']:.{digits}f}-{s['max']:.{digits}f})"


def format_table(results: dict[str, Any]) -> str:
    """Every configuration, then the goals."""
    lines = [
        "| store | system | phases | workers x concurrency | tasks | tasks/s median (min-max) "
        "| ideal | cap (no wait) | ratio to ideal | CPU ms/task, workers | CPU ms/task, server |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    lines += [format_row(key, f) for key, f in results.items()]
    lines += ["", "| goal | figures | verdict |", "|---|---|---|"]
    lines += [f"| {g} | {figures} | {verdict} |" for g, figures, verdict in goals(results)]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.concurrency", description=__doc__)
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.add_argument("--rounds", type=int, default=3, help="rounds of each (default 3)")
    parser.add_argument("--scale", type=float, default=1.0, help="times the task counts")
    parser.add_argument(
        "--configs",
        type=_parse_configs,
        default=list(CONFIGS),
        help="WORKERSxCONCURRENCY,... (default 1x32,1x128,1x512,4x32)",
    )
    parser.add_argument("--stores", default="sqlite,postgresql", help="sqlite,postgresql")
    parser.add_argument(
        "--kinds",
        default="next3",
        help="phase kinds: next3 (default: async phases returning the next phase's name; "
        "the peers run on it alone), async3, sync3 (issue 27's)",
    )
    parser.add_argument(
        "--systems",
        default=",".join(SYSTEMS),
        help=f"{','.join(SYSTEMS)} (default all; each peer on its own store)",
    )
    parser.add_argument(
        "--phase-ms", type=float, default=PHASE_MS, help="each phase's wait, ms (default 200)"
    )
    parser.add_argument(
        "--cap",
        action="store_true",
        help="also run each system with phases that do not wait, and cap the ideal by it",
    )
    parser.add_argument(
        "--dbos-fast-poll",
        type=float,
        default=0.1,
        help="queue polling interval of 'dbos-fast', s (default 0.1; 'dbos' polls at "
        "DBOS's default, 1 s)",
    )
    parser.add_argument(
        "--huey-workers",
        choices=["greenlet", "thread"],
        default="greenlet",
        help="huey's worker type (default greenlet, its advice for IO-heavy work)",
    )
    parser.add_argument(
        "--peer-shape",
        choices=["single", "chain"],
        default="single",
        help="a job queue's task: one job doing three awaits (default) or a chain of three",
    )
    parser.add_argument("--postgres", default=POSTGRES, help="server URL")
    parser.add_argument(
        "--json",
        help=f"also write the figures here (the run the README reports is {RESULTS.name}: "
        "name it to replace it; nothing is written unless asked)",
    )
    args = parser.parse_args(argv)
    args.stores = _choice(parser, "--stores", args.stores, {"sqlite", "postgresql"})
    args.kinds = _choice(parser, "--kinds", args.kinds, set(KINDS))
    args.systems = _choice(parser, "--systems", args.systems, set(SYSTEMS))
    left_out = {s: missing(s) for s in args.systems if missing(s)}
    for system, modules in left_out.items():
        print(
            f"{system} is not installed ({', '.join(modules)} missing: "
            "pip install -e '.[bench]'): left out, the rest run",
            file=sys.stderr,
        )
    args.systems = [s for s in args.systems if s not in left_out]
    if args.rounds < 1 or not args.scale > 0 or not args.phase_ms >= 0:
        parser.error("--rounds must be >= 1, --scale > 0 and --phase-ms >= 0")
    with tempfile.TemporaryDirectory(prefix="tasktrail-concurrency-") as tmp:
        results = run_all(args, Path(tmp))
    print(format_table(results))
    settings = {
        "rounds": args.rounds,
        "scale": args.scale,
        "phase_ms": args.phase_ms,
        "systems": args.systems,
        "left_out": sorted(left_out),
        "dbos_fast_poll_s": args.dbos_fast_poll,
        "huey_workers": args.huey_workers,
        "peer_shape": args.peer_shape,
        "cap": args.cap,
        "versions": versions(args.systems),
    }
    if args.json:
        figures = {"machine": machine(), "settings": settings, "runs": results}
        Path(args.json).write_text(json.dumps(figures, indent=2) + "\n")
    return 0


def _choice(parser: argparse.ArgumentParser, flag: str, text: str, allowed: set[str]) -> list[str]:
    items = [item for item in text.split(",") if item]
    unknown = [item for item in items if item not in allowed]
    if unknown or not items:
        parser.error(f"{flag}: {', '.join(unknown) or 'nothing'} not among {sorted(allowed)}")
    return items


if __name__ == "__main__":
    sys.exit(main())
