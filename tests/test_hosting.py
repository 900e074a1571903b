"""A host's surface (issue 29, item 5): what a service imports from ``tasktrail.domain``,
and docs/hosting.md run as written: its ``python file=NAME`` blocks are the files of
a service (module, executor, runtime, submit script), its ``sh`` blocks run in the
folder holding them (a fleet of ``tasktrail worker`` processes, a job runner, a
submitter, the read commands), and the executor and the runtime it builds are tested
against a scheduler here."""

from __future__ import annotations

import dataclasses
import os
import re
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

import tasktrail.domain
from tasktrail.domain import (
    ActiveJobError,
    IdentityConflictError,
    JobNotFoundError,
    ManualClock,
    Registry,
    Scheduler,
    SubmitRequest,
    TaskDefinition,
)
from tests.conftest import _admin_dsn, require_postgres

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "docs" / "hosting.md"
BLOCK = re.compile(r"^```(python file=(\S+)|sh)\n(.*?)^```$", flags=re.S | re.M)
FLEET_SCHEMA = "hosting_fleet"  # the schema the page's PostgreSQL block names


def blocks() -> list[tuple[str, str | None, str]]:
    """The page's runnable blocks in order: (``python`` or ``sh``, file name, text)."""
    found = []
    for match in BLOCK.finditer(PAGE.read_text()):
        kind = "sh" if match.group(1) == "sh" else "python"
        found.append((kind, match.group(2), match.group(3)))
    return found


def test_every_code_block_of_the_page_is_run_here() -> None:
    fences = re.findall(r"^```(\S*)", PAGE.read_text(), flags=re.M)
    opened = fences[0::2]
    assert len(opened) == len(blocks()) and all(opened), "a block this test does not run"
    for kind, name, text in blocks():
        if kind == "python":  # the reader sees the file's name on its first line
            assert text.startswith(f"# {name}:"), name


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder holding the page's files, as a host lays its service out."""
    folder = tmp_path_factory.mktemp("service")
    for kind, name, text in blocks():
        if kind == "python":
            assert name is not None
            (folder / name).write_text(text)
    return folder


def shell(script: str, folder: Path) -> tuple[int, str, str]:
    """Run one ``sh`` block with bash -e in ``folder``; the processes it leaves in the
    background (workers, a job runner) are stopped with SIGTERM, as an operator stops
    them, once its last command returned."""
    env = {
        **os.environ,
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
    }
    env.pop("PYTHONPATH", None)
    out, err = folder / "sh.out", folder / "sh.err"
    with out.open("w") as stdout, err.open("w") as stderr:
        bash = subprocess.Popen(
            ["bash", "-e", "-c", script],
            cwd=folder,
            env=env,
            stdout=stdout,
            stderr=stderr,
            start_new_session=True,  # its own process group: the background ones too
        )
        try:
            code = bash.wait(timeout=240)
        finally:
            _stop_group(bash.pid)
    return code, out.read_text(), err.read_text()


def _stop_group(group: int) -> None:
    with_signal = signal.SIGTERM
    deadline = time.monotonic() + 30
    while True:
        try:
            os.killpg(group, with_signal)
        except ProcessLookupError:
            return  # every process of the group ended
        if time.monotonic() > deadline:
            with_signal = signal.SIGKILL
        time.sleep(0.2)


def sh_blocks() -> list[str]:
    return [text for kind, _, text in blocks() if kind == "sh"]


def test_the_fleet_on_one_machine_runs_as_written(service: Path) -> None:
    code, out, err = shell(sh_blocks()[0], service)
    assert code == 0, err
    lines = out.splitlines()
    digest, outcome = lines[0].split()
    assert outcome == "completed"
    run_id, status = lines[1].split()
    assert status == "done" and run_id.count("|") == 2
    assert any(line.split()[:4] == [digest, "digest", "terminal", "completed"] for line in lines)
    nightly = run_id.split("|")[0]
    assert any(line.split()[:4] == [nightly, "nightly", "sleeping", "retire"] for line in lines)
    assert any(line.startswith(run_id) and " done " in line for line in lines)
    workers = {line.split()[0]: line.split()[1] for line in lines if line.startswith("w")}
    assert workers == {"w1": "yes", "w2": "yes"}


