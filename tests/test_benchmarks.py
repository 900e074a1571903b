"""The benchmark package runs and returns well-formed figures (no timing is asserted);
the concurrency benchmark's in tests/test_benchmarks_concurrency.py."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from helpers.bench import END_TO_END, bench_module

_module = bench_module


def _well_formed(figure: object) -> dict[str, object]:
    report = _module("benchmarks.report")
    assert isinstance(figure, report.Figure)
    data = figure.to_dict()
    json.dumps(data)  # JSON-ready, as --json writes it
    assert isinstance(data["value"], float) and math.isfinite(data["value"])
    assert data["value"] > 0 and data["unit"]
    return data


@pytest.mark.parametrize("durability", ["full", "normal"])
def test_per_command_append_gives_a_rate_beside_its_limit(tmp_path: Path, durability: str) -> None:
    append = _module("benchmarks.append")
    workload = _module("benchmarks.workload")
    figure = append.per_command(tmp_path, durability, cycles=3, rounds=1)
    data = _well_formed(figure)
    assert data["unit"] == "ev/s" and data["limit"] > 0
    assert data["ratio"] == pytest.approx(data["value"] / data["limit"])
    assert data["met"] in (True, False) and data["goal"]
    assert data["extra"]["events"] == 3 * workload.EVENTS_PER_CYCLE  # three mixed cycles
    assert (data["eventsourcing"] is not None) == (durability == "full")


def test_batched_append_and_the_table(tmp_path: Path) -> None:
    append = _module("benchmarks.append")
    report = _module("benchmarks.report")
    figures = append.batched(tmp_path, cycles=5, rounds=1)
    for figure in figures:
        _well_formed(figure)
    table = report.format_table(figures)
    assert table.count("\n") == len(figures) + 1  # a header, a rule, a line a figure
    assert "commands end to end" in table
    assert "eventsourcing" in report.machine_line(report.machine())


@END_TO_END
def test_cost_against_history_runs_and_writes_its_json(tmp_path: Path) -> None:
    history = _module("benchmarks.history")
    out, cache = tmp_path / "history.json", tmp_path / "cache"
    argv = ["--sizes", "600", "--rounds", "1", "--cache", str(cache), "--out", str(out)]
    assert history.main([*argv, "--dir", str(tmp_path)]) == 0
    results = json.loads(out.read_text())
    assert results["sizes"] == [600]
    # The store is cached for the next run, keyed by size and generator version.
    assert [p.name for p in cache.glob("*.db")] == ["history-g1-600.db"]
    rows = {row["measure"]: row for row in results["rows"]}
    for measure in ("Scheduler.open", "run_pass()", "tasktrail verify STORE", "live tasks"):
        assert "median" in rows[measure]["by_size"]["600"], rows[measure]
    assert rows["live tasks"]["by_size"]["600"]["median"] == 100
    missing = [r["measure"] for r in results["rows"] if "missing" in r["by_size"]["600"]]
    assert missing == []
    assert results["goals"][0]["goal"].startswith("every row flat")


def test_growth_is_per_tenfold_of_history() -> None:
    history = _module("benchmarks.history")
    cells = {10: {"median": 1.0}, 100: {"median": 10.0}, 10_000: {"median": 10.0}}
    assert history.growth(cells) == pytest.approx([10.0, 1.0])


def test_the_mixed_workload_writes_every_stream_kind(tmp_path: Path) -> None:
    workload = _module("benchmarks.workload")
    from tasktrail.domain import open_store

    events = workload.build_store(tmp_path / "mixed.db", 2, per_batch=1)
    assert events == 2 * workload.EVENTS_PER_CYCLE
    with open_store(tmp_path / "mixed.db") as store:
        kinds = {type(r.event).__name__ for r in store.read()}
    for kind in ("WaitStarted", "TurnCompleted", "WakeupDispatched", "RunDone", "PassFinished"):
        assert kind in kinds


def test_spreads_print_and_a_quick_run_gives_no_verdict(tmp_path: Path) -> None:
    report = _module("benchmarks.report")
    pair = report.pair(100, [1.0, 2.0, 4.0], 200, [1.0, 1.0, 1.0])
    assert pair.spread == (25.0, 100.0) and pair.ratio_spread == (0.125, 0.5)
    figure = report.rate_figure("s", "m", 0.0, "ev/s", pair=pair, goal_ratio=0.5)
    assert figure.met is False and figure.value == 50.0
    assert "(0.12-0.50)" in report.format_table([figure])
    report.without_verdicts([figure])
    assert figure.met is None and "quick: no verdict" in report.format_table([figure])


def test_replay_figures_carry_the_goals_of_issue_15(tmp_path: Path) -> None:
    """Replay with every read model is held to 0.35x of the raw limit, without the
    audit trail to 0.5x; the bounds have no goal."""
    replaying = _module("benchmarks.replaying")
    workload = _module("benchmarks.workload")
    plain_es = _module("benchmarks.plain_es")
    store, es_store = tmp_path / "replay.db", tmp_path / "es.db"
    workload.build_store(store, 3)
    plain_es.save_many(es_store, 3)
    figures = replaying.replay_figures(store, es_store, tmp_path / "x.jsonl", 1)
    figures = [f.to_dict() for f in figures]
    goals = {f["name"]: f["goal"] for f in figures}
    assert goals["from SQLite, every read model"] == goals["from JSONL, every read model"]
    assert "0.35" in goals["from SQLite, every read model"]
    assert "0.5x" in goals["from SQLite, audit=False"]
    assert all(not f["goal"] for f in figures if f["name"].startswith("bound"))


def test_the_structs_probe_counts_every_copy_and_puts_the_fold_back(tmp_path: Path) -> None:
    """The probe of issue 15's lead counts the copies and new states a fold makes (a
    task's new state per submit at least) and leaves the fold's functions as it found
    them; its figures are per event, with a projection for each round."""
    probe = _module("benchmarks.structs_probe")
    workload = _module("benchmarks.workload")
    from tasktrail.domain.tasks import evolve

    store = tmp_path / "probe.db"
    workload.build_store(store, 2)
    before = dict(vars(evolve))
    calls = probe.count_copies(store)
    assert vars(evolve) == before  # every copy function back where it was
    counted = {c.function.__qualname__: c.count for c in calls}
    assert counted["maker(TaskState)"] >= 2 * 4  # four submits a cycle
    assert all(len(c.samples) == min(c.count, probe.SAMPLES) for c in calls)
    figures = probe.probe(store, rounds=1)
    assert figures["events"] == 2 * workload.EVENTS_PER_CYCLE
    for values in figures["us_per_event"].values():
        assert len(values) == 1 and values[0] > 0
    ratios = figures["ratios"]
    assert set(ratios) == {"replay", "replay projected with Structs"}


def test_a_missing_dir_is_refused_by_name(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    main = _module("benchmarks.__main__").main
    with pytest.raises(SystemExit) as exited:
        main(["--quick", "--dir", str(tmp_path / "missing")])
    assert exited.value.code == 2
    assert f"--dir {tmp_path / 'missing'}: no such directory" in capsys.readouterr().err


@END_TO_END
def test_the_roundtrip_benchmark_runs_tasktrail_at_a_tiny_size(tmp_path: Path) -> None:
    """Issue 42's round trip end to end on SQLite: a worker process, this process
    submitting and awaiting results one at a time and from callers on one event loop,
    and the idle pick-up beside them; each figure counted and ordered."""
    roundtrip = _module("benchmarks.roundtrip")
    out = tmp_path / "roundtrip.json"
    argv = ["--quick", "--stores", "sqlite", "--systems", "tasktrail", "--serial", "3"]
    argv += ["--callers", "2", "--per-caller", "2", "--pickups", "2", "--json", str(out)]
    assert roundtrip.main(argv) == 0
    figures = json.loads(out.read_text())
    runs = figures["runs"]
    assert figures["rounds"] == 1 and figures["sizes"]["serial"] == 3
    assert set(runs) == {
        "sqlite/tasktrail/serial",
        "sqlite/tasktrail/concurrent",
        "sqlite/tasktrail/pickup",
    }
    assert [runs[k]["count"] for k in sorted(runs)] == [4, 2, 3]  # concurrent, pickup, serial
    for f in runs.values():
        median, p95 = f["median_ms"], f["p95_ms"]
        assert 0 < median["min"] <= median["median"] <= median["max"] <= p95["max"]
    assert runs["sqlite/tasktrail/concurrent"]["per_s"]["median"] > 0


def test_the_roundtrip_goals_judge_only_what_they_can() -> None:
    """PostgreSQL's pick-up is judged against 10 ms and against twice pgqueuer's 4 ms;
    tasktrail is ahead of DBOS only if both its medians and both its p95s are lower."""
    roundtrip = _module("benchmarks.roundtrip")

    def figures(median: float, p95: float) -> dict[str, object]:
        return {"median_ms": {"median": median}, "p95_ms": {"median": p95}}

    results = {
        "postgresql/tasktrail/pickup": figures(9.0, 20.0),
        "postgresql/tasktrail/serial": figures(10.0, 20.0),
        "postgresql/tasktrail/concurrent": figures(30.0, 90.0),
        "postgresql/dbos-fast/serial": figures(50.0, 60.0),
        "postgresql/dbos-fast/concurrent": figures(40.0, 80.0),
        "sqlite/tasktrail/serial": figures(10.0, 20.0),
    }
    verdicts = {goal: verdict for goal, _, verdict in roundtrip.goals(results)}
    assert verdicts == {
        "pick-up median <= 10 ms on postgresql": "**met**",
        "pick-up median <= 2x pgqueuer on postgresql (8 ms)": "**missed**",
        "round trip ahead of dbos-fast on postgresql": "**missed**",  # concurrent p95
    }


@END_TO_END
def test_the_roundtrip_of_three_phases_runs_and_is_judged(tmp_path: Path) -> None:
    """Issue 43's round trip: tasks of three no-op phases (two checkpoints, then the
    result), judged against 15 ms on SQLite and 25 ms on PostgreSQL, p95 shown."""
    roundtrip = _module("benchmarks.roundtrip")
    out = tmp_path / "three.json"
    argv = ["--quick", "--phases", "3", "--stores", "sqlite", "--systems", "tasktrail"]
    argv += ["--serial", "2", "--callers", "0", "--pickups", "0", "--json", str(out)]
    assert roundtrip.main(argv) == 0
    figures = json.loads(out.read_text())
    assert figures["phases"] == 3 and figures["runs"]["sqlite/tasktrail/serial"]["count"] == 2

    def at(median: float, p95: float) -> dict[str, object]:
        return {"median_ms": {"median": median}, "p95_ms": {"median": p95}}

    results = {
        "sqlite/tasktrail/serial": at(14.0, 30.0),
        "postgresql/tasktrail/serial": at(26.0, 40.0),
    }
    verdicts = {
        goal: (figures_, verdict) for goal, figures_, verdict in roundtrip.goals(results, 3)
    }
    assert verdicts == {
        "three-phase round trip median <= 15 ms on sqlite": ("14.0 ms (p95 30.0 ms)", "**met**"),
        "three-phase round trip median <= 25 ms on postgresql": (
            "26.0 ms (p95 40.0 ms)",
            "**missed**",
        ),
    }
    assert roundtrip.goals(results) == []  # one-phase round trips: no such goal


def test_the_roundtrip_benchmark_refuses_nothing_to_time(
    capsys: pytest.CaptureFixture[str],
) -> None:
    roundtrip = _module("benchmarks.roundtrip")
    with pytest.raises(SystemExit) as exited:
        roundtrip.main(["--serial", "0", "--callers", "0", "--systems", "tasktrail"])
    assert exited.value.code == 2
    assert "nothing to time" in capsys.readouterr().err


@END_TO_END
def test_the_streams_benchmark_runs_at_a_tiny_size(tmp_path: Path) -> None:
    """Issue 44's streams benchmark end to end on SQLite: emit-to-read latency in one
    process and across processes (a worker process, this process reading), and the
    busy tasks' rate with and without a task flooding its stream beside them."""
    streams = _module("benchmarks.streams")
    out = tmp_path / "streams.json"
    argv = ["--quick", "--stores", "sqlite", "--chunks", "3", "--tasks", "2"]
    assert streams.main([*argv, "--window-s", "0.3", "--json", str(out)]) == 0
    runs = json.loads(out.read_text())["runs"]
    assert set(runs) == {
        "sqlite/latency one process",
        "sqlite/latency across processes",
        "sqlite/cost",
    }
    for name in ("one process", "across processes"):
        figures = runs[f"sqlite/latency {name}"]
        assert figures["count"] == 3
        assert 0 < figures["median_ms"]["median"] <= figures["p95_ms"]["max"]
    cost = runs["sqlite/cost"]
    assert cost["phases_per_s_alone"]["median"] > 0 and cost["flood_chunks_per_s"]["median"] > 0
    verdicts = {goal for goal, _, _ in streams.goals(runs)}
    assert "median emit-to-read one process <= 20 ms on sqlite" in verdicts


