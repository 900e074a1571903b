"""One round of ``python -m benchmarks.concurrency``: a system, a store, a phase kind,
a number of worker processes and their concurrency.

Both sides run the same way: fresh store, worker processes started and ready (a
tasktrail worker holds its lease; a DBOS executor listens to its queue), every task
submitted in one transaction, and the marks the phases leave
(:mod:`.concurrency_marks`) give the clock (the first phase's start to the last task's
end), the tasks done and the CPU of the worker processes in between. On PostgreSQL,
the server's backends that serve the worker processes are read too, from the submit
to the last end (:mod:`.concurrency_server`). Every system is started the same way
(:class:`Started`): its worker processes up and ready, and how to submit the tasks;
the peers' starts are in their own modules (:mod:`.concurrency_peers`).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass

from tasktrail.domain import Scheduler

from .concurrency_marks import ended, window
from .concurrency_server import BackendCpu, local_port
from .fleet import ROOT, Stores, _wait_for_leases


@dataclass(frozen=True)
class Run:
    """What to run: ``workers`` processes of ``concurrency`` each, ``tasks`` tasks of
    ``kind`` (``sync3``, ``async3`` or ``next3``) whose phases each wait ``wait_s``."""

    system: str
    store: str
    kind: str
    workers: int
    concurrency: int
    tasks: int
    wait_s: float = 0.1
    dbos_poll_s: float = 1.0
    huey_workers: str = "greenlet"
    peer_shape: str = "single"
    """A job queue's task: ``single`` (one job doing three awaits) or ``chain``."""
    """huey's worker type: ``greenlet`` (its advice for IO-heavy work) or ``thread``."""


@dataclass(frozen=True)
class Measured:
    """One round's figures."""

    tasks_per_s: float
    cpu_ms_per_task: float
    seconds: float
    server_cpu_ms_per_task: float | None = None
    """The PostgreSQL backends serving the workers, from the submit to the last end;
    ``None`` on SQLite or where they cannot be read."""


@dataclass(frozen=True)
class Started:
    """A system's worker processes, up and ready, and how to submit the run's tasks."""

    processes: list[subprocess.Popen[bytes]]
    submit: Callable[[], None]


def measure(stores: Stores, run: Run) -> Measured:
    """Run one round of ``run`` on a fresh store and read its marks."""
    from .concurrency_peers import starter  # which imports this module's starts

    marks = stores.workdir / f"marks-{uuid.uuid4().hex[:10]}"
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "TASKTRAIL_BENCH_MARKS": str(marks),
        "TASKTRAIL_BENCH_WAIT_S": str(run.wait_s),
    }
    started = starter(run.system)(stores, run, env)
    processes = started.processes
    port = local_port(stores.postgres or "") if run.store == "postgresql" else None
    server = None if port is None else BackendCpu([p.pid for p in processes], port)
    try:
        if server is not None:
            server.open()
        started.submit()
        # Generous: a loaded machine, the slowest configuration, a second of polling.
        deadline = time.monotonic() + 60 + run.tasks * 0.05
        while ended(marks) < run.tasks:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{run}: {ended(marks)} of {run.tasks} tasks ended")
            if any(p.poll() is not None for p in processes):
                raise RuntimeError(f"{run}: a worker process exited early")
            time.sleep(0.05)
    finally:
        if server is not None:
            server.close()
        _end(processes)
    seen = window(marks)
    server_s = None if server is None else server.seconds()
    return Measured(
        tasks_per_s=seen.tasks / seen.seconds,
        cpu_ms_per_task=seen.cpu_s / seen.tasks * 1000,
        seconds=seen.seconds,
        server_cpu_ms_per_task=None if server_s is None else server_s / seen.tasks * 1000,
    )


def submit_by(command: list[str], env: dict[str, str]) -> Callable[[], None]:
    """A submit that runs ``command``, a process of its own, to its end."""

    def submit() -> None:
        subprocess.run(command, cwd=ROOT, env=env, check=True)

    return submit


def wait_ready(run: Run, processes: list[subprocess.Popen[bytes]], what: str) -> None:
    """Until each process printed ``ready`` on its standard output (a pipe)."""
    for process in processes:
        assert process.stdout is not None
        if process.stdout.readline().strip() != b"ready":
            _end(processes)
            raise RuntimeError(f"{run}: {what} did not start")


def _end(processes: list[subprocess.Popen[bytes]]) -> None:
    """SIGTERM each worker process still running, and wait for all of them."""
    for process in processes:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
    for process in processes:
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def tasktrail(stores: Stores, run: Run, env: dict[str, str]) -> Started:
    """``run.workers`` ``tasktrail worker`` processes, each holding its lease; the tasks
    submitted in one ``Scheduler.batch()``."""
    from .concurrency_registry import registry

    location = stores.new(run.store)
    Scheduler.open(location, worker="setup").close()
    processes = []
    errors = stores.workdir / f"workers-{uuid.uuid4().hex[:8]}.err"
    with errors.open("wb") as stderr:
        for n in range(run.workers):
            command = [sys.executable, "-m", "tasktrail.replay.cli", "worker"]
            command += ["benchmarks.concurrency_registry:registry", "--store", location]
            command += ["--worker", f"w{n}", "--concurrency", str(run.concurrency), "--quiet"]
            processes.append(subprocess.Popen(command, cwd=ROOT, env=env, stderr=stderr))
    try:
        _wait_for_leases(location, run.workers)
    except TimeoutError as error:
        _end(processes)  # not left running on a store that is about to be dropped
        raise TimeoutError(f"{error}; the workers said: {errors.read_text()[-2000:]}") from None

    def submit() -> None:
        s = Scheduler.open(location, registry=registry, worker="submitter")
        with s.batch():
            for _ in range(run.tasks):
                s.submit(run.kind)
        s.close()

    return Started(processes, submit)


def dbos(stores: Stores, run: Run, env: dict[str, str]) -> Started:
    """``run.workers`` DBOS executors listening to one queue; the workflows enqueued in
    one transaction (``next3`` runs DBOS's ``async3``: its steps are its checkpoints)."""
    from . import concurrency_dbos

    if run.store == "sqlite":
        url, schema = f"sqlite:///{stores.workdir / uuid.uuid4().hex[:10]}.sqlite", ""
    else:
        assert stores.postgres is not None
        stores.new("postgresql")
        url, schema = stores.postgres, stores.schemas[-1]
    # The system database made and the queue registered in a process of their own (a
    # DBOS instance is a process-wide singleton).
    setup = "from benchmarks.concurrency_dbos import prepare; import sys; "
    setup += "prepare(sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4]))"
    arguments = [url, schema, str(run.concurrency), str(run.dbos_poll_s)]
    subprocess.run([sys.executable, "-c", setup, *arguments], cwd=ROOT, env=env, check=True)
    processes = []
    for n in range(run.workers):
        command = [sys.executable, "-m", "benchmarks.concurrency_dbos", url, schema, f"e{n}"]
        processes.append(
            subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.PIPE, text=False)
        )
    wait_ready(run, processes, "a DBOS executor")
    kind = "sync3" if run.kind == "sync3" else "async3"
    return Started(processes, lambda: concurrency_dbos.enqueue(url, schema, kind, run.tasks))
