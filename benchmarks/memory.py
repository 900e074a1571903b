"""5: peak RSS of a replay, and its cost per event as the log grows (each in a subprocess).

Run as ``python -m benchmarks.memory STORE UNTIL OPTIONS_JSON`` it is the child:
it replays ``STORE`` up to position ``UNTIL`` and prints one JSON line with the
events, the seconds, and its peak RSS: ``VmHWM`` of ``/proc/self/status``, with
``resource.getrusage``'s ``ru_maxrss`` beside it (on Linux that one starts at the
parent's peak when the child is forked, so it over-reports for a child of a big
process; the benchmark parent is one).
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


def _high_water_mb() -> float | None:
    """This process's own peak RSS (``VmHWM``), where ``/proc`` tells it."""
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024.0
    except OSError:
        pass
    return None


def _child(store: str, until: int, options: dict[str, Any], replays: int) -> dict[str, Any]:
    from tasktrail.domain import open_store
    from tasktrail.replay import replay

    opened = open_store(store)  # opened first: the time is the replays' alone
    base = _high_water_mb()
    seconds = 0.0
    events = 0
    state = None
    for _ in range(replays):
        state = None  # the last state goes before the next is built
        started = time.perf_counter()
        state = replay(opened, until=until, **options)
        seconds += time.perf_counter() - started
        events += state.events
    assert state is not None
    opened.close()
    peak = _high_water_mb()
    # ru_maxrss (KB on Linux) counts the largest RSS this process ever had, and on
    # Linux it starts at its parent's at fork: a child of a big benchmark process
    # reports the parent's size. VmHWM is this process image's own, from exec on.
    maxrss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
    return {
        "events": events,
        "replays": replays,
        "tasks": len(state.tasks),
        "seconds": seconds,
        "base_rss_mb": base if base is not None else float("nan"),
        "peak_rss_mb": peak if peak is not None else maxrss,
        "ru_maxrss_mb": maxrss,
    }


def measure(store: Path, until: int, options: dict[str, Any], replays: int = 1) -> dict[str, Any]:
    """Replay ``store`` up to ``until``, ``replays`` times, in a fresh interpreter; what
    the child reported."""
    root = Path(__file__).resolve().parent.parent
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(root), os.environ.get("PYTHONPATH", "")]),
    }
    completed = subprocess.run(
        [
            sys.executable,
            "-m",
            "benchmarks.memory",
            str(store),
            str(until),
            json.dumps(options),
            str(replays),
        ],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    result: dict[str, Any] = json.loads(completed.stdout.strip().splitlines()[-1])
    return result


def memory_figures(
    store: Path, sizes: list[int], options: dict[str, Any], label: str, budget: int = 300_000
) -> list[Figure]:
    """Per-event cost at each size (flat: the largest within 1.2x of the smallest) and the
    peak RSS at the largest (under 300 MB at 1M events).

    Each size is replayed in a fresh interpreter, again and again until ``budget``
    events have been folded (once for a size past it), and its cost is the mean: a
    small replay timed once takes a fraction of a second, which a noisy machine
    makes luckier or unluckier than the long one it is compared with."""
    results = {size: measure(store, size, options, max(1, budget // size)) for size in sizes}
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
                note=f"ratio: cost / cost at {smallest:,}; mean of "
                f"{results[size]['replays']} replay(s) in one process; peak RSS "
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
    replays = int(sys.argv[4]) if len(sys.argv) > 4 else 1
    print(json.dumps(_child(sys.argv[1], int(sys.argv[2]), json.loads(sys.argv[3]), replays)))
