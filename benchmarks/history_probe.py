"""What ``benchmarks.history`` measures inside a process of its own, on one store.

``python -m benchmarks.history_probe open STORE``: one ``Scheduler.open``, timed, with
the process's peak RSS before and after, the tasks and streams the world holds.

``python -m benchmarks.history_probe inside STORE ROUNDS CLI_ROUNDS``: on one open
scheduler, each tick with nothing to do, a command's latency, a ``ConflictError``
inside ``batch()``, and ``tasktrail project`` with one new event since the last.

Each prints one JSON object. A call the API does not have (any more) is reported
as ``{"missing": "..."}`` for its row instead of ending the probe.
"""

from __future__ import annotations

import json
import resource
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tasktrail.domain import Scheduler

from .history_store import registry

Row = dict[str, Any]
TICKS = 10
"""At least this many calls of each tick (they take micro- to milliseconds)."""


WRAPPER = """
import json, os, subprocess, sys, time
started = time.perf_counter()
child = subprocess.Popen(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
error = child.stderr.read()
_, status, usage = os.wait4(child.pid, 0)
seconds = time.perf_counter() - started
print(json.dumps({"s": seconds, "rss_mb": usage.ru_maxrss / 1024,
                  "code": os.waitstatus_to_exitcode(status),
                  "stderr": error.decode(errors="replace")[-300:].strip()}))
"""
"""Runs a command and reports its wall time and peak RSS. Linux keeps a process's
``ru_maxrss`` across ``exec``, so a child forked from a process holding a big world
would report that world's size: the command is forked from this small process instead."""


def peak_rss_mb() -> float:
    """This process's peak resident set so far, in MB: ``VmHWM``, which ``exec``
    resets (``ru_maxrss`` would include the parent's size at fork), else ``ru_maxrss``."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def open_probe(store: str) -> dict[str, Any]:
    """One timed open, in this fresh process."""
    before = peak_rss_mb()
    started = time.perf_counter()
    scheduler = Scheduler.open(store, registry=registry(), worker="probe-open")
    seconds = time.perf_counter() - started
    after = peak_rss_mb()
    world = scheduler.world
    tasks = len(getattr(world, "tasks", ()))
    streams = len(getattr(world, "streams", ()))
    live = len(getattr(world, "live", ()))
    scheduler.close()
    return {
        "open_s": seconds,
        "rss_before_mb": before,
        "peak_rss_mb": after,
        "tasks_held": tasks,
        "streams_held": streams,
        "live": live,
    }


def timed(call: Callable[[], Any], rounds: int) -> list[float] | dict[str, str]:
    """Seconds of each of ``rounds`` calls; a missing API is reported, not raised."""
    times: list[float] = []
    for _ in range(rounds):
        try:
            started = time.perf_counter()
            call()
            times.append(time.perf_counter() - started)
        except Exception as error:  # a changed API: report the row, measure the rest
            return {"missing": f"{type(error).__name__}: {error}"}
    return times


def tasktrail_command() -> list[str]:
    """How to run the ``tasktrail`` CLI of this interpreter's environment."""
    script = Path(sys.executable).with_name("tasktrail")
    return [str(script)] if script.exists() else [sys.executable, "-m", "tasktrail.replay.cli"]


