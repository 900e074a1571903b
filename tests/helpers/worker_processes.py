"""Starting and watching the processes of tests/test_worker_processes.py.

:class:`Processes` starts ``tasktrail worker worker_workload:registry`` processes
and the plain script of :mod:`worker_workload` (their stderr in files, shown with
a failure), reads what their phases logged, and kills whatever is left at the end
of the test (:func:`processes`). The rest reads the store: the events, each task's
status and restarts.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from helpers.worker_workload import registry
from tasktrail.domain import Scheduler, open_store

HELPERS = Path(__file__).parent
STARTUP_S = 30.0
"""How long a process may take to import and open on a loaded 2-core machine."""


@dataclass
class Child:
    """A process the test started, with its stderr in a file."""

    process: subprocess.Popen[bytes]
    stderr: Path
    signalled_at: float | None = None
    """The wall time (``time.time()``) of the last SIGTERM :func:`exit_after_signals` sent."""

    def output(self) -> str:
        return self.stderr.read_text(errors="replace")[-3000:]

    def closed_after_signal(self) -> float:
        """Seconds from the last SIGTERM to the worker's own "closed" log line: its stop,
        as the worker decided it, apart from the interpreter's exit after it (which a
        starved machine stretches and :func:`exit_after_signals` bounds)."""
        assert self.signalled_at is not None, "no signal was sent"
        for line in self.stderr.read_text(errors="replace").splitlines():
            if " closed: " in line and "tasktrail.worker" in line:
                stamp = datetime.strptime(line[:23], "%Y-%m-%d %H:%M:%S,%f")
                return stamp.timestamp() - self.signalled_at
        raise AssertionError(f"no close line in the worker's log:\n{self.output()}")


class Processes:
    """Starts the worker processes and scripts of one test; kills what is left."""

    def __init__(self, location: str, folder: Path) -> None:
        self.location = location
        self.folder = folder
        self.phase_log = folder / "phases"
        self.phase_log.mkdir()
        self.children: list[Child] = []

    def env(self, phase_s: float, gate: str) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if k != "TASKTRAIL_WORKER"}
        env["PYTHONPATH"] = os.pathsep.join([str(HELPERS), env.get("PYTHONPATH", "")])
        env["TASKTRAIL_PHASE_LOG"] = str(self.phase_log)
        env["PYTHONFAULTHANDLER"] = "1"  # a hung process shows its threads at SIGABRT
        env["TASKTRAIL_TEST_PHASE_S"] = str(phase_s)
        env["TASKTRAIL_TEST_GATE"] = str(self.folder / f"{gate}.gate")
        return env

    def open_gate(self, name: str) -> None:
        """Let the sync phases of ``name`` (started ``gated``) decide now."""
        (self.folder / f"{name}.gate").touch()

    def _start(self, command: list[str], name: str, phase_s: float, gated: bool = False) -> Child:
        stderr = self.folder / f"{name}.stderr"
        with stderr.open("wb") as err:
            process = subprocess.Popen(
                command,
                env=self.env(phase_s, name if gated else "no"),
                stdout=subprocess.PIPE,
                stderr=err,
            )
        child = Child(process, stderr)
        self.children.append(child)
        return child

    def worker(
        self, name: str, *, phase_s: float, options: tuple[str, ...] = (), gated: bool = False
    ) -> Child:
        """``tasktrail worker`` under ``name``, started: its loop runs (it logged so).
        ``gated``: its sync phases also end once :meth:`open_gate` is called for it."""
        command = [sys.executable, "-m", "tasktrail.replay.cli", "worker"]
        command += ["worker_workload:registry", "--store", self.location, "--worker", name]
        command += ["--poll", "50", *options]
        child = self._start(command, name, phase_s, gated)
        wait_for(lambda: f"worker {name} started" in child.output(), STARTUP_S, child)
        return child

    def script(self, run: int, *, phase_s: float) -> tuple[Child, str]:
        """The plain script of worker_workload.py, opened: with the name it got."""
        command = [sys.executable, str(HELPERS / "worker_workload.py"), self.location]
        child = self._start(command, f"script-{run}", phase_s)
        assert child.process.stdout is not None
        line = child.process.stdout.readline().decode()  # the script prints it at once
        assert line.startswith("opened "), (line, child.output())
        return child, line.split()[1]

    def result_waiter(self, task_id: str) -> Child:
        """The caller of worker_workload.py that waits for ``task_id``'s result (not a
        worker), once it waits."""
        command = [sys.executable, str(HELPERS / "worker_workload.py"), "result"]
        child = self._start([*command, self.location, task_id], f"waiter-{task_id}", 0.0)
        assert child.process.stdout is not None
        line = child.process.stdout.readline().decode()
        assert line.strip() == "waiting", (line, child.output())
        return child

    def starts(self, worker: str) -> list[list[str]]:
        log = self.phase_log / f"{worker}.log"
        lines = log.read_text().splitlines() if log.exists() else []
        return [line.split() for line in lines if line.startswith("start ")]

    def ends(self, worker: str) -> list[list[str]]:
        log = self.phase_log / f"{worker}.log"
        lines = log.read_text().splitlines() if log.exists() else []
        return [line.split() for line in lines if line.startswith("end ")]

    def kill_all(self) -> None:
        for child in self.children:
            if child.process.poll() is None:
                child.process.send_signal(signal.SIGCONT)  # a stopped one dies too
                child.process.kill()
            child.process.wait()
            if child.process.stdout is not None:
                child.process.stdout.close()


@contextmanager
def processes(location: str, folder: Path) -> Iterator[Processes]:
    started = Processes(location, folder)
    try:
        yield started
    except BaseException:
        for child in started.children:  # shown with the failure (captured stdout)
            print(f"--- {child.stderr.name} (exit {child.process.poll()}):\n{child.output()}")
        raise
    finally:
        started.kill_all()


def wait_for(condition: Callable[[], Any], timeout_s: float, child: Child | None = None) -> Any:
    """Poll ``condition`` until it holds; fail after ``timeout_s`` (with the child's
    stderr, or as soon as the child exited)."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = condition()
        if value:
            return value
        if child is not None and child.process.poll() is not None:
            pytest.fail(f"exited {child.process.returncode}:\n{child.output()}")
        if time.monotonic() > deadline:
            pytest.fail(f"not within {timeout_s} s" + (f":\n{child.output()}" if child else ""))
        time.sleep(0.05)


