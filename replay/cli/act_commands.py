"""The ``tasktrail`` commands an operator acts with: ``submit``, ``abort``, ``retry``
and ``fork`` (``send`` and the schedules' are in ``service/``). Each decides through the
same rules as the library (a refusal exits 2 naming the rule, and appends nothing),
records who acted and why (``--actor``, default ``$TASKTRAIL_ACTOR``, else
``user@host``; ``--reason``) on the event, and prints what it did (``--json``: one JSON
object). See ``docs/operating.md``.

A write command opens the store as a short-lived worker of its own
(``cli-<actor>-<pid>``), as any writer does (an open recovers the running tasks of
workers that are gone, rule 9), and closes it before it exits: it leaves no lease
behind. It never creates a store: a location that holds no tasktrail log is bad input.
It has no registry: ``submit`` takes ``--phase`` (and ``--version``), or the host's
definitions with ``--registry MODULE:ATTR``; its ``abort`` only marks (the fleet's
workers run the abort handler, or settle a task no definition takes, rule 13).
"""

from __future__ import annotations

import argparse
import getpass
import json
import os
import re
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from tasktrail.domain import InvalidArgument, Registry, Scheduler, open_store
from tasktrail.domain.tasks.validation import json_value

from .common import EXIT_OK, STORE_HELP, emit, say, task_id_argument, warn

ACTOR_ENV = "TASKTRAIL_ACTOR"
AT_HELP = "the source as of this position (an integer) or time (ISO-8601, e.g. ...Z); default now"


def default_actor() -> str:
    """Who acts when ``--actor`` is not given: ``$TASKTRAIL_ACTOR``, else ``user@host``."""
    named = os.environ.get(ACTOR_ENV, "").strip()
    if named:
        return named
    try:
        user = getpass.getuser()
    except (KeyError, OSError):  # no name for this uid (a container)
        user = f"uid{os.getuid()}" if hasattr(os, "getuid") else "unknown"
    return f"{user}@{socket.gethostname()}"


def _act_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("store", help=STORE_HELP + " (an existing store: never created)")


def _who_and_why(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--actor",
        metavar="WHO",
        help=f"who acts, recorded on the event (default ${ACTOR_ENV}, else user@host)",
    )
    parser.add_argument("--reason", metavar="TEXT", help="why, recorded on the event")
    parser.add_argument("--json", action="store_true", help="one JSON object: what was done")


def add_submit(commands: Any) -> None:
    submit = commands.add_parser(
        "submit",
        help="submit a task (pending at its first phase)",
        description=(
            "Submit a task of KIND, pending at --phase (the command line has no registry: "
            "give the phase, and --version if its definition is newer than 1; or "
            "--registry MODULE:ATTR to take the definition's first phase and version). "
            "Prints the new task's id last on its line."
        ),
    )
    _act_arguments(submit)
    submit.add_argument("kind", help="the task's kind (its definition's name)")
    submit.add_argument("--id", metavar="ID", help="the new task's id (default: a fresh one)")
    submit.add_argument("--phase", metavar="P", help="the phase it starts at")
    submit.add_argument(
        "--version", type=int, metavar="N", help="its definition version (default 1)"
    )
    submit.add_argument("--owner", metavar="TASK", help="the task that owns it (rules 5, 6)")
    submit.add_argument(
        "--key",
        metavar="K",
        help="an idempotency key (rule 18): a task submitted with K before is the one "
        "printed, and nothing is recorded (a line on stderr says it existed)",
    )
    submit.add_argument(
        "--priority",
        type=int,
        default=0,
        metavar="N",
        help="from -1000 to 1000 (rule 19; default 0): a busy worker starts higher first",
    )
    submit.add_argument(
        "--memo",
        action="append",
        default=[],
        metavar="NAME=JSON",
        help="a memo it starts with (its input), a JSON value: --memo url='\"https://...\"'",
    )
    submit.add_argument(
        "--registry",
        metavar="MODULE:ATTR",
        help="the host's registry (as for `tasktrail worker`): phase and version from it",
    )
    _who_and_why(submit)