@pytest.fixture
def fleet_schema() -> Iterator[str]:
    """A schema of this run's own in place of the page's (absent before: the workers create
    it; dropped after): suites running at once on one server never share one."""
    require_postgres()
    import psycopg

    schema = f"{FLEET_SCHEMA}_{uuid.uuid4().hex[:8]}"

    def drop() -> None:
        with psycopg.connect(_admin_dsn(), autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')

    yield schema
    drop()


@pytest.mark.postgres
def test_the_postgresql_fleet_runs_as_written(service: Path, fleet_schema: str) -> None:
    script = sh_blocks()[1]
    assert f'schema={FLEET_SCHEMA}"' in script
    code, out, err = shell(
        script.replace(f"schema={FLEET_SCHEMA}", f"schema={fleet_schema}"), service
    )
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0].split()[1] == "completed" and lines[1].split()[1] == "done"
    assert {line.split()[0] for line in lines[3:]} >= {"pg-1", "pg-2"}


# ─── the page's executor and runtime, against a scheduler ───────────────────


@pytest.fixture
def page(service: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, ModuleType]]:
    """The page's jobtable and inbox modules, imported from the service folder."""
    import importlib

    monkeypatch.syspath_prepend(str(service))
    modules = {name: importlib.import_module(name) for name in ("jobtable", "inbox")}
    yield modules
    for name in modules:
        sys.modules.pop(name, None)


def request(run_id: str = "t|2026-01-05|1", payload: Any = None) -> SubmitRequest:
    return SubmitRequest(
        client_job_id=f"cid-{run_id}",
        run_id=run_id,
        task_id=run_id.split("|")[0],
        task_kind="nightly",
        day="2026-01-05",
        attempt=1,
        trigger="manual",
        tz="UTC",
        payload=payload,
    )


def test_the_job_table_keeps_one_job_per_run(page: dict[str, ModuleType], tmp_path: Path) -> None:
    jobs = page["jobtable"].JobTable(tmp_path / "jobs.db", commands={"nightly": ["true"]})
    job = jobs.submit(request())
    assert job.status == "queued" and job.live
    with pytest.raises(ActiveJobError):  # the same run again: adopt the live job
        jobs.submit(request())
    assert jobs.find_by_client_job_id(job.client_job_id) == job
    assert jobs.snapshot("job-nope") is None and jobs.find_by_client_job_id("nope") is None
    assert jobs.run_next() == job.job_id and jobs.run_next() is None
    ended = jobs.snapshot(job.job_id)
    assert ended.status == "completed" and ended.completed_at is not None
    with pytest.raises(IdentityConflictError):  # its id was used: never run twice
        jobs.submit(request())


def test_the_job_table_refuses_another_runs_id_and_a_run_with_no_command(
    page: dict[str, ModuleType], tmp_path: Path
) -> None:
    jobs = page["jobtable"].JobTable(tmp_path / "jobs.db")
    with pytest.raises(IdentityConflictError, match="no command"):
        jobs.submit(request())
    jobs.submit(request(payload={"command": ["true"]}))
    ours = request(payload={"command": ["true"]})
    taken = dataclasses.replace(ours, run_id="u|2026-01-05|1")  # the same client id
    with pytest.raises(IdentityConflictError, match="is taken"):
        jobs.submit(taken)


def test_the_job_runner_records_a_failed_command(
    page: dict[str, ModuleType], tmp_path: Path
) -> None:
    jobs = page["jobtable"].JobTable(tmp_path / "jobs.db")
    command = [sys.executable, "-c", "import sys; sys.exit('no mail server')"]
    job = jobs.submit(request(payload={"command": command}))
    jobs.run_next()
    failed = jobs.snapshot(job.job_id)
    assert (failed.status, failed.error_code) == ("failed", "exit_1")
    assert failed.error_message == "no mail server"


