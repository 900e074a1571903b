"""``python -m benchmarks.concurrency`` (issues 27 and 43): tasktrail and the job queues
run at a tiny size, side by side, and the goals judge what they can (no timing is
asserted)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import _admin_dsn, require_postgres
from helpers.bench import END_TO_END, bench_module

_module = bench_module


def _concurrency_run(
    tmp_path: Path, systems: str, kinds: str, *more: str, store: str = "sqlite"
) -> dict[str, object]:
    concurrency = _module("benchmarks.concurrency")
    out = tmp_path / "concurrency.json"
    argv = ["--rounds", "1", "--stores", store, "--kinds", kinds, "--configs", "1x2"]
    argv += ["--scale", "0.1", "--systems", systems, "--json", str(out), "--phase-ms", "100"]
    argv += ["--postgres", _admin_dsn(), *more]
    assert concurrency.main(argv) == 0
    runs: dict[str, object] = json.loads(out.read_text())["runs"]
    return runs


@END_TO_END
def test_the_concurrency_benchmark_runs_tasktrail_at_a_tiny_size(tmp_path: Path) -> None:
    """Issue 27's benchmark end to end on SQLite, both phase kinds, with the no-wait run
    that caps the ideal: every task the marks count, a rate, its ideal and CPU."""
    runs = _concurrency_run(tmp_path, "tasktrail", "sync3,async3", "--cap")
    assert set(runs) == {"sqlite/tasktrail/sync3/1x2", "sqlite/tasktrail/async3/1x2"}
    for figures in runs.values():
        assert isinstance(figures, dict)
        assert figures["tasks"] == 2 and figures["unbounded_ideal"] == pytest.approx(2 / 0.3)
        rate, ratio = figures["tasks_per_s"]["median"], figures["ratio"]["median"]
        assert rate > 0 and figures["cap"] > 0 and figures["cpu_ms_per_task"]["median"] > 0
        assert figures["ideal"] == min(figures["cap"], figures["unbounded_ideal"])
        assert ratio == pytest.approx(rate / figures["ideal"])
        assert figures["server_cpu_ms_per_task"] is None  # SQLite has no server


@END_TO_END
@pytest.mark.postgres
def test_the_concurrency_benchmark_reads_the_servers_cpu_for_tasktrail(tmp_path: Path) -> None:
    """Issue 43's kind (async phases returning the next phase's name) on PostgreSQL:
    the backends serving the worker are found and their CPU counted, beside the
    worker's; no cap run, so the ideal is the unbounded one."""
    require_postgres()
    runs = _concurrency_run(tmp_path, "tasktrail", "next3", store="postgresql")
    figures = runs["postgresql/tasktrail/next3/1x2"]
    assert isinstance(figures, dict) and figures["cap"] is None
    assert figures["ideal"] == figures["unbounded_ideal"] == pytest.approx(2 / 0.3)
    assert figures["cpu_ms_per_task"]["median"] > 0
    assert figures["server_cpu_ms_per_task"]["median"] >= 0  # read, not None


@END_TO_END
@pytest.mark.parametrize(
    ("peer", "store"),
    [
        ("huey", "sqlite"),
        pytest.param("pgqueuer", "postgresql", marks=pytest.mark.postgres),
        pytest.param("procrastinate", "postgresql", marks=pytest.mark.postgres),
    ],
)
@pytest.mark.parametrize("shape", ["single", "chain"])
def test_each_installed_peer_runs_the_workload(
    tmp_path: Path, peer: str, store: str, shape: str
) -> None:
    """Each job queue of issue 43 runs the tasks to their end on its own store, in both
    shapes (every task marked started and ended once: the counts are the marks')."""
    peers = _module("benchmarks.concurrency_peers")
    if peers.missing(peer):
        pytest.skip(f"{peer} is the benchmark's extra: pip install -e '.[bench]'")
    if store == "postgresql":
        require_postgres()
    runs = _concurrency_run(tmp_path, peer, "next3", "--peer-shape", shape, store=store)
    figures = runs[f"{store}/{peer}/next3/1x2"]
    assert isinstance(figures, dict) and figures["tasks"] == 2
    assert figures["tasks_per_s"]["median"] > 0 and figures["cpu_ms_per_task"]["median"] > 0
    assert (figures["server_cpu_ms_per_task"] is None) == (store == "sqlite")