@END_TO_END
def test_the_flow_benchmark_runs_a_limited_fleet_at_a_tiny_size(tmp_path: Path) -> None:
    """Issue 44's flow-control figure end to end on SQLite: two worker processes on a
    kind limited per tenant, the log folded event by event afterwards; the most running
    per tenant is the limit, never more, and each figure is counted and ordered."""
    flow = _module("benchmarks.flow")
    out = tmp_path / "flow.json"
    argv = ["--quick", "--stores", "sqlite", "--tasks", "8", "--phase-ms", "20"]
    assert flow.main([*argv, "--json", str(out)]) == 0
    figures = json.loads(out.read_text())
    (run,) = figures["runs"]["sqlite"]["rounds"]
    assert figures["sizes"]["limit"] == 2 and figures["rounds"] == 1
    assert run["ended"] == 8 and run["most"] <= 2
    assert run["ideal_ms"] == 20 and 0 < run["ratio"] <= 1.0 + 1e-9
    assert run["makespan_ms"] >= run["first_start_ms"] > 0 and run["phase_ms"] >= 20


def test_the_flow_goals_judge_the_limit_and_the_ratio() -> None:
    flow = _module("benchmarks.flow")
    sizes = flow.Sizes()

    def figures(most: float, ratio: float) -> dict[str, object]:
        return {
            "most": {"median": most, "min": most, "max": most},
            "ratio": {"median": ratio, "min": ratio - 0.1, "max": ratio},
        }

    results = {"sqlite": figures(3, 0.93), "postgresql": figures(4, 0.85)}
    verdicts = [verdict for _, _, verdict in flow.goals(results, sizes)]
    assert verdicts == ["**met**", "**met**", "**missed**", "**missed**"]


@END_TO_END
def test_the_retention_benchmark_runs_at_a_small_size(tmp_path: Path) -> None:
    """Issue 45's benchmark: archive, history across the archive, throughput beside."""
    from benchmarks import retention

    out = tmp_path / "retention.json"
    argv = ["--events", "2000", "--live", "20", "--tasks", "200", "--dir", str(tmp_path)]
    assert retention.main([*argv, "--json", str(out)]) == 0
    figures = json.loads(out.read_text())
    assert figures["store_bytes_after"] < figures["store_bytes_before"]
    assert figures["segment_bytes"] > 0 and figures["history_archived_task_s"] > 0
    assert figures["worker_tasks_per_s_alone"] > 0 and figures["retention_acts_during_run"] >= 0
    # Both workers timed in every alternated round (five by default), side by side.
    assert len(figures["throughput_ratios_by_round"]) == 5
    assert all(rate > 0 for rate in figures["worker_tasks_per_s_with_retention_by_round"])