def add_abort(commands: Any) -> None:
    abort = commands.add_parser(
        "abort",
        help="put an abort mark on a task (and its live descendants, rule 6)",
        description=(
            "Put an abort mark on TASK: its running phase ends at its next decision, and "
            "a worker runs its abort handler once the tasks it owns have ended (rules 3, "
            "6). A terminal task is left as it is (rule 4): nothing is recorded."
        ),
    )
    _act_arguments(abort)
    abort.add_argument("task", help="the task id")
    _who_and_why(abort)


def add_retry(commands: Any) -> None:
    retry = commands.add_parser(
        "retry",
        help="unpark a task parked at the restart limit (rule 9)",
        description=(
            "Clear the restart count of TASK, parked at the restart limit (rule 9), so a "
            "worker runs it again. A task that is not parked is left as it is: nothing "
            "is recorded."
        ),
    )
    _act_arguments(retry)
    retry.add_argument("task", help="the task id")
    _who_and_why(retry)


def add_fork(commands: Any) -> None:
    fork = commands.add_parser(
        "fork",
        help="start a new task where another stood (its checkpoint and memos, as of --at)",
        description=(
            "Start a new task of TASK's kind, version and owner, pending at TASK's "
            "checkpoint with its memos as they stood at --at (a position, or a time; "
            "default now): run again from a chosen point, after a bad deploy. Only TASK "
            "is forked, not the tasks it owns. Refused (exit 2, nothing recorded) where "
            "TASK had no checkpoint (not yet submitted, or holding or past its outcome: "
            "give an earlier --at). Prints the new task's id last on its line."
        ),
    )
    _act_arguments(fork)
    fork.add_argument("task", help="the task to fork")
    fork.add_argument("--at", metavar="N|TIME", help=AT_HELP)
    fork.add_argument("--id", metavar="NEW", help="the new task's id (default: a fresh one)")
    _who_and_why(fork)


@contextmanager
def acting(location: str, actor: str, registry: Registry | None = None) -> Iterator[Scheduler]:
    """The store at ``location`` opened as a short-lived worker named for ``actor`` and
    this process, closed (its lease released) however the act ends. A location that
    holds no tasktrail log is refused: a write command never creates a store."""
    open_store(location, read_only=True).close()  # bad input if there is no log
    scheduler = Scheduler.open(
        location, registry=registry, worker=worker_for(actor), snapshot_every=None
    )
    try:
        yield scheduler
    finally:
        scheduler.close()


def worker_for(actor: str) -> str:
    """The worker name a write command opens the store under: ``cli-<actor>-<pid>``."""
    plain = re.sub(r"[^A-Za-z0-9@._-]+", "_", actor)[:120]
    return f"cli-{plain}-{os.getpid()}"


def _act(args: argparse.Namespace) -> tuple[str, str | None]:
    actor = args.actor if args.actor is not None else default_actor()
    return actor, args.reason


def _report(args: argparse.Namespace, line: str, record: dict[str, Any]) -> int:
    if args.json:
        emit(record)
    else:
        say(line)
    return EXIT_OK


def _memos(pairs: list[str]) -> dict[str, Any]:
    memos: dict[str, Any] = {}
    for pair in pairs:
        name, sign, text = pair.partition("=")
        if not sign or not name:
            raise InvalidArgument(f"--memo {pair!r}: give NAME=JSON (e.g. --memo tries=3)")
        value = _json(text, f"--memo {name}", f"--memo {name}=")
        # The API's own check of a memo, before the store is opened: one rule for both.
        memos[name] = json_value(value, f"memo {name!r}", None)
    return memos


def _json(text: str, what: str, quoted: str) -> Any:
    try:  # read exactly: orjson would read an integer past 64 bits as a float
        return json.loads(text, parse_constant=_not_json)
    except ValueError:
        raise InvalidArgument(
            f"{what}: {text!r} is not JSON (a string is quoted: {quoted}'\"{text}\"')"
        ) from None
    except RecursionError:
        raise InvalidArgument(f"{what}: the value is nested too deep") from None