def test_a_peer_not_installed_is_named_and_left_out(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    concurrency = _module("benchmarks.concurrency")
    peers = _module("benchmarks.concurrency_peers")
    monkeypatch.setattr(peers.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(SystemExit):  # --rounds 0: refused after the peers are looked at
        concurrency.main(["--rounds", "0", "--systems", "tasktrail,huey,procrastinate"])
    err = capsys.readouterr().err
    assert "huey is not installed (huey, gevent missing" in err
    assert "procrastinate is not installed (procrastinate missing" in err
    assert "tasktrail is not installed" not in err


def test_the_peers_run_only_where_they_belong() -> None:
    """huey on SQLite, pgqueuer and procrastinate on PostgreSQL, and the job queues on
    issue 43's kind alone; tasktrail and DBOS everywhere."""
    peers = _module("benchmarks.concurrency_peers")
    assert peers.runs("huey", "sqlite", "next3") and not peers.runs("huey", "postgresql", "next3")
    assert not peers.runs("pgqueuer", "sqlite", "next3")
    assert not peers.runs("procrastinate", "postgresql", "async3")
    assert all(peers.runs(s, "postgresql", "sync3") for s in ("tasktrail", "dbos", "dbos-fast"))


@END_TO_END
def test_the_concurrency_benchmark_runs_dbos_beside_it(tmp_path: Path) -> None:
    pytest.importorskip(
        "dbos", reason="DBOS Transact is the benchmark's extra: pip install -e '.[bench]'"
    )
    runs = _concurrency_run(tmp_path, "tasktrail,dbos-fast", "async3")  # DBOS's async3
    assert set(runs) == {"sqlite/tasktrail/async3/1x2", "sqlite/dbos-fast/async3/1x2"}


def test_the_concurrency_goals_judge_only_what_they_can(tmp_path: Path) -> None:
    """Four workers are judged against one only where the store is not the bound; DBOS
    is beaten only if every configuration is ahead."""
    concurrency = _module("benchmarks.concurrency")

    def figures(rate: float, ideal: float, unbounded: float) -> dict[str, object]:
        return {
            "tasks_per_s": {"median": rate},
            "ratio": {"median": rate / ideal},
            "ideal": ideal,
            "unbounded_ideal": unbounded,
        }

    results = {
        "sqlite/tasktrail/sync3/1x32": figures(90, 106.7, 106.7),
        "sqlite/tasktrail/sync3/4x32": figures(150, 200, 426.7),
        "sqlite/tasktrail/sync3/1x8": figures(20, 26.7, 26.7),
        "sqlite/dbos/sync3/1x32": figures(30, 32, 106.7),
        "sqlite/dbos/sync3/1x8": figures(21, 26.7, 26.7),
    }
    verdicts = {goal: verdict for goal, _, verdict in concurrency.goals(results)}
    assert verdicts["1x32 on SQLite >= 0.8 of ideal (sync3)"] == "**met**"
    assert verdicts["4x32 >= 3x 1x32 on sqlite (sync3)"] == "store-bound: no verdict"
    assert verdicts["ahead of dbos on sqlite (sync3)"] == "**missed**"  # 1x8: 20 < 21


def test_issue_43s_goals_hold_tasktrail_to_every_peer_on_its_store() -> None:
    """At least 1.0x each peer at every configuration (a tie is enough), 0.85 of the
    ideal at 1x128 and the worker's CPU at 1x128 within the store's bound."""
    goals = _module("benchmarks.concurrency_goals")

    def figures(rate: float, cpu: float = 1.0, server: float | None = None) -> dict[str, object]:
        return {
            "tasks_per_s": {"median": rate},
            "ratio": {"median": rate / 213.3},
            "cpu_ms_per_task": {"median": cpu},
            "server_cpu_ms_per_task": None if server is None else {"median": server},
        }

    results = {
        "sqlite/tasktrail/next3/1x128": figures(190, cpu=0.9),
        "sqlite/huey/next3/1x128": figures(190),
        "postgresql/tasktrail/next3/1x32": figures(50),
        "postgresql/tasktrail/next3/1x128": figures(150, cpu=1.6, server=0.8),
        "postgresql/pgqueuer/next3/1x32": figures(49),
        "postgresql/pgqueuer/next3/1x128": figures(160),
        "postgresql/procrastinate/next3/1x128": figures(140),
    }
    verdicts = {goal: (f, verdict) for goal, f, verdict in goals.goals(results)}
    assert verdicts[">= 1.0x huey on sqlite (next3)"] == ("1x128 1.00x", "**met**")
    assert verdicts[">= 1.0x pgqueuer on postgresql (next3)"][1] == "**missed**"  # 1x128
    assert verdicts[">= 1.0x procrastinate on postgresql (next3)"][1] == "**met**"
    assert verdicts["1x128 >= 0.85 of ideal on sqlite"] == ("0.89", "**met**")
    assert verdicts["1x128 >= 0.85 of ideal on postgresql"][1] == "**missed**"
    cpu = verdicts["CPU per task at 1x128 <= 1.5 ms on postgresql (the worker's)"]
    assert cpu == ("1.60 ms (+0.80 ms server)", "**missed**")
    assert verdicts["CPU per task at 1x128 <= 1.0 ms on sqlite (the worker's)"][1] == "**met**"


def test_the_concurrency_benchmark_refuses_an_unknown_store(
    capsys: pytest.CaptureFixture[str],
) -> None:
    concurrency = _module("benchmarks.concurrency")
    with pytest.raises(SystemExit) as exited:
        concurrency.main(["--stores", "sqlite,mysql"])
    assert exited.value.code == 2
    assert "--stores: mysql not among" in capsys.readouterr().err


def test_the_concurrency_probe_times_every_append_of_a_worker(tmp_path: Path) -> None:
    """A task is four commands (reserve, two checkpoints, finish), each decided under the
    scheduler's lock; decisions queued together share an append (group commit), so the
    tasks' appends are at least one task's four and at most all of theirs. The probe
    puts the registry's marks back after."""
    probe = _module("benchmarks.concurrency_probe")
    registry = _module("benchmarks.concurrency_registry")
    mark = registry.mark
    figures = probe.probe(tmp_path / "probe.db", "normal", "async3", 2, 3)
    assert registry.mark is mark
    assert 4 <= figures["appends"] <= 3 * 4 and figures["append_s"] > 0
    assert figures["lock_held_s"] > 0 and figures["tasks_per_s"] > 0


def test_the_gaps_probe_times_each_boundary_and_each_slots_turn(tmp_path: Path) -> None:
    """Every task's two boundaries and its end are timed, and a slot's turn for each
    task after the first fill; none is negative (a phase begins after the one before)."""
    gaps = _module("benchmarks.concurrency_gaps")
    figures = gaps.gaps(0.01, 2, 5, tmp_path)
    assert len(figures["boundary 1-2"]) == len(figures["end"]) == 5
    assert len(figures["slot turn"]) == 3
    assert all(x >= 0 for k in ("boundary 1-2", "boundary 2-3", "end") for x in figures[k])
    # A wait never ends before its time: asyncio's timers are late, never early.
    assert len(figures["waits' lateness"]) == 5
    assert all(x >= -0.001 for x in figures["waits' lateness"])
    assert figures["tasks_per_s"] > 0 and figures["ideal"] == pytest.approx(2 / 0.03)
