"""``tasktrail result STORE TASK [--wait S] [--json]``: a task's outcome and result.

A read command: it opens the store read-only and folds the task's own stream. With
``--wait S`` it waits up to S seconds for the task to be terminal, on the store's news
(:mod:`tasktrail.domain.store.news`), not by sleeping. Exit 0 with the outcome (whatever
its status: a failed task's outcome is an answer too), 1 when the task is not terminal
(yet, or after the wait), 2 for a task the store never had (the one error contract).
"""

from __future__ import annotations

import argparse
import json
import math
import time
from typing import Any

from tasktrail.domain import InvalidArgument, UnknownTask, open_store
from tasktrail.domain.store.store import Store
from tasktrail.domain.tasks.evolve import evolve
from tasktrail.domain.tasks.state import TaskState

from ..common import EXIT_OK, EXIT_PROBLEMS, STORE_HELP, emit, say, task_id_argument, warn

DESCRIPTION = (
    "Print the outcome of one task: its status, the result its phase gave "
    "(finish(result=...)) and its error. With --wait S, wait up to S seconds for the task "
    "to end. Exit 0 with the outcome, 1 when the task has not ended (yet, or within the "
    "wait), 2 for a task the store does not have."
)


def _seconds(text: str) -> float:
    try:
        seconds = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if math.isnan(seconds) or seconds < 0:
        raise argparse.ArgumentTypeError(f"must be a number of seconds >= 0, not {text!r}")
    return seconds


def add_result(commands: Any) -> None:
    result = commands.add_parser(
        "result", help="one task's outcome: status, result and error", description=DESCRIPTION
    )
    result.add_argument("store", help=STORE_HELP)
    result.add_argument("task", help="the task id")
    result.add_argument(
        "--wait",
        type=_seconds,
        default=0.0,
        metavar="S",
        help="wait up to S seconds for the task to end (default 0: answer at once)",
    )
    result.add_argument("--json", action="store_true", help="one JSON object")


def _state(store: Store, task_id: str) -> TaskState:
    state: TaskState | None = None
    for event in store.stream(task_id):
        state = evolve(state, event)
    if state is None:
        raise UnknownTask(task_id)
    return state


def do_result(args: argparse.Namespace) -> int:
    task_id = task_id_argument(args.task)
    if math.isinf(args.wait):
        raise InvalidArgument("--wait must be finite")
    deadline = time.monotonic() + args.wait
    with open_store(args.store, read_only=True) as store:
        while True:
            seen = store.news.generation  # before the read: news after it wakes the wait
            task = _state(store, task_id)
            remaining = deadline - time.monotonic()
            if task.status == "terminal" or remaining <= 0:
                break
            store.news.wait(seen, remaining)
    outcome = task.outcome if task.status == "terminal" else None
    if outcome is None:
        waited = f" after {args.wait:g} s" if args.wait else ""
        warn(f"task {task_id} has not ended{waited}: it is {task.status}")
        if args.json:
            emit({"task": task_id, "status": task.status, "terminal": False})
        return EXIT_PROBLEMS
    if args.json:
        emit(
            {
                "task": task_id,
                "status": outcome.status,
                "terminal": True,
                "result": outcome.to_dict().get("result"),
                "error": outcome.error,
                "reason": outcome.reason,
            }
        )
        return EXIT_OK
    say(f"task {task_id}: {outcome.status}")
    if outcome.result is not None:
        say(f"result: {json.dumps(outcome.to_dict()['result'], ensure_ascii=False)}")
    if outcome.error is not None:
        say(f"error: {outcome.message or ''}")
        if outcome.detail is not None:
            say(f"detail: {json.dumps(outcome.to_dict()['error']['detail'], ensure_ascii=False)}")
    if outcome.reason is not None:
        say(f"reason: {outcome.reason}")
    return EXIT_OK
