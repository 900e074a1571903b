"""The operator's acts from the console: ``abort``, ``retry``, ``fork``, ``send`` (on a
task) and ``submit``, each the scheduler command the CLI runs (:mod:`..cli.act_commands`),
with the actor the token file names and the reason given.

Each act opens the store as a short-lived writer of its own, as a CLI act does
(``console-<actor>-<pid>``: an open recovers the running tasks of workers that are
gone, rule 9), decides, and closes it: the server holds no writer between acts and
never for a read. Acts run one at a time. A refusal raises the library's own error
(a rule, an unknown task, a bad argument), which the server answers with its message
(409, 404, 400): nothing is appended.

Values arrive as a form's text or as JSON: :func:`perform` takes either (``typed``
says which) and reads a form's JSON fields (a message's value, memos) as JSON.
"""

from __future__ import annotations

import json
import os
import re
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from tasktrail.domain import InvalidArgument, Scheduler, UnknownTask
from tasktrail.domain.tasks.validation import json_value

from . import inbox

TASK_ACTS = ("abort", "retry", "fork", "send", "answer")
"""The acts on one task: ``POST /tasks/{id}/ACT`` and ``/api/tasks/{id}/ACT``."""
_ONE_AT_A_TIME = threading.Lock()


@contextmanager
def acting(location: str, actor: str) -> Iterator[Scheduler]:
    """The store opened as a short-lived writer named for ``actor`` and this process,
    closed however the act ends."""
    plain = re.sub(r"[^A-Za-z0-9@._-]+", "_", actor)[:120]
    with _ONE_AT_A_TIME:
        scheduler = Scheduler.open(
            location, worker=f"console-{plain}-{os.getpid()}", snapshot_every=None
        )
        try:
            yield scheduler
        finally:
            scheduler.close()


def perform(
    location: str,
    act: str,
    task_id: str | None,
    fields: Mapping[str, Any],
    actor: str,
    *,
    typed: bool,
) -> dict[str, Any]:
    """Do one act as ``actor``; returns what was done (``message`` says it in words).
    ``fields``: the act's arguments (``reason``, and each act's own); a field named
    ``actor`` is ignored: the token's actor is recorded."""
    reason = _text(fields, "reason")
    record: dict[str, Any] = {"act": act, "actor": actor, "reason": reason}
    if act == "submit":
        return {**record, **_submit(location, fields, actor, reason, typed)}
    if task_id is None or act not in TASK_ACTS:
        raise InvalidArgument(f"no act {act!r}: give one of {', '.join(TASK_ACTS)} or submit")
    with acting(location, actor) as scheduler:
        if act == "answer":
            return {**record, **inbox.answer(scheduler, task_id, fields, actor, typed)}
        if act == "send":
            topic = _text(fields, "topic")
            if topic is None:
                raise InvalidArgument("send needs a topic", task_id=task_id)
            value = fields.get("value") if typed else _json(fields.get("value"), "value")
            seq = scheduler.send(task_id, topic, value, actor=actor, reason=reason)
            status = scheduler.task(task_id).status
            said = f"sent {task_id} message {seq} on {topic!r} by {actor} (now {status})"
            return {
                **record,
                "task_id": task_id,
                "topic": topic,
                "seq": seq,
                "recorded": True,
                "status": status,
                "message": said,
            }
        if act == "fork":
            at = fields.get("at")
            at = None if at in (None, "") else at
            new_id = scheduler.fork(
                task_id, at=at, id=_text(fields, "id"), actor=actor, reason=reason
            )
            forked = scheduler.history(new_id)[1]
            position = getattr(forked, "source_position", None)
            phase = scheduler.task(new_id).checkpoint
            said = f"forked {task_id} as of position {position} as {new_id} by {actor}"
            return {
                **record,
                "task_id": new_id,
                "source_id": task_id,
                "source_position": position,
                "recorded": True,
                "phase": phase.phase if phase is not None else None,
                "message": said,
            }
        if act == "abort":
            recorded = scheduler.abort(task_id, actor=actor, reason=reason)
            status = scheduler.task(task_id).status
            if recorded:
                said = f"abort-marked {task_id} by {actor} (now {status})"
            elif status == "terminal":
                said = f"{task_id}: nothing recorded: it is terminal (rule 4)"
            else:
                said = f"{task_id}: nothing recorded: it is abort-marked already ({status})"
        else:
            recorded = scheduler.retry(task_id, actor=actor, reason=reason)
            status = scheduler.task(task_id).status
            said = (
                f"unparked {task_id} by {actor}: its restarts cleared, {status} for a worker"
                if recorded
                else f"{task_id}: nothing recorded: it is not parked ({status})"
            )
    return {**record, "task_id": task_id, "recorded": recorded, "status": status, "message": said}