def run_cli(args: list[str], timeout: float = 900) -> dict[str, Any]:
    """One whole ``tasktrail`` process: wall seconds, peak RSS (MB), exit code."""
    done = subprocess.run(
        [sys.executable, "-c", WRAPPER, *tasktrail_command(), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    if done.returncode != 0 or not done.stdout.strip():
        return {"s": 0.0, "rss_mb": 0.0, "code": -1, "stderr": done.stderr[-300:]}
    answer: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return answer


def inside_probe(store: str, rounds: int, cli_rounds: int) -> dict[str, Any]:
    """Ticks, commands, a conflict and ``project``, on one open scheduler."""
    from tasktrail.domain.runs.memory_executor import InMemoryExecutor

    s = Scheduler.open(store, registry=registry(), worker="probe")
    rows: dict[str, Any] = {}
    try:
        s.configure_runs(executor=InMemoryExecutor())  # dispatch_due needs one, idle
        ticks = max(rounds, TICKS)
        rows["run_pass()"] = timed(s.run_pass, ticks)
        rows["dispatch_due()"] = timed(s.dispatch_due, ticks)
        rows['controller_pass("full")'] = timed(lambda: s.controller_pass("full"), ticks)
        rows["reconcile()"] = timed(s.reconcile, ticks)
        rows["wake()"] = timed(s.wake, ticks)
        rows["next_turn_deadline()"] = timed(s.next_turn_deadline, ticks)
        for name, part in (
            ("commands", lambda: _commands(s, rounds)),
            ("ConflictError in batch()", lambda: _conflicts(s, store, rounds)),
            ("tasktrail project, 1 new event", lambda: _project(s, store, cli_rounds)),
        ):
            try:
                answer = part()
            except Exception as error:  # a changed API: report the row, measure the rest
                answer = {"missing": f"{type(error).__name__}: {error}"}
            if name == "commands" and "missing" not in answer:
                rows.update(answer)
            else:
                rows[name if name != "commands" else "command: submit"] = answer
        rows["live after"] = len(getattr(s.world, "live", ()))
    finally:
        s.close()
    return rows


def _commands(s: Scheduler, rounds: int) -> dict[str, Any]:
    """A new task's submit, reserve, checkpoint and finish, each timed (it ends, so
    the store keeps its 100 live tasks)."""
    times: dict[str, list[float]] = {"submit": [], "reserve": [], "checkpoint": [], "finish": []}
    for n in range(rounds):
        task_id = f"probe-command-{time.time_ns()}-{n}"
        for name, command, args in (
            ("submit", s.submit, ("sleeper",)),
            ("reserve", s.reserve, (task_id,)),
            ("checkpoint", s.checkpoint, (task_id, "wake")),
            ("finish", s.finish, (task_id, "completed")),
        ):
            kwargs = {"id": task_id} if name == "submit" else {}
            started = time.perf_counter()
            command(*args, **kwargs)
            times[name].append(time.perf_counter() - started)
    return {f"command: {name}": values for name, values in times.items()}


def _conflicts(s: Scheduler, store: str, rounds: int) -> list[float] | dict[str, str]:
    """Seconds from the end of a batch whose task another writer took meanwhile to
    the ``ConflictError`` it raises (the refusal and whatever recovery it does)."""
    from tasktrail.domain.errors import ConflictError

    other = Scheduler.open(store, registry=registry(), worker="probe-other")
    times: list[float] = []
    try:
        for n in range(rounds):
            task_id = s.submit("sleeper", id=f"probe-conflict-{time.time_ns()}-{n}")
            started = 0.0
            try:
                with s.batch():
                    s.reserve(task_id)
                    other.reserve(task_id)  # the other writer takes it first
                    other.finish(task_id, "completed")
                    started = time.perf_counter()
            except ConflictError:
                times.append(time.perf_counter() - started)
            else:
                return {"missing": "no ConflictError: the batch was appended"}
    finally:
        other.close()
    return times


def _project(s: Scheduler, store: str, rounds: int) -> list[dict[str, Any]] | dict[str, str]:
    """``tasktrail project STORE`` after one new event, ``rounds`` times (a first,
    untimed, project brings the read models up to date)."""
    views = Path(store).with_name(Path(store).stem + "-bench-views.db")
    first = run_cli(["project", store, "--out", str(views), "--quiet"])
    if first["code"] != 0:
        return {"missing": f"tasktrail project exited {first['code']}: {first['stderr']}"}
    runs, submitted = [], []
    for n in range(rounds):
        # The one new event: a submit (the tasks are aborted afterwards, so the store
        # keeps its 100 live tasks).
        submitted.append(s.submit("sleeper", id=f"probe-project-{time.time_ns()}-{n}"))
        runs.append(run_cli(["project", store, "--out", str(views), "--quiet"]))
    for task_id in submitted:
        s.abort(task_id)
    s.run_pass()  # the aborted tasks end
    return runs


def main(argv: list[str]) -> int:
    what, store = argv[0], argv[1]
    if what == "open":
        result = open_probe(store)
    else:
        result = inside_probe(store, int(argv[2]), int(argv[3]))
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
