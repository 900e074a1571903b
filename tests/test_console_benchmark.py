"""``python -m benchmarks.console`` runs at a tiny size and writes well-formed figures
(issue 46's load check; no timing is asserted)."""

from __future__ import annotations

import json
import statistics
from pathlib import Path

from helpers.bench import END_TO_END, bench_module


@END_TO_END
def test_the_console_benchmark_runs_at_a_tiny_size(tmp_path: Path) -> None:
    bench = bench_module("benchmarks.console")
    out = tmp_path / "console.json"
    argv = ["--quick", "--tasks", "100", "--rounds", "1", "--seconds", "1", "--probes", "2"]
    assert bench.main([*argv, "--dir", str(tmp_path), "--json", str(out)]) == 0
    figures = json.loads(out.read_text())
    assert figures["tasks"] == 100 and figures["start_s"] > 0 and figures["stop_s"] > 0
    for when in ("idle", "beside"):
        for page in ("list", "task", "api_list"):
            got = figures[when][page]
            assert 0 < got["median"] <= got["p95"] and got["n"] >= 1, (when, page)
    assert figures["news"]["to_event_ms"]["n"] == 2
    worker = figures["worker"]
    assert len(worker["alone_per_s"]) == len(worker["beside_per_s"]) == 1
    # A 1 s window on a loaded machine may close before the worker ended a task: such a
    # pair gives no ratio (it is left out), never a made-up one.
    assert sum(worker["alone_per_s"]) + sum(worker["beside_per_s"]) > 0
    assert all(ratio > 0 for ratio in worker["ratios"])
    assert worker["ratio"] == (statistics.median(worker["ratios"]) if worker["ratios"] else 0.0)
    assert [verdict for _, _, verdict in figures["goals"]] == ["quick: no verdict"] * 3
