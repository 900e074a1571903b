"""The read commands an operator reaches for (issue 29, item 4): ``tasks`` with its
filters, a header and a line when nothing matched; ``runs`` (the ledger) and
``workers`` (the lease table and the tasks held); ``--version``. Each exits 0 with
its output, 2 naming the bad flag, and reads a store without writing to it."""

from __future__ import annotations

import time
from pathlib import Path

import orjson
import pytest

from tasktrail.domain import InMemoryExecutor, ManualClock, Registry, Scheduler, open_store
from tasktrail.domain.store.files import sqlite_tables
from tasktrail.replay.cli import build_parser, main
from tests.conftest import DISPATCH_T0
from tests.helpers.cli import Ran, folder_state, run

# 2026-01-01T08:00:00Z, +1 h, +2 h: three submissions an hour apart.
T0 = DISPATCH_T0
HOUR = 3_600_000


def bad_flag(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    """Run a command argparse refuses: exit 2, and the error text (stderr)."""
    capsys.readouterr()
    with pytest.raises(SystemExit) as exited:
        main(argv)
    assert exited.value.code == 2
    return capsys.readouterr().err


@pytest.fixture
def three(store_url: str, registry: Registry) -> str:
    """A store of three tasks an hour apart: ``a`` (job, ended completed), ``b`` (job,
    pending), ``c`` (leaf, pending)."""
    clock = ManualClock(T0)
    s = Scheduler.open(store_url, clock=clock, registry=registry)
    try:
        s.submit("job", id="a")
        s.run_until_idle()
        clock.advance(HOUR)
        s.submit("job", id="b")
        clock.advance(HOUR)
        s.submit("leaf", id="c")
    finally:
        s.close()
    return store_url


def lines(ran: Ran) -> list[str]:
    return ran.out.splitlines()


# ─── history and explain ────────────────────────────────────────────────────


def test_history_and_explain_print_every_time_as_the_rest_of_their_lines(
    store_url: str, registry: Registry, capsys: pytest.CaptureFixture[str]
) -> None:
    """A sleep's ``until`` and a run's ``retry_after`` are times on the scheduler clock:
    shown as ISO-8601 UTC, as each line's own time is, never as raw milliseconds."""
    s = Scheduler.open(store_url, clock=ManualClock(T0), registry=registry)
    try:
        task = s.submit("job", id="sleeper")
        s.reserve(task)
        s.sleep(task, T0 + 90_000.6218)  # 08:01:30.000Z, with a fraction of a ms
        s.configure_runs(executor=InMemoryExecutor())
        s.mint_run(task)  # its RunMinted names the time it is redriven at: retry_after
    finally:
        s.close()
    history, explained = (
        run(["history", store_url, task], capsys),
        run(["explain", store_url, task], capsys),
    )
    assert history.code == explained.code == 0, (history, explained)
    for ran in (history, explained):
        assert "until=2026-01-01T08:01:30.000Z" in ran.out, ran.out
        assert "1767254" not in ran.out, ran.out  # no time as ms since the epoch
    assert "retry_after=2026-01-01T08:" in explained.out, explained.out
    assert (
        run(["history", store_url, task, "--json"], capsys).out.count(str(T0 + 90_000.6218)) == 1
    )  # JSON keeps the exact number


# ─── tasks ──────────────────────────────────────────────────────────────────


def test_tasks_prints_a_header_then_the_live_tasks(
    three: str, capsys: pytest.CaptureFixture[str]
) -> None:
    ran = run(["tasks", three], capsys)
    assert ran.code == 0
    header, *rows = lines(ran)
    assert header.split() == ["TASK", "KIND", "STATUS", "PHASE", "/", "OUTCOME"]
    assert [row.split()[:3] for row in rows] == [["b", "job", "pending"], ["c", "leaf", "pending"]]


def test_tasks_json_has_no_header_and_stays_json_lines(
    three: str, capsys: pytest.CaptureFixture[str]
) -> None:
    ran = run(["tasks", three, "--json", "--limit", "1"], capsys)
    assert ran.code == 0
    assert [orjson.loads(line)["id"] for line in lines(ran)] == ["b"]
    assert "1 more matched" in ran.err  # said on stderr: stdout stays JSON Lines


@pytest.mark.parametrize(
    ("flags", "ids"),
    [
        (["--kind", "job"], ["b"]),
        (["--kind", "job", "--all"], ["a", "b"]),
        (["--status", "terminal"], ["a"]),
        (["--outcome", "completed"], ["a"]),  # ended tasks: from the whole log
        (["--all", "--since", "2026-01-01T09:00:00Z"], ["b", "c"]),
        (["--all", "--until", "2026-01-01T09:00:00Z"], ["a", "b"]),
        (["--all", "--since", "2026-01-01T08:30:00+00:00", "--until", "2026-01-01T09:30Z"], ["b"]),
        (["--all", "--since", "2026-01-01"], ["a", "b", "c"]),  # a date: midnight UTC
        (["--all", "--limit", "2"], ["a", "b"]),
    ],
)
def test_tasks_filters(
    three: str, flags: list[str], ids: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    ran = run(["tasks", three, *flags, "--json"], capsys)
    assert ran.code == 0
    assert [orjson.loads(line)["id"] for line in lines(ran)] == ids
    human = run(["tasks", three, *flags], capsys)
    assert [row.split()[0] for row in lines(human)[1 : len(ids) + 1]] == ids


def test_tasks_limit_says_how_many_more_matched(
    three: str, capsys: pytest.CaptureFixture[str]
) -> None:
    ran = run(["tasks", three, "--all", "--limit", "1"], capsys)
    assert ran.code == 0
    assert lines(ran)[1].split()[0] == "a"
    assert lines(ran)[-1] == "... 2 more matched (raise --limit to see them)"


@pytest.mark.parametrize(
    ("flags", "said"),
    [
        (["--kind", "nope"], "no live task matches --kind nope"),
        (["--outcome", "failed"], "no task matches --outcome failed"),
        (["--all", "--since", "2027-01-01"], "no task matches --since 2027-01-01T00:00:00.000Z"),
    ],
)
def test_tasks_says_so_when_nothing_matched(
    three: str, flags: list[str], said: str, capsys: pytest.CaptureFixture[str]
) -> None:
    ran = run(["tasks", three, *flags], capsys)
    assert ran.code == 0 and lines(ran) == [said]
    assert run(["tasks", three, *flags, "--json"], capsys).out == ""


def test_tasks_of_a_store_with_no_live_task_says_so(
    store_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with open_store(store_url):
        pass  # an empty store: the log, no event
    ran = run(["tasks", store_url], capsys)
    assert ran.code == 0
    assert lines(ran) == ["no live task in this store (--all lists the ended ones too)"]
    assert lines(run(["tasks", store_url, "--all"], capsys)) == ["no task in this store"]


@pytest.mark.parametrize(
    ("flags", "named"),
    [
        (["--since", "yesterday"], "--since: 'yesterday' is not a time"),
        (["--until", "2026-01-01T09:00:00"], "--until: '2026-01-01T09:00:00' needs a time zone"),
        (["--limit", "0"], "--limit: 0 is not at least 1"),
        (["--limit", "ten"], "--limit: 'ten' is not a whole number"),
        (["--outcome", "exploded"], "--outcome: invalid choice: 'exploded'"),
    ],
)
def test_tasks_bad_flags_exit_2_naming_the_flag(
    sqlite_url: str, flags: list[str], named: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert named in bad_flag(["tasks", sqlite_url, *flags], capsys)


def test_tasks_since_after_until_is_bad_input(
    three: str, capsys: pytest.CaptureFixture[str]
) -> None:
    ran = run(["tasks", three, "--since", "2026-01-02", "--until", "2026-01-01"], capsys)
    assert ran.code == 2 and "--since is after --until" in ran.err and ran.out == ""


# ─── runs ───────────────────────────────────────────────────────────────────


@pytest.fixture
def ledger(store_url: str, registry: Registry) -> str:
    """A store with three runs: ``a``'s done on 2026-01-01, ``b``'s failed, ``c``'s in
    flight on 2026-01-02; ``a`` and ``b`` then ended, and a snapshot taken."""
    clock = ManualClock(T0)
    executor = InMemoryExecutor()
    s = Scheduler.open(store_url, clock=clock, registry=registry)
    try:
        s.configure_runs(executor=executor)
        for task in ("a", "b", "c"):
            s.submit("job", id=task, phase="start")
        done = s.mint_run("a")
        executor.finish(s.run(done).job_id or "", "completed")
        failed = s.mint_run("b")
        executor.finish(s.run(failed).job_id or "", "failed", error_code="boom")
        s.reconcile()
        clock.advance(24 * HOUR)
        s.mint_run("c")
        for task in ("a", "b"):
            s.reserve(task)
            s.finish(task, "completed")
    finally:
        s.close()
    # close took a snapshot: it keeps no run of an ended task
    return store_url


def test_runs_lists_the_whole_ledger_under_a_header(
    ledger: str, capsys: pytest.CaptureFixture[str]
) -> None:
    ran = run(["runs", ledger], capsys)
    assert ran.code == 0
    header, *rows = lines(ran)
    assert header.split()[:4] == ["RUN", "STATUS", "TRIGGER", "SUBMITS"]
    assert [row.split()[:3] for row in rows] == [
        ["a|2026-01-01|1", "done", "manual"],
        ["b|2026-01-01|1", "failed", "manual"],
        ["c|2026-01-02|1", "running", "manual"],
    ]
    assert "boom" in rows[1]


@pytest.mark.parametrize(
    ("flags", "ids"),
    [
        (["--live"], ["c|2026-01-02|1"]),
        (["--day", "2026-01-01"], ["a|2026-01-01|1", "b|2026-01-01|1"]),
        (["--task", "b"], ["b|2026-01-01|1"]),
        (["--live", "--day", "2026-01-01"], []),
    ],
)
def test_runs_filters(
    ledger: str, flags: list[str], ids: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    ran = run(["runs", ledger, *flags, "--json"], capsys)
    assert ran.code == 0
    assert [orjson.loads(line)["run_id"] for line in lines(ran)] == ids


def test_runs_says_so_when_nothing_matched(
    ledger: str, store_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert lines(run(["runs", ledger, "--task", "zz"], capsys)) == ["no run matches --task zz"]
    live = run(["runs", ledger, "--live", "--day", "2026-01-01"], capsys)
    assert lines(live) == ["no live run matches --day 2026-01-01"]


def test_runs_of_a_store_with_no_run(sqlite_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    with open_store(sqlite_url):
        pass
    ran = run(["runs", sqlite_url], capsys)
    assert ran.code == 0 and lines(ran) == ["no run in this store"]
    assert run(["runs", sqlite_url, "--json"], capsys).out == ""


@pytest.mark.parametrize("day", ["2026-13-01", "01/05/2026", "2026-1-5"])
def test_runs_bad_day_exits_2_naming_it(
    sqlite_url: str, day: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert f"--day: {day!r} is not a day" in bad_flag(["runs", sqlite_url, "--day", day], capsys)


# ─── workers ────────────────────────────────────────────────────────────────


def test_workers_shows_live_and_expired_workers_and_what_they_hold(
    store_url: str, registry: Registry, capsys: pytest.CaptureFixture[str]
) -> None:
    # Leases compare against this machine's clock: the fleet's clock two minutes ago.
    clock = ManualClock(time.time() * 1000 - 120_000)
    live = Scheduler.open(store_url, clock=clock, registry=registry, worker="w1", lease=HOUR)
    stale = Scheduler.open(store_url, clock=clock, registry=registry, worker="w3", lease=1_000)
    try:
        held = live.submit("leaf", id="held")
        live.reserve(held)
        stale.store.close()  # w3 crashed: its lease ran out long ago
        ran = run(["workers", store_url], capsys)
        assert ran.code == 0
        header, *rows = lines(ran)
        assert header.split()[:3] == ["WORKER", "LIVE", "LAST"]
        assert [row.split()[:2] for row in rows] == [["w1", "yes"], ["w3", "no"]]
        assert rows[0].rstrip().endswith("1  held")
        assert rows[1].rstrip().endswith(" 0")
        docs = [orjson.loads(line) for line in lines(run(["workers", store_url, "--json"], capsys))]
        assert [(d["worker"], d["live"], d["running"]) for d in docs] == [
            ("w1", True, ["held"]),
            ("w3", False, []),
        ]
        assert docs[0]["expires_at"] == docs[0]["renewed_at"] + HOUR
    finally:
        live.close()


def test_a_worker_with_a_running_task_and_no_lease_is_gone(
    sqlite_url: str, registry: Registry, capsys: pytest.CaptureFixture[str]
) -> None:
    import sqlite3

    clock = ManualClock(time.time() * 1000)
    s = Scheduler.open(sqlite_url, clock=clock, registry=registry, worker="w9", lease=HOUR)
    s.reserve(s.submit("leaf", id="stranded"))
    s.store.close()  # w9 crashed holding a task ...
    with sqlite3.connect(sqlite_url) as db:  # ... and its lease row is gone
        db.execute("DELETE FROM tasktrail_leases WHERE worker = 'w9'")
    ran = run(["workers", sqlite_url], capsys)
    assert ran.code == 0
    row = lines(ran)[1].split()
    assert row[:4] == ["w9", "gone", "-", "-"] and row[-2:] == ["1", "stranded"]


def test_workers_of_a_store_no_worker_ran_on_creates_no_lease_table(
    store_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with open_store(store_url):
        pass  # a writer that is no worker: no lease table
    local = Path(store_url) if not store_url.startswith("postgresql") else None
    before = folder_state(local.parent) if local else None
    ran = run(["workers", store_url], capsys)
    assert ran.code == 0
    assert lines(ran) == ["no worker in this store (none holds a lease or a running task)"]
    assert run(["workers", store_url, "--json"], capsys).out == ""
    if local is not None:
        assert folder_state(local.parent) == before  # byte for byte, no -wal or -shm
        assert "tasktrail_leases" not in sqlite_tables(local)
    else:
        import psycopg

        with psycopg.connect(store_url.split("?")[0]) as conn:
            schema = store_url.split("schema=")[1]
            found = conn.execute("SELECT to_regclass(%s)", (f'"{schema}".tasktrail_leases',))
            assert found.fetchone() == (None,)


def test_read_commands_refuse_a_missing_store(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for command in ("tasks", "runs", "workers"):
        ran = run([command, str(tmp_path / "nope.db")], capsys)
        assert ran.code == 2 and "no store at" in ran.err, command
    assert list(tmp_path.iterdir()) == []


# ─── help and version ───────────────────────────────────────────────────────


@pytest.mark.parametrize("command", ["tasks", "runs", "workers"])
def test_each_read_command_has_help_that_teaches(
    command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        main([command, "--help"])
    assert exited.value.code == 0
    text = capsys.readouterr().out
    assert "examples:" in text and f"tasktrail {command} " in text
    assert "only read" in " ".join(text.split())


def test_version_is_the_installed_distributions(capsys: pytest.CaptureFixture[str]) -> None:
    from importlib.metadata import version

    import tasktrail

    with pytest.raises(SystemExit) as exited:
        main(["--version"])
    assert exited.value.code == 0
    assert capsys.readouterr().out == f"tasktrail {version('tasktrail')}\n"
    assert tasktrail.__version__ == version("tasktrail")
    assert "--version" in build_parser().format_help()
