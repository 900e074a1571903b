"""One round of ``python -m benchmarks.roundtrip`` for one system on one store.

Both sides run the same way: a fresh store, one worker process started and ready (a
``tasktrail worker`` holding its lease, concurrency :data:`SLOTS`; a DBOS executor
listening to its queue, ``worker_concurrency`` :data:`SLOTS`), then, from this process
(not a worker), one warm-up round trip and the timed ones: ``serial`` round trips one at
a time (sync: submit, then wait for the result), then ``callers`` coroutines on one event
loop each doing ``per_caller`` round trips in turn (submit off the loop, await the
result). A round trip is the time from the submit call to the result in hand.

tasktrail: ``Scheduler.submit`` and ``Scheduler.result`` / ``result_async`` (woken by the
store's news). DBOS: ``DBOSClient.enqueue`` / ``enqueue_async`` and the handle's
``get_result`` (which polls every ``poll_s``).
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from tasktrail.domain import Registry, Scheduler, TaskDefinition

from .concurrency_runs import _end
from .fleet import ROOT, Stores, _wait_for_leases

SLOTS = 32
"""Phases (workflows) one worker runs at once: room for every concurrent caller."""
KIND = "echo1"
KINDS = {1: "echo1", 3: "echo3"}
"""The task kind of a round trip of 1 or 3 phases (``--phases``)."""


def _echo(inv: Any) -> None:
    inv.finish("completed", result=inv.memo("n") + 1)


def _to(phase: str) -> Any:
    def step(inv: Any) -> str:
        return phase  # a no-op phase: the next one's name, its checkpoint

    return step


registry = Registry(
    [
        TaskDefinition(KIND, 1, {"start": _echo}),
        TaskDefinition("echo3", 1, {"one": _to("two"), "two": _to("three"), "three": _echo}),
    ]
)
"""What the tasktrail worker runs: one trivial phase that returns its input plus one
(``echo1``), or two no-op phases before it (``echo3``: three phases, three checkpoints)."""


@dataclass(frozen=True)
class Sizes:
    """How many round trips a round times, of tasks of how many phases."""

    serial: int
    callers: int
    per_caller: int
    phases: int = 1


@dataclass
class Timed:
    """One round's round trips, in seconds: one at a time, and the callers' together
    (with the wall time the callers took, for the rate)."""

    serial: list[float] = field(default_factory=list)
    concurrent: list[float] = field(default_factory=list)
    concurrent_wall_s: float = 0.0


def measure(stores: Stores, system: str, store: str, sizes: Sizes, poll_s: float) -> Timed:
    """One round of ``system`` (``tasktrail``, ``dbos`` or ``dbos-fast``) on ``store``."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    if system == "tasktrail":
        return _tasktrail(stores, store, sizes, env)
    return _dbos(stores, store, sizes, env, poll_s)


def _timed(
    sizes: Sizes,
    one: Callable[[int], float],
    one_async: Callable[[int], Awaitable[float]],
) -> Timed:
    one(0)  # warm-up: connections made, code paths loaded
    timed = Timed(serial=[one(n) for n in range(sizes.serial)])

    async def caller(c: int) -> list[float]:
        return [await one_async(c * sizes.per_caller + n) for n in range(sizes.per_caller)]

    async def callers() -> None:
        started = time.perf_counter()
        done = await asyncio.gather(*(caller(c) for c in range(sizes.callers)))
        timed.concurrent_wall_s = time.perf_counter() - started
        timed.concurrent = [s for one_callers in done for s in one_callers]

    if sizes.callers and sizes.per_caller:
        asyncio.run(callers())
    return timed


def _tasktrail(stores: Stores, store: str, sizes: Sizes, env: dict[str, str]) -> Timed:
    location = stores.new(store)
    Scheduler.open(location, worker="setup").close()
    command = [sys.executable, "-m", "tasktrail.replay.cli", "worker"]
    command += ["benchmarks.roundtrip_runs:registry", "--store", location, "--worker", "w0"]
    command += ["--concurrency", str(SLOTS), "--quiet"]
    errors = stores.workdir / f"worker-{uuid.uuid4().hex[:8]}.err"
    with errors.open("wb") as stderr:
        worker = subprocess.Popen(command, cwd=ROOT, env=env, stderr=stderr)
    try:
        _wait_for_leases(location, 1)
        s = Scheduler.open(location, registry=registry, worker="caller")
        try:
            kind = KINDS[sizes.phases]

            def one(n: int) -> float:
                started = time.perf_counter()
                outcome = s.result(s.submit(kind, memos={"n": n}), timeout=60)
                return _checked(started, outcome, n)

            async def one_async(n: int) -> float:
                started = time.perf_counter()
                task_id = await asyncio.to_thread(s.submit, kind, memos={"n": n})
                outcome = await s.result_async(task_id, timeout=60)
                return _checked(started, outcome, n)

            return _timed(sizes, one, one_async)
        finally:
            s.close()
    except Exception as error:
        raise RuntimeError(f"{error}; the worker said: {errors.read_text()[-2000:]}") from error
    finally:
        _end([worker])


def _checked(started: float, outcome: Any, n: int) -> float:
    elapsed = time.perf_counter() - started
    if outcome.status != "completed" or outcome.result != n + 1:
        raise RuntimeError(f"task {n} ended {outcome.status}, result {outcome.result!r}")
    return elapsed


def _dbos(stores: Stores, store: str, sizes: Sizes, env: dict[str, str], poll_s: float) -> Timed:
    from . import concurrency_dbos, roundtrip_dbos

    if store == "sqlite":
        url, schema = f"sqlite:///{stores.workdir / uuid.uuid4().hex[:10]}.sqlite", ""
    else:
        assert stores.postgres is not None
        stores.new("postgresql")
        url, schema = stores.postgres, stores.schemas[-1]
    # A DBOS instance is a process-wide singleton: the system database is made and the
    # queue registered in a process of their own, as the concurrency benchmark does.
    setup = "from benchmarks.concurrency_dbos import prepare; import sys; "
    setup += "prepare(sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4]))"
    arguments = [url, schema, str(SLOTS), str(poll_s)]
    subprocess.run([sys.executable, "-c", setup, *arguments], cwd=ROOT, env=env, check=True)
    command = [sys.executable, "-m", "benchmarks.roundtrip_dbos", url, schema, "e0"]
    executor = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.PIPE)
    try:
        assert executor.stdout is not None
        if executor.stdout.readline().strip() != b"ready":
            raise RuntimeError(f"DBOS on {store}: the executor did not start")
        client = concurrency_dbos.client(url, schema)
        try:
            workflow = roundtrip_dbos.WORKFLOWS[sizes.phases]
            return _timed(
                sizes,
                lambda n: roundtrip_dbos.round_trip(client, n, poll_s, workflow),
                lambda n: roundtrip_dbos.round_trip_async(client, n, poll_s, workflow),
            )
        finally:
            client.destroy()
    finally:
        _end([executor])
