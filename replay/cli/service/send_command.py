"""``tasktrail send STORE TASK TOPIC JSON``: a message into a task's mailbox (rules
20-22), an act like those of :mod:`..act_commands` (who and why recorded on the event; a
refusal exits 2 and appends nothing)."""

from __future__ import annotations

import argparse
from typing import Any

from ..act_commands import _act, _act_arguments, _json, _report, _who_and_why, acting
from ..common import task_id_argument


def add_send(commands: Any) -> None:
    send = commands.add_parser(
        "send",
        help="send a task a message on a topic: a phase waiting for one runs (rules 20-22)",
        description="Refused (exit 2, nothing recorded) for a task past its outcome (rule 20).",
    )
    _act_arguments(send)
    for name, text in (("task", "the task id"), ("topic", "the message's topic")):
        send.add_argument(name, help=text)
    send.add_argument("value", metavar="JSON", help="its value: JSON (a string is quoted)")
    _who_and_why(send)


def do_send(args: argparse.Namespace) -> int:
    actor, reason, task_id = *_act(args), task_id_argument(args.task)
    value = _json(args.value, "the message's value", "")
    with acting(args.store, actor) as scheduler:
        seq = scheduler.send(task_id, args.topic, value, actor=actor, reason=reason)
        status = scheduler.task(task_id).status
    record = {"act": "send", "task_id": task_id, "topic": args.topic, "seq": seq, "status": status}
    line = f"sent {task_id} message {seq} on {args.topic!r} by {actor} (now {status})"
    return _report(args, line, {**record, "actor": actor, "reason": reason})
