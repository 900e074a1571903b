"""5: peak RSS of a replay, and its cost per event as the log grows (each in a subprocess).

Run as ``python -m benchmarks.memory STORE UNTIL OPTIONS_JSON`` it is the child:
it replays ``STORE`` up to position ``UNTIL`` and prints one JSON line with the
events, the seconds, and the peak RSS (``resource.getrusage``) before and after.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from .report import Figure


def _child(store: str, until: int, options: dict[str, Any]) -> dict[str, Any]:
    from tasktrail.replay import replay

    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    started = time.perf_counter()
    state = replay(store, until=until, **options)
    seconds = time.perf_counter() - started
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return {
        "events": state.events,
        "tasks": len(state.tasks),
        "seconds": seconds,
        "base_rss_mb": before / 1024.0,
        "peak_rss_mb": peak / 1024.0,
    }


def measure(store: Path, until: int, options: dict[str, Any]) -> dict[str, Any]:
    """Replay ``store`` up to ``until`` in a fresh interpreter; what the child reported."""
    root = Path(__file__).resolve().parent.parent
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(root), os.environ.get("PYTHONPATH", "")])}
    completed = subprocess.run(
        [sys.executable, "-m", "benchmarks.memory", str(store), str(until), json.dumps(options)],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    result: dict[str, Any] = json.loads(completed.stdout.strip().splitlines()[-1])
    return result


def memory_figures(
    store: Path, sizes: list[int], options: dict[str, Any], label: str
) -> list[Figure]:
    """Per-event cost at each size (flat: the largest within 1.2x of the smallest) and the
    peak RSS at the largest (under 300 MB at 1M events)."""
    results = {size: measure(store, size, options) for size in sizes}
    smallest, largest = sizes[0], sizes[-1]
    cost = {size: r["seconds"] / r["events"] * 1e6 for size, r in results.items()}
    figures = []
    for size in sizes:
        figures.append(
            Figure(
                "5 memory and scale",
                f"replay cost per event at {size:,} events ({label})",
                cost[size],
                "us/ev",
                ratio=cost[size] / cost[smallest],
                goal="<= 1.2x the smallest" if size == largest and size != smallest else "",
                met=(cost[size] / cost[smallest] <= 1.2)
                if size == largest and size != smallest
                else None,
                note=f"ratio: cost / cost at {smallest:,}; peak RSS "
                f"{results[size]['peak_rss_mb']:.0f} MB ({results[size]['tasks']:,} tasks)",
                extra=results[size],
            )
        )
    peak = results[largest]["peak_rss_mb"]
    goal_applies = largest >= 1_000_000
    figures.append(
        Figure(
            "5 memory and scale",
            f"peak RSS replaying {largest:,} events ({label})",
            peak,
            "MB",
            goal="< 300 MB at 1M events" if goal_applies else "",
            met=(peak < 300.0) if goal_applies else None,
            note=f"the interpreter with tasktrail imported: "
            f"{results[largest]['base_rss_mb']:.0f} MB of it",
            extra=results[largest],
        )
    )
    return figures


if __name__ == "__main__":
    print(json.dumps(_child(sys.argv[1], int(sys.argv[2]), json.loads(sys.argv[3]))))
