"""What the concurrent worker tests share (tests/test_concurrent_worker.py and
tests/test_concurrent_worker_stop.py, issue 27): a worker run in a thread, and a wait
for a condition."""

from __future__ import annotations

import threading
import time
from typing import Any

from tasktrail.domain import Worker


def run_in_thread(worker: Worker) -> threading.Thread:
    thread = threading.Thread(target=worker.run, daemon=True)
    thread.start()
    return thread


def wait_until(predicate: Any, timeout_s: float = 20.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)