def test_the_job_table_cancels_queued_jobs_only(
    page: dict[str, ModuleType], tmp_path: Path
) -> None:
    jobs = page["jobtable"].JobTable(tmp_path / "jobs.db", commands={"nightly": ["true"]})
    queued = jobs.submit(request("a|2026-01-05|1"))
    cancelled = jobs.cancel(queued.job_id)
    assert cancelled.applied and cancelled.job.status == "canceled"
    assert jobs.run_next() is None  # a cancelled job is not run
    done = jobs.submit(request("b|2026-01-05|1"))
    jobs.run_next()
    assert not jobs.cancel(done.job_id).applied
    with pytest.raises(JobNotFoundError):
        jobs.cancel("job-nope")
    assert jobs.complete(done.job_id, "answer").response == "answer"


@pytest.mark.parametrize(("command", "status"), [(["true"], "done"), (["false"], "failed")])
def test_runs_go_through_the_job_table_and_reconcile_from_it(
    page: dict[str, ModuleType],
    tmp_path: Path,
    sqlite_url: str,
    command: list[str],
    status: str,
) -> None:
    jobs = page["jobtable"].JobTable(tmp_path / "jobs.db", commands={"nightly": command})
    registry = Registry([TaskDefinition("nightly", 1, {"watch": lambda inv: None})])
    with Scheduler.open(sqlite_url, registry=registry, clock=ManualClock(1_767_600_000_000)) as s:
        s.configure_runs(executor=jobs)
        run_id = s.mint_run(s.submit("nightly"))
        assert s.run(run_id).status == "running"  # submitted: a job is queued
        jobs.run_next()
        s.reconcile()
        assert s.run(run_id).status == status


def test_the_inbox_runtime_delivers_drains_and_cleans_up(
    page: dict[str, ModuleType], tmp_path: Path, sqlite_url: str
) -> None:
    runtime = page["inbox"].InboxRuntime(tmp_path / "agents")
    registry = Registry([TaskDefinition("crew", 1, {"lead": lambda inv: None})])
    clock = ManualClock(1_767_600_000_000)
    with Scheduler.open(sqlite_url, registry=registry, clock=clock) as s:
        crew = s.submit("crew", id="crew")
        turn = s.start_turn(crew, "leader")
        s.controller_pass(runtime=runtime)  # no inbox yet: runtime-unavailable, retried
        assert s.active_turn(crew, "leader").status == "started"  # type: ignore[union-attr]
        (tmp_path / "agents" / "inbox").mkdir(parents=True)
        (tmp_path / "agents" / "outbox").mkdir()
        clock.advance(5_000)  # past the delivery retry
        s.controller_pass(runtime=runtime)
        handed = tmp_path / "agents" / "inbox" / f"crew.{turn}.json"
        assert handed.exists()
        assert s.active_turn(crew, "leader").status == "delivered"  # type: ignore[union-attr]
        (tmp_path / "agents" / "outbox" / f"crew.{turn}.json").write_text(handed.read_text())
        s.controller_pass(runtime=runtime)
        assert s.active_turn(crew, "leader") is None  # drained: the Turn completed
        assert runtime.cleanup(crew, "leader") and not handed.exists()


# ─── the names a host imports ───────────────────────────────────────────────


HOST_NAMES = [
    "WorkerSetup",
    "Executor",
    "Runtime",
    "SubmitRequest",
    "JobSnapshot",
    "JobStatus",
    "CancelResult",
    "DeliveryOutcome",
    "ExecutorError",
    "SubmitError",
    "IdentityConflictError",
    "ActiveJobError",
    "GenerationOrderError",
    "OrphanFenceError",
    "DrainError",
    "TransientError",
    "AnswerCommittingError",
    "JobNotFoundError",
    "ExecutorPersistenceError",
]


@pytest.mark.parametrize("name", HOST_NAMES)
def test_a_host_imports_its_names_from_the_domain(name: str) -> None:
    assert name in tasktrail.domain.__all__
    assert getattr(tasktrail.domain, name) is not None


def test_every_error_an_executor_raises_is_exported() -> None:
    from tasktrail.domain.runs import executor

    raised = {
        name
        for name, value in vars(executor).items()
        if isinstance(value, type) and issubclass(value, executor.ExecutorError)
    }
    assert raised <= set(tasktrail.domain.__all__)


def test_worker_setups_old_import_still_works() -> None:
    from tasktrail.replay.cli.worker_command import WorkerSetup

    assert WorkerSetup is tasktrail.domain.WorkerSetup
