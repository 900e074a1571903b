"""``tasktrail inbox STORE``: the open asks, oldest first (read only); ``tasktrail answer
STORE TASK TOPIC JSON``: answer one, an act like ``send`` (:mod:`.send_command`: who
and why recorded on the event; a refusal, rules 30-32, exits 2 and appends nothing)."""

from __future__ import annotations

import argparse
import json
from typing import Any

from tasktrail.domain import Ask, InvalidArgument, open_store, system_clock
from tasktrail.domain.tasks.describe import format_at, printable

from ..act_commands import _act, _act_arguments, _json, _report, _who_and_why, acting
from ..common import EXIT_OK, STORE_HELP, emit, say, task_id_argument


def add_inbox(commands: Any) -> None:
    inbox = commands.add_parser(
        "inbox",
        help="the open asks: what tasks wait to be answered, and by whom (rules 30-32)",
        description=(
            "List the open asks of a store, oldest first, one a line: the asking task and "
            "its kind, the topic, when it asked and its deadline (UTC), who may answer "
            "(anyone: '*') and what it asks. An ask past its deadline is not listed. The "
            "store is only read (the latest snapshot and the events after it)."
        ),
    )
    inbox.add_argument("store", help=STORE_HELP)
    inbox.add_argument("--topic", metavar="T", help="only asks on this topic")
    inbox.add_argument(
        "--assignee", metavar="A", help="only asks A may answer (those of anyone too)"
    )
    inbox.add_argument("--kind", metavar="KIND", help="only asks of tasks of this kind")
    inbox.add_argument("--limit", type=int, default=100, metavar="N", help="at most N (100)")
    inbox.add_argument("--json", action="store_true", help="JSON Lines: an ask a line")


def add_answer(commands: Any) -> None:
    answer = commands.add_parser(
        "answer",
        help="answer a task's open ask: the task resumes with the answer (rules 30-32)",
        description=(
            "Answer TASK's open ask on TOPIC with JSON, as --actor (one of its assignees, "
            "if it names any). Refused (exit 2, nothing recorded) when no such ask is open "
            "(rule 30), the actor is not an assignee (rule 31) or it was answered already "
            "(rule 32: the first answer wins)."
        ),
    )
    _act_arguments(answer)
    for name, text in (("task", "the asking task's id"), ("topic", "the ask's topic")):
        answer.add_argument(name, help=text)
    answer.add_argument("value", metavar="JSON", help="the answer: JSON (a string is quoted)")
    _who_and_why(answer)


def _line(ask: Ask) -> str:
    deadline = format_at(ask.deadline) if ask.deadline is not None else "-"
    who = ",".join(ask.assignees) or "*"
    request = json.dumps(ask.request, ensure_ascii=False)
    request = request if len(request) <= 60 else request[:57] + "..."
    return printable(
        f"{ask.task_id:<24} {ask.kind:<12} {ask.topic:<16} {format_at(ask.asked_at):<25} "
        f"{deadline:<25} {who:<16} {request}"
    )


HEADER = (
    f"{'TASK':<24} {'KIND':<12} {'TOPIC':<16} {'ASKED':<25} {'DEADLINE':<25} "
    f"{'ASSIGNEES':<16} REQUEST"
)


def do_inbox(args: argparse.Namespace) -> int:
    from tasktrail.domain.history import restore
    from tasktrail.domain.tasks.ask_inbox import inbox

    if args.limit < 1:
        raise InvalidArgument(f"--limit must be 1 or more, not {args.limit}")
    with open_store(args.store, read_only=True) as store:
        world = restore(store).world  # read only: nothing appended
    found = inbox(
        world,
        system_clock(),
        topic=args.topic,
        assignee=args.assignee,
        kind=args.kind,
        limit=args.limit,
    )
    if args.json:
        for ask in found:
            emit(ask.to_dict())
        return EXIT_OK
    say(HEADER if found else "no open ask")
    for ask in found:
        say(_line(ask))
    return EXIT_OK


def do_answer(args: argparse.Namespace) -> int:
    actor, reason, task_id = *_act(args), task_id_argument(args.task)
    value = _json(args.value, "the answer", "")
    with acting(args.store, actor) as scheduler:
        scheduler.answer(task_id, args.topic, value, actor=actor, reason=reason)
        status = scheduler.task(task_id).status
    record = {"act": "answer", "task_id": task_id, "topic": args.topic, "status": status}
    line = f"answered {task_id}'s ask on {args.topic!r} as {actor} (now {status})"
    return _report(args, printable(line), {**record, "actor": actor, "reason": reason})
