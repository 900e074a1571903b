"""The registry ``python -m benchmarks.concurrency`` runs in ``tasktrail worker`` processes.

Three kinds of task, three phases each, each phase waiting ``$TASKTRAIL_BENCH_WAIT_S``:
``sync3`` with ``time.sleep`` (its phases run in the invocation's thread), ``async3``
with ``await asyncio.sleep`` (on the worker's event loop), each moving to the next with
an awaited checkpoint (``checkpoint_async``: the loop goes on while the group commit
writes it, as an ``async`` phase should); ``next3`` the same async phases moving on by
returning the next phase's name (issue 43's comparison with the job queues). The last
phase finishes the task (``await inv.finish_async``); the first and the last leave a
mark (:mod:`.concurrency_marks`).
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from tasktrail.domain import Registry, TaskDefinition

from .concurrency_marks import WAIT_S, mark


def _wait() -> None:
    if WAIT_S:
        time.sleep(WAIT_S)


def _one(inv: Any) -> None:
    mark("S")
    _wait()
    inv.checkpoint("two")


def _two(inv: Any) -> None:
    _wait()
    inv.checkpoint("three")


def _three(inv: Any) -> None:
    _wait()
    inv.finish("completed")
    mark("E")


async def _await() -> None:
    if WAIT_S:
        await asyncio.sleep(WAIT_S)


async def _a_one(inv: Any) -> None:
    mark("S")
    await _await()
    await inv.checkpoint_async("two")


async def _a_two(inv: Any) -> None:
    await _await()
    await inv.checkpoint_async("three")


async def _a_three(inv: Any) -> None:
    await _await()
    await inv.finish_async("completed")
    mark("E")


async def _n_one(inv: Any) -> str:
    mark("S")
    await _await()
    return "two"


async def _n_two(inv: Any) -> str:
    await _await()
    return "three"


registry = Registry(
    [
        TaskDefinition("sync3", 1, {"one": _one, "two": _two, "three": _three}),
        TaskDefinition("async3", 1, {"one": _a_one, "two": _a_two, "three": _a_three}),
        TaskDefinition("next3", 1, {"one": _n_one, "two": _n_two, "three": _a_three}),
    ]
)
