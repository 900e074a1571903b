"""What the async invocation tests share (tests/test_async_invocations.py and
tests/test_async_invocations_guarantees.py): a worker run in a thread, a wait for a
condition, and the ``stopping`` fixture (import it by name into a test module)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from tasktrail.domain import Worker


def run_in_thread(worker: Worker) -> threading.Thread:
    thread = threading.Thread(target=worker.run, daemon=True)
    thread.start()
    return thread


def wait_until(predicate: Any, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


@pytest.fixture
def stopping() -> Iterator[list[Worker]]:
    """Workers a test started in threads, stopped (at once) after it."""
    workers: list[Worker] = []
    yield workers
    for worker in workers:
        worker.stop()
        worker.stop()
