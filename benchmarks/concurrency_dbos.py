"""DBOS Transact's side of ``python -m benchmarks.concurrency``: the same workload.

``python -m benchmarks.concurrency_dbos URL SCHEMA EXECUTOR`` is one DBOS executor
(the worker processes the benchmark starts): a workflow of three steps that each wait
``$TASKTRAIL_BENCH_WAIT_S`` (``sync3``: ``time.sleep`` in sync steps; ``async3``:
``await asyncio.sleep`` in async ones), run from the queue :data:`QUEUE`, whose
``worker_concurrency`` the benchmark registered before starting the executors. It
prints ``ready`` once launched and listening to the queue, and runs until SIGTERM.
:func:`enqueue` submits a run's workflows from the benchmark's process, all in one
transaction (``DBOSClient.enqueue_in_transaction``), as tasktrail's side submits its
tasks in one batch. DBOS's defaults otherwise (its queue polls every second unless
the benchmark asks otherwise: ``--dbos-poll``).
"""

from __future__ import annotations

import asyncio
import signal
import sys
import threading
import time

from dbos import DBOS, DBOSClient, DBOSConfig, EnqueueOptions

from .concurrency_marks import WAIT_S, mark

QUEUE = "bench"
APP = "tasktrail-bench"


@DBOS.step(name="sync_step")
def _sync_step() -> None:
    if WAIT_S:
        time.sleep(WAIT_S)


@DBOS.workflow(name="sync3")
def _sync3() -> None:
    mark("S")
    for _ in range(3):
        _sync_step()
    mark("E")


@DBOS.step(name="async_step")
async def _async_step() -> None:
    if WAIT_S:
        await asyncio.sleep(WAIT_S)


@DBOS.workflow(name="async3")
async def _async3() -> None:
    mark("S")
    for _ in range(3):
        await _async_step()
    mark("E")


def config(url: str, schema: str, executor: str) -> DBOSConfig:
    """The DBOS configuration of one executor on ``url`` (tables in ``schema`` on
    PostgreSQL)."""
    settings: DBOSConfig = {
        "name": APP,
        "system_database_url": url,
        "executor_id": executor,
        "log_level": "WARNING",
        "application_version": "bench",  # the same in every executor and the client
    }
    if url.startswith("postgresql"):
        settings["dbos_system_schema"] = schema
    return settings


def client(url: str, schema: str) -> DBOSClient:
    """A client of the system database at ``url``."""
    if url.startswith("postgresql"):
        return DBOSClient(system_database_url=url, dbos_system_schema=schema, application_name=APP)
    return DBOSClient(system_database_url=url, application_name=APP)


def prepare(url: str, schema: str, concurrency: int, poll_s: float) -> None:
    """Make the system database (a launch does) and register the queue."""
    DBOS(config=config(url, schema, "setup"))
    DBOS.launch()
    DBOS.register_queue(
        QUEUE,
        worker_concurrency=concurrency,
        polling_interval_sec=poll_s,
        on_conflict="always_update",
    )
    DBOS.destroy()


def enqueue(url: str, schema: str, kind: str, count: int) -> None:
    """Enqueue ``count`` workflows of ``kind`` in one transaction."""
    dbos = client(url, schema)
    try:
        options: EnqueueOptions = {
            "queue_name": QUEUE,
            "workflow_name": kind,
            "app_version": "bench",
        }
        engine = dbos._sys_db.engine
        with engine.begin() as conn:
            for _ in range(count):
                dbos.enqueue_in_transaction(conn, options)
    finally:
        dbos.destroy()


def main(argv: list[str]) -> int:
    url, schema, executor = argv
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    DBOS(config=config(url, schema, executor))
    DBOS.launch()
    deadline = time.monotonic() + 60
    while not any(t.name == f"queue-worker-{QUEUE}" for t in threading.enumerate()):
        if time.monotonic() > deadline:
            raise TimeoutError("DBOS did not listen to the queue within 60 s")
        time.sleep(0.05)
    print("ready", flush=True)
    stop.wait()
    DBOS.destroy(workflow_completion_timeout_sec=0)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