def _not_json(constant: str) -> None:
    raise ValueError(f"{constant} is not JSON")


def do_submit(args: argparse.Namespace) -> int:
    actor, reason = _act(args)
    registry = None
    if args.registry is not None:
        from .worker_command import load_setup

        registry = load_setup(args.registry).registry
    elif args.phase is None:
        raise InvalidArgument(
            "submit needs --phase: the command line has no registry to name a first phase "
            "(or give --registry MODULE:ATTR, the host's definitions)"
        )
    memos = _memos(args.memo)
    with acting(args.store, actor, registry) as scheduler:
        written = scheduler.events_written
        task_id = scheduler.submit(
            args.kind,
            id=args.id,
            phase=args.phase,
            version=args.version,
            owner=args.owner,
            memos=memos or None,
            actor=actor,
            reason=reason,
            key=args.key,
            priority=args.priority,
        )
        # A key that named a task already: that task, and nothing recorded.
        existed = args.key is not None and scheduler.events_written == written
        task = scheduler.task(task_id)
    if existed:
        warn(f"task {task_id} existed with key {args.key!r}: nothing recorded")
    phase = task.checkpoint.phase if task.checkpoint is not None else None
    record = {
        "act": "submit",
        "task_id": task_id,
        "kind": task.kind,
        "version": task.version,
        "phase": phase,
        "owner": task.owner_id,
        "memos": sorted(task.memos),
        "actor": actor,
        "reason": reason,
        "key": args.key,
        "priority": task.priority,
        "existed": existed,
    }
    done = "found" if existed else "submitted"
    return _report(args, f"{done} {task.kind} at {phase} by {actor} as {task_id}", record)


def do_abort(args: argparse.Namespace) -> int:
    actor, reason = _act(args)
    task_id = task_id_argument(args.task)
    with acting(args.store, actor) as scheduler:
        recorded = scheduler.abort(task_id, actor=actor, reason=reason)
        status = scheduler.task(task_id).status
    if recorded:
        line = f"abort-marked {task_id} by {actor} (now {status})"
    elif status == "terminal":
        line = f"{task_id}: nothing recorded: it is terminal (rule 4)"
    else:
        line = f"{task_id}: nothing recorded: it is abort-marked already ({status})"
    record = {"act": "abort", "task_id": task_id, "recorded": recorded, "status": status}
    return _report(args, line, {**record, "actor": actor, "reason": reason})


def do_retry(args: argparse.Namespace) -> int:
    actor, reason = _act(args)
    task_id = task_id_argument(args.task)
    with acting(args.store, actor) as scheduler:
        unparked = scheduler.retry(task_id, actor=actor, reason=reason)
        status = scheduler.task(task_id).status
    line = (
        f"unparked {task_id} by {actor}: its restarts cleared, {status} for a worker"
        if unparked
        else f"{task_id}: nothing recorded: it is not parked ({status})"
    )
    record = {"act": "retry", "task_id": task_id, "recorded": unparked, "status": status}
    return _report(args, line, {**record, "actor": actor, "reason": reason})


def do_fork(args: argparse.Namespace) -> int:
    actor, reason = _act(args)
    source_id = task_id_argument(args.task)
    at: str | None = args.at
    with acting(args.store, actor) as scheduler:
        new_id = scheduler.fork(source_id, at=at, id=args.id, actor=actor, reason=reason)
        forked = scheduler.history(new_id)[1]
        task = scheduler.task(new_id)
    position = getattr(forked, "source_position", None)
    phase = task.checkpoint.phase if task.checkpoint is not None else None
    record = {
        "act": "fork",
        "task_id": new_id,
        "source_id": source_id,
        "source_position": position,
        "phase": phase,
        "attempt": task.checkpoint.attempt if task.checkpoint is not None else None,
        "memos": sorted(task.memos),
        "actor": actor,
        "reason": reason,
    }
    line = f"forked {source_id} as of position {position} at {phase} by {actor} as {new_id}"
    return _report(args, line, record)