def submit(location: str, kind: str, count: int) -> list[str]:
    # One command each, not a batch: a batch's events are stamped as it decides, and
    # a busy worker appending later-stamped ones before it flushes makes it start over.
    submitter = Scheduler.open(location, registry=registry, worker="submitter")
    try:
        return [submitter.submit(kind) for _ in range(count)]
    finally:
        submitter.close()


def events(location: str) -> list[Any]:
    with open_store(location) as store:
        return [recorded.event for recorded in store.read()]


def of(kind: type, location: str) -> list[Any]:
    return [event for event in events(location) if isinstance(event, kind)]


def settled(location: str, task_ids: list[str]) -> dict[str, tuple[str, int]]:
    """Each task's (status, restarts), read by a scheduler opened once all are gone."""
    checker = Scheduler.open(location, registry=registry, worker="checker")
    try:
        return {t: (checker.task(t).status, checker.task(t).restarts) for t in task_ids}
    finally:
        checker.close()


def exit_after_signals(
    child: Child,
    signals: list[float],
    limit_s: float,
    then: Callable[[], None] = lambda: None,
) -> float:
    """Send SIGTERM at each of ``signals`` (s from now), then call ``then``; how long
    after the last signal the process exited (it must exit 0, not before that)."""
    process = child.process
    started = time.monotonic()
    for offset in signals:
        time.sleep(max(0.0, started + offset - time.monotonic()))
        assert process.poll() is None, f"exited before the signal:\n{child.output()}"
        process.send_signal(signal.SIGTERM)
        signalled = time.monotonic()
        child.signalled_at = time.time()
    then()
    try:
        code = process.wait(timeout=limit_s + 10)
    except subprocess.TimeoutExpired:
        process.send_signal(signal.SIGABRT)  # faulthandler: every thread's stack
        process.wait(timeout=5)
        pytest.fail(f"still running {limit_s + 10} s after SIGTERM:\n{child.output()}")
    took = time.monotonic() - signalled
    assert code == 0, child.output()
    return took
