"""A contender of the concurrency tests: one process, one scheduler, commands on request.

    python tests/helpers/contender.py STORE

It opens STORE and answers each JSON line on stdin with one JSON line:

- ``{"op": "refresh"}``: fold what other writers appended; answers the head.
- ``{"op": "race", "command": ..., "task": ..., "retry": bool, "attempts": n}``:
  issue the command at once, on the state it last read (so racing contenders
  decide on the same snapshot), under ``Scheduler.retrying`` when ``retry``.
  Answers the outcome (``won``, ``conflict`` or ``refused``), how many
  conflicts it met, and how many events this scheduler appended.
- ``{"op": "quit"}``.

Anything but a tasktrail refusal or conflict is answered as ``error``.
"""

from __future__ import annotations

import sys
import traceback
from typing import Any

import orjson

from helpers.checks import stale
from tasktrail.domain import (
    ConflictError,
    ManualClock,
    Refused,
    Registry,
    Scheduler,
    TaskDefinition,
    TasktrailError,
)


def registry() -> Registry:
    """The kind every contended task has: two phases, nothing else."""
    return Registry([TaskDefinition("job", 1, {"start": lambda i: "end", "end": lambda i: None})])


def command(s: Scheduler, name: str, task_id: str, me: str) -> Any:
    match name:
        case "reserve":
            return s.reserve(task_id)
        case "memo":
            return s.memo(task_id, me, {"by": me})
        case "checkpoint":
            return s.checkpoint(task_id, "end")
        case "finish":
            return s.finish(task_id, "completed")
        case "abort":
            return s.abort(task_id)
        case "submit":
            return s.submit("job", id=task_id)
        case "submit_key":  # task_id is the key: each contender its own new task's id
            return s.submit("job", key=task_id)
        case "submit_child":
            return s.submit("job", owner=task_id)
    raise ValueError(f"no command {name}")


def race(s: Scheduler, message: dict[str, Any], me: str) -> dict[str, Any]:
    conflicts = 0
    written = s.events_written

    first_try = True

    def attempt() -> Any:
        nonlocal conflicts, first_try
        try:
            if first_try:
                # Every contender decides on the snapshot the test handed them all (the
                # race is between the appends); a retry folds the winner's events first.
                first_try = False
                with stale(s):
                    return command(s, message["command"], message["task"], me)
            return command(s, message["command"], message["task"], me)
        except ConflictError:
            conflicts += 1
            raise

    answer: dict[str, Any]
    try:
        if message.get("retry"):
            value = s.retrying(attempt, attempts=message.get("attempts", 5))
        else:
            value = attempt()
        answer = {"outcome": "won", "value": value}
    except ConflictError as error:
        answer = {"outcome": "conflict", "error": str(error)}
    except Refused as error:
        answer = {"outcome": "refused", "error": str(error)}
    except TasktrailError as error:
        answer = {"outcome": "error", "error": f"{type(error).__name__}: {error}"}
    return {**answer, "conflicts": conflicts, "written": s.events_written - written}


def main(location: str, me: str) -> int:
    s = Scheduler.open(location, clock=ManualClock(1_000_000), registry=registry())
    print(orjson.dumps({"ready": me}).decode(), flush=True)
    for line in sys.stdin:
        message = orjson.loads(line)
        try:
            if message["op"] == "quit":
                break
            if message["op"] == "refresh":
                s.refresh()
                answer: dict[str, Any] = {"head": s.store.head()}
            else:
                answer = race(s, message, me)
        except Exception:
            answer = {"outcome": "error", "error": traceback.format_exc()}
        print(orjson.dumps(answer).decode(), flush=True)
    s.store.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