def _submit(
    location: str, fields: Mapping[str, Any], actor: str, reason: str | None, typed: bool
) -> dict[str, Any]:
    kind, phase = _text(fields, "kind"), _text(fields, "phase")
    if kind is None or phase is None:
        raise InvalidArgument("submit needs a kind and a phase (the console has no registry)")
    memos = fields.get("memos") if typed else _json(fields.get("memos"), "memos")
    if memos is not None and not isinstance(memos, dict):
        raise InvalidArgument("memos: give a JSON object of NAME: VALUE")
    checked = {str(k): json_value(v, f"memo {k!r}", None) for k, v in (memos or {}).items()}
    key = _text(fields, "key")
    with acting(location, actor) as scheduler:
        written = scheduler.events_written
        task_id = scheduler.submit(
            kind,
            id=_text(fields, "id"),
            phase=phase,
            version=_number(fields, "version"),
            owner=_text(fields, "owner"),
            memos=checked or None,
            actor=actor,
            reason=reason,
            key=key,
            priority=_number(fields, "priority") or 0,
        )
        existed = key is not None and scheduler.events_written == written
        task = scheduler.task(task_id)
    said = (
        f"task {task_id} existed with key {key!r}: nothing recorded"
        if existed
        else f"submitted {kind} at {phase} by {actor} as {task_id}"
    )
    return {
        "task_id": task_id,
        "kind": task.kind,
        "phase": phase,
        "status": task.status,
        "recorded": not existed,
        "existed": existed,
        "message": said,
    }


def _text(fields: Mapping[str, Any], name: str) -> str | None:
    value = fields.get(name)
    if value is None:
        return None
    if not isinstance(value, str):
        raise InvalidArgument(f"{name}: give text, not {type(value).__name__}")
    return value if value.strip() else None


def _number(fields: Mapping[str, Any], name: str) -> int | None:
    value = fields.get(name)
    if value is None or value == "":
        return None
    if isinstance(value, bool):
        raise InvalidArgument(f"{name}: give a whole number, not {value!r}")
    if isinstance(value, int):
        return value
    try:
        return int(str(value).strip())
    except ValueError:
        raise InvalidArgument(f"{name}: give a whole number, not {value!r}") from None


def _json(raw: Any, what: str) -> Any:
    """A form field holding JSON, read exactly (an integer past 64 bits stays one)."""
    if raw is None or (isinstance(raw, str) and not raw.strip()):
        return None
    if not isinstance(raw, str):
        return raw
    try:
        return json.loads(raw, parse_constant=_not_json)
    except ValueError:
        raise InvalidArgument(
            f'{what}: {raw[:80]!r} is not JSON (a string is quoted: "...")'
        ) from None
    except RecursionError:
        raise InvalidArgument(f"{what}: the value is nested too deep") from None


def _not_json(constant: str) -> None:
    raise ValueError(f"{constant} is not JSON")


__all__ = ["TASK_ACTS", "UnknownTask", "acting", "perform"]
