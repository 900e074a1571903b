"""Issue 29, items 1-3 on the command line: ``tasktrail submit``, ``abort``, ``retry`` and
``fork``, each with ``--actor`` / ``--reason`` / ``--json``.

Each case asserts the exit code, what was printed, what ``history --json`` recorded
(the actor and the reason on the act's event), and for a refusal that nothing was
appended. A write command leaves no lease behind and never creates a store.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import orjson
import pytest
from conftest import crash, event_count, reopen
from helpers.cli import folder_state, run
from test_readme import run_blocks

from tasktrail.domain import ManualClock, Registry, Scheduler, open_store
from tasktrail.domain.store.leases import Leases
from tasktrail.replay.cli.act_commands import ACTOR_ENV, default_actor, worker_for

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def store(store_url: str, registry: Registry) -> str:
    """A store (SQLite, then PostgreSQL) holding one pending task ``t1`` of kind ``job``."""
    scheduler = Scheduler.open(store_url, registry=registry, worker="seed")
    scheduler.submit("job", phase="start", id="t1")
    scheduler.close()
    return store_url


def _history(location: str, task: str, capsys: pytest.CaptureFixture[str]) -> list[dict]:  # type: ignore[type-arg]
    ran = run(["history", location, task, "--json"], capsys)
    assert ran.code == 0, ran.err
    return [orjson.loads(line) for line in ran.out.splitlines()]


def _leases(location: str) -> dict[str, object]:
    with open_store(location) as opened:
        return dict(Leases(opened).all())


def test_submit_records_kind_phase_memos_actor_and_reason(
    store: str, capsys: pytest.CaptureFixture[str]
) -> None:
    ran = run(
        ["submit", store, "job", "--phase", "start", "--memo", "n=3", "--memo", 'day="mon"',
         "--owner", "t1", "--actor", "alice", "--reason", "backfill for the audit"],
        capsys,
    )  # fmt: skip
    assert ran.code == 0, ran.err
    assert ran.out.startswith("submitted job at start by alice as ")
    task_id = ran.out.split()[-1]  # the new id, last on its line
    (submitted,) = _history(store, task_id, capsys)
    assert submitted["type"] == "TaskSubmitted" and submitted["owner_id"] == "t1"
    assert submitted["memos"] == {"n": 3, "day": "mon"}
    assert (submitted["actor"], submitted["why"]) == ("alice", "backfill for the audit")
    assert _leases(store) == {}  # its worker's lease went with it


def test_submit_id_version_and_json(store: str, capsys: pytest.CaptureFixture[str]) -> None:
    ran = run(
        ["submit", store, "job", "--phase", "go", "--id", "mine", "--version", "2", "--json"],
        capsys,
    )
    assert ran.code == 0, ran.err
    record = orjson.loads(ran.out)
    assert record["act"] == "submit" and record["task_id"] == "mine"
    assert (record["version"], record["phase"], record["actor"]) == (2, "go", default_actor())
    assert _history(store, "mine", capsys)[0]["version"] == 2


def test_submit_takes_phase_and_version_from_a_registry(
    store: str,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    (tmp_path / "hostdefs.py").write_text(
        "from tasktrail.domain import Registry, TaskDefinition\n"
        "registry = Registry([TaskDefinition('mail', 3, {'draft': lambda t: None})])\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    ran = run(["submit", store, "mail", "--registry", "hostdefs:registry", "--json"], capsys)
    assert ran.code == 0, ran.err
    record = orjson.loads(ran.out)
    assert (record["phase"], record["version"]) == ("draft", 3)


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (["job"], "submit needs --phase"),
        (["job", "--phase", "go", "--memo", "n=three"], "--memo n: 'three' is not JSON"),
        (["job", "--phase", "go", "--memo", "oops"], "give NAME=JSON"),
        (["job", "--phase", "go", "--id", "t1"], "task t1: a task with this id already exists"),
        (["job", "--phase", "go", "--owner", "nobody"], "task nobody: no such task"),
        (["job", "--phase", "go", "--actor", ""], "actor must be a non-empty string"),
        (["job", "--phase", "go", "--version", "0"], "version must be an int >= 1"),
    ],
)
def test_a_refused_submit_exits_2_and_appends_nothing(
    store: str, capsys: pytest.CaptureFixture[str], argv: list[str], words: str
) -> None:
    before = event_count(store)
    ran = run(["submit", store, *argv], capsys)
    assert ran.code == 2 and words in ran.err, ran.err
    assert event_count(store) == before


def test_a_refusal_naming_a_rule_exits_2_with_its_number(
    sqlite_url: str, registry: Registry, capsys: pytest.CaptureFixture[str]
) -> None:
    scheduler = Scheduler.open(sqlite_url, registry=registry, worker="seed")
    owner = scheduler.submit("leaf", id="done")
    scheduler.run_until_idle()  # leaf finishes: terminal
    scheduler.close()
    before = event_count(sqlite_url)
    ran = run(["submit", sqlite_url, "job", "--phase", "go", "--owner", owner], capsys)
    assert ran.code == 2 and "rule 4: owner done is terminal" in ran.err
    assert event_count(sqlite_url) == before


def test_a_write_command_never_creates_a_store(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    before = folder_state(tmp_path)
    for argv in (
        ["submit", str(tmp_path / "new.db"), "job", "--phase", "go"],
        ["abort", str(tmp_path / "new.db"), "t1"],
        ["retry", str(tmp_path / "new.db"), "t1"],
        ["fork", str(tmp_path / "new.db"), "t1"],
    ):
        ran = run(argv, capsys)
        assert ran.code == 2 and "no store at" in ran.err
    assert folder_state(tmp_path) == before  # nothing created


def test_abort_marks_and_records_who_and_why(
    store: str, capsys: pytest.CaptureFixture[str]
) -> None:
    ran = run(["abort", store, "t1", "--actor", "bob", "--reason", "stuck since 09:00"], capsys)
    assert ran.code == 0 and ran.out.strip() == "abort-marked t1 by bob (now pending)"
    mark = _history(store, "t1", capsys)[-1]
    assert (mark["type"], mark["actor"], mark["why"]) == ("AbortMarked", "bob", "stuck since 09:00")
    text = run(["history", store, "t1"], capsys).out.splitlines()[-1]
    assert text.endswith("AbortMarked(actor=bob, why=stuck since 09:00)")
    again = run(["abort", store, "t1", "--json"], capsys)
    assert again.code == 0 and orjson.loads(again.out)["recorded"] is False
    assert len(_history(store, "t1", capsys)) == 2  # the second changed nothing
    assert _leases(store) == {}


def test_abort_of_an_unknown_task_exits_2(store: str, capsys: pytest.CaptureFixture[str]) -> None:
    before = event_count(store)
    ran = run(["abort", store, "nobody"], capsys)
    assert ran.code == 2 and "task nobody: no such task in this store" in ran.err
    assert event_count(store) == before


def test_retry_unparks_a_parked_task_and_says_so_of_one_that_is_not(
    sqlite_url: str, clock: ManualClock, registry: Registry, capsys: pytest.CaptureFixture[str]
) -> None:
    scheduler = reopen(sqlite_url, clock, registry, limit=1)
    scheduler.submit("job", id="p1", phase="start")
    scheduler.reserve("p1")
    crash(scheduler)
    reopen(sqlite_url, clock, registry, limit=1).close()  # recovered: parked at limit 1
    ran = run(["retry", sqlite_url, "p1", "--actor", "carol", "--reason", "disk fixed"], capsys)
    assert ran.code == 0, ran.err
    assert ran.out.startswith("unparked p1 by carol")
    cleared = _history(sqlite_url, "p1", capsys)[-1]
    assert (cleared["type"], cleared["actor"], cleared["why"]) == (
        "RestartsCleared",
        "carol",
        "disk fixed",
    )
    again = run(["retry", sqlite_url, "p1", "--json"], capsys)
    assert again.code == 0 and orjson.loads(again.out)["recorded"] is False
    assert "not parked" in run(["retry", sqlite_url, "p1"], capsys).out


def _failed(location: str, registry: Registry) -> int:
    """``f1``: checkpointed at end (attempt 4) with a memo, then failed; returns the
    position before the failure."""
    clock = ManualClock(1_767_600_000_000)  # whole ms: an event's time prints exactly
    scheduler = Scheduler.open(location, clock=clock, registry=registry, worker="seed")
    scheduler.submit("job", id="f1", phase="start")
    scheduler.reserve("f1")
    scheduler.checkpoint("f1", "end", 4)
    scheduler.memo("f1", "cursor", 7)
    position = scheduler.store.head()
    clock.advance(60_000)
    scheduler.finish("f1", "failed", "bad deploy")
    scheduler.close()
    return position


def test_fork_at_a_position_and_its_lineage_in_history_and_explain(
    store: str, registry: Registry, capsys: pytest.CaptureFixture[str]
) -> None:
    position = _failed(store, registry)
    ran = run(
        ["fork", store, "f1", "--at", str(position), "--id", "f2", "--actor", "dee",
         "--reason", "publishing fixed"],
        capsys,
    )  # fmt: skip
    assert ran.code == 0, ran.err
    assert ran.out.strip() == f"forked f1 as of position {position} at end by dee as f2"
    submitted, forked = _history(store, "f2", capsys)
    assert (submitted["attempt"], submitted["memos"]) == (4, {"cursor": 7})
    assert (submitted["actor"], submitted["why"]) == ("dee", "publishing fixed")
    assert (forked["type"], forked["source_id"], forked["source_position"]) == (
        "TaskForked",
        "f1",
        position,
    )
    explained = run(["explain", store, "f2", "--json"], capsys)
    steps = [orjson.loads(line) for line in explained.out.splitlines()]
    assert steps[0]["actor"] == "dee" and steps[0]["reason"] == "publishing fixed"
    assert (
        steps[1]["why"]
        == f"fork of f1: its checkpoint and memos as it stood at position {position}"
    )
    assert "by dee: publishing fixed" in run(["explain", store, "f2"], capsys).out
    assert _leases(store) == {}


def test_fork_at_a_time_with_json(
    sqlite_url: str, registry: Registry, capsys: pytest.CaptureFixture[str]
) -> None:
    _failed(sqlite_url, registry)
    ran = run(["fork", sqlite_url, "f1", "--at", "2100-01-01T00:00:00Z"], capsys)
    assert ran.code == 2 and "after the scheduler clock's now" in ran.err
    with open_store(sqlite_url, read_only=True) as opened:
        at = opened.stream("f1")[-2].at  # the memo, before the failure
    from tasktrail.domain.tasks.describe import format_at

    ran = run(["fork", sqlite_url, "f1", "--at", format_at(at), "--json"], capsys)
    assert ran.code == 0, ran.err
    record = orjson.loads(ran.out)
    assert record["act"] == "fork" and record["source_id"] == "f1"
    assert (record["phase"], record["attempt"], record["memos"]) == ("end", 4, ["cursor"])
    assert re.fullmatch(r"[0-9a-f]{32}", record["task_id"])


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        ([], "it was terminal there, with no checkpoint"),
        (["--at", "99999"], "beyond the log's end"),
        (["--at", "later"], "neither a position"),
        (["--id", "t1"], "already exists"),
    ],
)
def test_a_refused_fork_exits_2_and_appends_nothing(
    store: str,
    registry: Registry,
    capsys: pytest.CaptureFixture[str],
    argv: list[str],
    words: str,
) -> None:
    position = _failed(store, registry)
    before = event_count(store)
    ran = run(
        [
            "fork",
            store,
            "f1",
            *(argv if argv != ["--id", "t1"] else ["--at", str(position), *argv]),
        ],
        capsys,
    )
    assert ran.code == 2 and words in ran.err, ran.err
    assert event_count(store) == before


def test_the_actor_defaults_to_the_environment_then_user_at_host(
    store: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(ACTOR_ENV, "oncall-7")
    ran = run(["abort", store, "t1"], capsys)
    assert ran.out.strip() == "abort-marked t1 by oncall-7 (now pending)"
    assert _history(store, "t1", capsys)[-1]["actor"] == "oncall-7"
    monkeypatch.delenv(ACTOR_ENV)
    assert re.fullmatch(r"[^@]+@[^@]+", default_actor())
    assert worker_for("alice smith@host") == f"cli-alice_smith@host-{__import__('os').getpid()}"


def test_operating_doc_runs_as_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """docs/operating.md: its python blocks, then every ``tasktrail`` line of its sh
    blocks, in order; the one fork the page says is refused exits 2."""
    page = ROOT / "docs" / "operating.md"
    monkeypatch.chdir(tmp_path)
    run_blocks(page)
    commands = [
        line
        for block in re.findall(r"```sh\n(.*?)```", page.read_text(), flags=re.S)
        for line in block.splitlines()
        if line.startswith("tasktrail ")
    ]
    codes = {}
    for line in commands:
        ran = run(shlex.split(line)[1:], capsys)
        codes[line] = ran.code
        assert ran.code in (0, 2), (line, ran.err)
    assert [line for line, code in codes.items() if code == 2] == [
        "tasktrail fork ops.db report-1 --json"
    ]
    history = _history("ops.db", "report-2", capsys)
    assert history[0]["memos"] == {"day": "2026-01-05"} and history[1]["why"] == "wrong day"
    explained = run(["explain", "ops.db", "report-1c"], capsys).out
    assert "fork of report-1: its checkpoint and memos as it stood at position 4" in explained
    shown = re.findall(r"^\s+(\d+)\s+\S+\s+(\w+)", explained, flags=re.M)
    assert shown == [("12", "TaskSubmitted"), ("13", "TaskForked")]  # as the page shows


def test_the_report_shows_actor_reason_and_lineage(
    store: str, registry: Registry, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    position = _failed(store, registry)
    args = ["--id", "f2", "--actor", "dee", "--reason", "publishing fixed"]
    assert run(["fork", store, "f1", "--at", str(position), *args], capsys).code == 0
    out = tmp_path / "f2.html"
    ran = run(["report", store, "f2", "--out", str(out)], capsys)
    assert ran.code == 0, ran.err
    page = out.read_text()
    assert "by dee: publishing fixed" in page and "fork of f1" in page
