"""procrastinate's side of ``python -m benchmarks.concurrency``: the same workload on
PostgreSQL.

A task is **one job doing three awaits** (``single``, the default: the least a peer
records) or, with ``--peer-shape chain``, a **chain of three jobs** (``one``, ``two``,
``three`` on one queue), each an ``async def`` that awaits ``$TASKTRAIL_BENCH_WAIT_S``
and defers the next before it returns, so each phase is recorded before the next
starts, as a tasktrail checkpoint is (the defer and the job's own completion are two
writes, not one). A
worker process is one procrastinate worker run as its docs advise for async tasks
(``run_worker_async(concurrency=...)``, the worker's concurrency; its
``PsycopgConnector`` and pool at their defaults), in the run's own PostgreSQL schema
(the connections' ``search_path``); its other settings are its defaults
(LISTEN/NOTIFY with polling behind it).

``main(["worker", URL, SCHEMA, CONCURRENCY])`` (a process of its own, :func:`start`) is
one worker (``ready`` once it started); ``setup URL SCHEMA`` applies the schema;
``submit URL SCHEMA SHAPE COUNT`` defers the tasks' first jobs in one statement.
"""

from __future__ import annotations

import asyncio
import logging
import subprocess
import sys
from typing import TYPE_CHECKING, Any

from .concurrency_marks import WAIT_S, mark

if TYPE_CHECKING:
    from .concurrency_runs import Run, Started
    from .fleet import Stores

QUEUE = "bench"


def make(url: str, schema: str) -> tuple[Any, dict[str, Any]]:
    """The procrastinate app in ``schema``, and the task a run defers by shape."""
    from procrastinate import App, PsycopgConnector

    connector = PsycopgConnector(conninfo=url, kwargs={"options": f"-c search_path={schema}"})
    app = App(connector=connector)

    @app.task(name="three", queue=QUEUE)
    async def three() -> None:
        await asyncio.sleep(WAIT_S)
        mark("E")

    @app.task(name="two", queue=QUEUE)
    async def two() -> None:
        await asyncio.sleep(WAIT_S)
        await three.defer_async()

    @app.task(name="one", queue=QUEUE)
    async def one() -> None:
        mark("S")
        await asyncio.sleep(WAIT_S)
        await two.defer_async()

    @app.task(name="single", queue=QUEUE)
    async def single() -> None:
        mark("S")
        for _ in range(3):
            await asyncio.sleep(WAIT_S)
        mark("E")

    return app, {"chain": one, "single": single}


class _Ready(logging.Handler):
    """Prints ``ready`` when the worker logs its start (it fetches jobs right after)."""

    def emit(self, record: logging.LogRecord) -> None:
        if getattr(record, "action", None) == "start_worker":
            print("ready", flush=True)


async def _worker(url: str, schema: str, concurrency: int) -> None:
    app, _ = make(url, schema)
    logger = logging.getLogger("procrastinate")
    logger.setLevel(logging.INFO)
    logger.addHandler(_Ready())
    async with app.open_async():
        # SIGTERM stops it (procrastinate's own signal handlers)
        await app.run_worker_async(queues=[QUEUE], concurrency=concurrency)


async def _setup(url: str, schema: str) -> None:
    app, _ = make(url, schema)
    async with app.open_async():
        await app.schema_manager.apply_schema_async()


async def _submit(url: str, schema: str, shape: str, count: int) -> None:
    app, first = make(url, schema)
    async with app.open_async():
        await first[shape].batch_defer_async(*({} for _ in range(count)))


def start(stores: Stores, run: Run, env: dict[str, str]) -> Started:
    """The schema applied in a fresh PostgreSQL schema, ``run.workers`` workers up; the
    submit."""
    from .concurrency_runs import Started, submit_by, wait_ready
    from .fleet import ROOT

    assert stores.postgres is not None
    stores.new("postgresql")
    url, schema = stores.postgres, stores.schemas[-1]
    # Not ``-m``: procrastinate warns of an app made in ``__main__`` (its tasks' names)
    here = [sys.executable, "-c", _RUN]
    subprocess.run([*here, "setup", url, schema], cwd=ROOT, env=env, check=True)
    processes = []
    for _ in range(run.workers):
        command = [*here, "worker", url, schema, str(run.concurrency)]
        processes.append(subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.PIPE))
    wait_ready(run, processes, "a procrastinate worker")
    return Started(
        processes, submit_by([*here, "submit", url, schema, run.peer_shape, str(run.tasks)], env)
    )


_RUN = (
    "import sys; from benchmarks.concurrency_procrastinate import main; "
    "sys.exit(main(sys.argv[1:]))"
)


def main(argv: list[str]) -> int:
    what, url, schema, *rest = argv
    if what == "worker":
        asyncio.run(_worker(url, schema, int(rest[0])))
    elif what == "setup":
        asyncio.run(_setup(url, schema))
    else:
        asyncio.run(_submit(url, schema, rest[0], int(rest[1])))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
