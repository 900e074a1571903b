"""DBOS Transact's side of ``python -m benchmarks.roundtrip``: the same round trip.

``python -m benchmarks.roundtrip_dbos URL SCHEMA EXECUTOR`` is one DBOS executor (the
worker process): :mod:`.concurrency_dbos`'s executor, with the one-step-less workflow
:data:`WORKFLOW` registered too (it returns its argument plus one: DBOS's cheapest
durable unit, as tasktrail's side is one trivial phase). The queue is registered by
:func:`.concurrency_dbos.prepare` before the executor starts, its polling interval the
benchmark's. The callers (:func:`round_trip`, :func:`round_trip_async`) enqueue through a
``DBOSClient`` and wait with the handle's ``get_result``, which polls the system database
every ``poll_s`` (DBOS's default is 1 s).
"""

from __future__ import annotations

import sys
import time

from dbos import DBOS, DBOSClient, EnqueueOptions, WorkflowHandle, WorkflowHandleAsync

from . import concurrency_dbos

WORKFLOW = "echo1"
WORKFLOWS = {1: WORKFLOW, 3: "echo3"}
"""The workflow of a round trip of 1 or 3 steps (``--phases``)."""


@DBOS.workflow(name=WORKFLOW)
def _echo(n: int) -> int:
    return n + 1


@DBOS.step(name="noop_step")
def _noop_step() -> None:
    return None


@DBOS.workflow(name="echo3")
def _echo3(n: int) -> int:
    # Three steps, as tasktrail's echo3 is three phases (each checkpointed).
    _noop_step()
    _noop_step()
    return _plus_one(n)


@DBOS.step(name="plus_one_step")
def _plus_one(n: int) -> int:
    return n + 1


def _options(workflow: str = WORKFLOW) -> EnqueueOptions:
    return {
        "queue_name": concurrency_dbos.QUEUE,
        "workflow_name": workflow,
        "app_version": "bench",
    }


def round_trip(client: DBOSClient, n: int, poll_s: float, workflow: str = WORKFLOW) -> float:
    """Enqueue one workflow, wait for its result; the seconds it took."""
    started = time.perf_counter()
    handle: WorkflowHandle[int] = client.enqueue(_options(workflow), n)
    result = handle.get_result(polling_interval_sec=poll_s)
    elapsed = time.perf_counter() - started
    if result != n + 1:
        raise RuntimeError(f"DBOS returned {result!r} for {n}")
    return elapsed


async def round_trip_async(
    client: DBOSClient, n: int, poll_s: float, workflow: str = WORKFLOW
) -> float:
    """:func:`round_trip` on an event loop (``enqueue_async``, the async handle)."""
    started = time.perf_counter()
    handle: WorkflowHandleAsync[int] = await client.enqueue_async(_options(workflow), n)
    result = await handle.get_result(polling_interval_sec=poll_s)
    elapsed = time.perf_counter() - started
    if result != n + 1:
        raise RuntimeError(f"DBOS returned {result!r} for {n}")
    return elapsed


if __name__ == "__main__":
    sys.exit(concurrency_dbos.main(sys.argv[1:]))
