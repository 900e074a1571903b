"""pgqueuer's side of ``python -m benchmarks.concurrency``: the same workload on PostgreSQL.

A task is **one job doing three awaits** (entrypoint ``single``, the default: the
least a peer records) or, with ``--peer-shape chain``, a **chain of three jobs**
(``one``, ``two``, ``three``), each an ``async def`` that awaits
``$TASKTRAIL_BENCH_WAIT_S`` and enqueues the next before it returns, so each phase is
recorded before the next starts, as a tasktrail checkpoint is (the enqueue and the
job's own completion are two writes, not one). A worker
process is one ``QueueManager`` run as pgqueuer's ``pgq run`` runs it (uvloop where
installed, its asyncpg driver over one connection as its quick start does), with
``max_concurrent_tasks`` the worker's concurrency and its default batch of 10
(smaller where the concurrency is under 20: pgqueuer asks for at least two batches).
Its tables go in the run's schema and its NOTIFY channel is the run's own
(``PGQUEUER_SCHEMA``, ``PGQUEUER_CHANNEL``); its other settings are its defaults
(durable tables, LISTEN/NOTIFY with polling behind it).

``python -m benchmarks.concurrency_pgqueuer worker URL CONCURRENCY`` is one worker
(``ready`` once it dequeues); ``setup URL`` installs the schema; ``submit URL SHAPE
COUNT`` enqueues the tasks' first jobs in one statement.
"""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from .concurrency_marks import WAIT_S, mark

if TYPE_CHECKING:
    from .concurrency_runs import Run, Started
    from .fleet import Stores


def _announcing(queries_class: Any) -> Any:
    """pgqueuer's ``Queries`` that prints ``ready`` at the first dequeue: the worker
    listens to its channel by then (it does before its first fetch)."""

    class Announcing(queries_class):  # type: ignore[misc]
        announced = False

        async def dequeue(self, *args: Any, **kwargs: Any) -> Any:
            if not self.announced:
                type(self).announced = True
                print("ready", flush=True)
            return await super().dequeue(*args, **kwargs)

    return Announcing


async def _worker(url: str, concurrency: int) -> None:
    import asyncpg  # type: ignore[import-untyped]
    from pgqueuer import PgQueuer
    from pgqueuer.db import AsyncpgDriver
    from pgqueuer.models import Job
    from pgqueuer.queries import Queries

    connection = await asyncpg.connect(url)
    driver = AsyncpgDriver(connection)
    queries = _announcing(Queries)(driver)
    pgq = PgQueuer(connection=driver, queries=queries)

    def phase(then: str | None, first: bool = False) -> Callable[[Job], Awaitable[None]]:
        async def run(job: Job) -> None:
            if first:
                mark("S")
            await asyncio.sleep(WAIT_S)
            if then is None:
                mark("E")
            else:
                await queries.enqueue(then, None)

        return run

    pgq.entrypoint("one")(phase("two", first=True))
    pgq.entrypoint("two")(phase("three"))
    pgq.entrypoint("three")(phase(None))

    @pgq.entrypoint("single")
    async def single(job: Job) -> None:
        mark("S")
        for _ in range(3):
            await asyncio.sleep(WAIT_S)
        mark("E")

    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, pgq.shutdown.set)
    batch = min(10, concurrency // 2)
    await pgq.run(batch_size=max(1, batch), max_concurrent_tasks=max(concurrency, 2))


async def _with_queries(url: str, then: Callable[[Any], Awaitable[None]]) -> None:
    import asyncpg
    from pgqueuer.db import AsyncpgDriver
    from pgqueuer.queries import Queries

    connection = await asyncpg.connect(url)
    try:
        await then(Queries(AsyncpgDriver(connection)))
    finally:
        await connection.close()


async def _install(queries: Any) -> None:
    await queries.install()


def _submit(shape: str, count: int) -> Callable[[Any], Awaitable[None]]:
    first = "one" if shape == "chain" else "single"

    async def submit(queries: Any) -> None:
        await queries.enqueue([first] * count, [None] * count, [0] * count)

    return submit


def start(stores: Stores, run: Run, env: dict[str, str]) -> Started:
    """The schema installed in a fresh PostgreSQL schema, ``run.workers`` workers up;
    the submit."""
    from .concurrency_runs import Started, submit_by, wait_ready
    from .fleet import ROOT

    assert stores.postgres is not None
    stores.new("postgresql")
    schema = stores.schemas[-1]
    env = {**env, "PGQUEUER_SCHEMA": schema, "PGQUEUER_CHANNEL": f"{schema}_ch"}
    url = stores.postgres
    here = [sys.executable, "-m", "benchmarks.concurrency_pgqueuer"]
    subprocess.run([*here, "setup", url], cwd=ROOT, env=env, check=True)
    processes = []
    for _ in range(run.workers):
        command = [*here, "worker", url, str(run.concurrency)]
        processes.append(subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.PIPE))
    wait_ready(run, processes, "a pgqueuer worker")
    return Started(
        processes, submit_by([*here, "submit", url, run.peer_shape, str(run.tasks)], env)
    )


def main(argv: list[str]) -> int:
    from pgqueuer.adapters.cli.cli import asyncio_run  # what `pgq run` runs on

    what, url, *rest = argv
    if what == "worker":
        asyncio_run(_worker(url, int(rest[0])))
    elif what == "setup":
        asyncio_run(_with_queries(url, _install))
    else:
        asyncio_run(_with_queries(url, _submit(rest[0], int(rest[1]))))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
