"""The ``tasktrail`` command line: :func:`main` assembles the parser from the command
groups (:mod:`.store_commands`, :mod:`.replay_commands`, :mod:`.io_commands`) and
dispatches to their handlers, holding every command to one error contract
(:mod:`.common`): 0 ok, 1 violations (or differences) found, 2 bad input (an unknown
or unreadable store, a bad log line, an unknown task or flag, an output that would
write over an input: what was wrong and where), 3 an internal error (one line; the
traceback only with ``--debug``), 4 nothing found but the keys not checked (``verify``
of a keyed store without its key), 130 interrupted. No traceback reaches a user
otherwise.
"""

from __future__ import annotations

import argparse
import logging
import os
import sqlite3
import sys
import traceback
from collections.abc import Sequence

from tasktrail.domain import TasktrailError

from . import (
    act_commands,
    io_commands,
    replay_commands,
    report_command,
    retention_commands,
    runs_command,
    seal_command,
    serve_command,
    snapshot_command,
    store_commands,
    tasks_command,
    worker_command,
    workers_command,
)
from .common import (
    EXIT_BAD_INPUT,
    EXIT_INTERNAL,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_PROBLEMS,
    EXIT_UNCHECKED,
    warn,
)
from .service import ask_commands, result_command, send_command, stream_command
from .service import schedules as schedule_commands

EPILOG = """\
examples:
  tasktrail demo                          record a demo workload into tasktrail-demo.db
  tasktrail demo --db /tmp/t.db --tasks 500
  tasktrail tasks tasktrail-demo.db --status terminal
  tasktrail result trail.db TASK --wait 30 --json   a task's outcome and result
  tasktrail stream trail.db TASK --after 41 --follow   its output, from offset 42 on
  tasktrail tasks tasktrail-demo.db --outcome aborted --since 2026-01-05 --limit 20
  tasktrail runs tasktrail-demo.db --day 2026-01-05   the run ledger (--live: in flight)
  tasktrail workers trail.db              each worker: live or not, tasks it holds
  tasktrail history tasktrail-demo.db fragile-0001
  tasktrail history postgresql://postgres@127.0.0.1/test fragile-0001 --json
  tasktrail project tasktrail-demo.db     read models into tasktrail-demo-views.db
  tasktrail snapshot tasktrail-demo.db    open, tasks and project fold from it on
  tasktrail snapshot tasktrail-demo.db --list
  tasktrail replay tasktrail-demo.db --until 300
  tasktrail verify tasktrail-demo.db
  tasktrail seal tasktrail-demo.db >> seals.jsonl   keep the line elsewhere
  tasktrail archive trail.db --before 90d --to archive/   finished trees to segments
  tasktrail history trail.db fragile-0001 --archive archive/
  tasktrail verify tasktrail-demo.db --seals seals.jsonl --key-file chain.key
  tasktrail explain tasktrail-demo.db fragile-0001
  tasktrail export tasktrail-demo.db demo.jsonl && tasktrail replay demo.jsonl
  tasktrail diff tasktrail-demo.db tasktrail-demo.db --until-a 300 --until-b 320
  tasktrail trace tasktrail-demo.db fragile-0001 --out fragile.json
  tasktrail serve tasktrail-demo.db       a live console at http://127.0.0.1:8765/
  tasktrail worker myapp.tasks:registry --store trail.db --worker w1
  tasktrail submit trail.db report --phase start --memo day='"2026-01-05"'
  tasktrail abort trail.db fragile-0001 --reason "stuck since the deploy"
  tasktrail fork trail.db fragile-0001 --at 300 --actor alice
  tasktrail schedule trail.db nightly report --phase start --cron '0 2 * * *' --tz Europe/Paris
  tasktrail schedules trail.db            the live schedules and their next ticks
  tasktrail inbox trail.db --assignee ana   the open asks ana may answer
  tasktrail answer trail.db TASK approval '{"ok": true}' --actor ana --reason "read it"

A STORE is a SQLite file path (or a file: URI, mode=ro or immutable=1 to read
only) or a postgresql:// URL; a SOURCE may also be a .jsonl export. Commands that
read never create or write anything; no command writes over one of its inputs.
Exit codes: 0 ok, 1 violations or differences, 2 bad input (named), 3 internal
error (--debug shows the traceback), 4 keys not checked (a keyed store verified
without its key), 130 interrupted.
"""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="tasktrail",
        description=(
            "A durable task scheduler kept as an event-sourced state machine: "
            "record work, read its history, replay it."
        ),
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--debug", action="store_true", help="show the traceback of an internal error"
    )
    parser.add_argument(
        "--version", action="version", version=f"tasktrail {_version()}", help="print it, exit"
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    # In this order: the order ``tasktrail --help`` lists the commands in.
    store_commands.add_demo(commands)
    store_commands.add_history(commands)
    tasks_command.add_tasks(commands)
    result_command.add_result(commands)
    stream_command.add_stream(commands)
    runs_command.add_runs(commands)
    schedule_commands.add_schedules(commands)
    workers_command.add_workers(commands)
    store_commands.add_project(commands)
    snapshot_command.add_snapshot(commands)
    replay_commands.add_replay(commands)
    replay_commands.add_diff(commands)
    replay_commands.add_verify(commands)
    seal_command.add_seal(commands)
    retention_commands.add_archive(commands)
    retention_commands.add_erase(commands)
    retention_commands.add_retention(commands)
    io_commands.add_export(commands)
    io_commands.add_import(commands)
    replay_commands.add_explain(commands)
    io_commands.add_trace(commands)
    report_command.add_report(commands)
    serve_command.add_serve(commands)
    worker_command.add_worker(commands)
    act_commands.add_submit(commands)
    act_commands.add_abort(commands)
    act_commands.add_retry(commands)
    act_commands.add_fork(commands)
    send_command.add_send(commands)
    ask_commands.add_inbox(commands)
    ask_commands.add_answer(commands)
    schedule_commands.add_schedule(commands)
    schedule_commands.add_unschedule(commands)
    retention_commands.add_archive_option(commands)
    for command in commands.choices.values():
        # ``tasktrail verify --debug X`` as well as ``tasktrail --debug verify X``.
        command.add_argument("--debug", action="store_true", default=argparse.SUPPRESS)
    return parser


def _version() -> str:
    try:
        from tasktrail import __version__
    except ImportError:  # an editable install made before tasktrail/ existed
        return "unknown (install again: pip install -e .)"
    return __version__


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)  # a bad flag: usage and exit 2, by argparse
    # A command says itself which snapshots it passed over (common.report_start): not
    # twice through logging's last resort (a worker's own logging still shows them).
    snapshots_log = logging.getLogger("tasktrail.snapshots")
    if not snapshots_log.handlers:
        snapshots_log.addHandler(logging.NullHandler())
    try:
        return _dispatch(parser, args)
    except BrokenPipeError:
        # The reader (``| head``) went away: not an error of ours.
        sys.stdout = open(os.devnull, "w")  # noqa: SIM115
        return EXIT_OK
    except KeyboardInterrupt:
        warn("interrupted")
        return EXIT_INTERRUPTED
    except TasktrailError as error:
        # Bad input: the error names what was wrong and where.
        for line in str(error).splitlines() or [type(error).__name__]:
            warn(line)
        return EXIT_BAD_INPUT
    except sqlite3.DatabaseError as error:  # the read models' file, beside the store
        hint = " (another tasktrail process is writing it: try again)"
        warn(f"{error}{hint if 'locked' in str(error) else ''}")
        return EXIT_BAD_INPUT
    except OSError as error:  # a path: missing, a folder, no permission, a full disk
        where = f"{error.filename}: " if error.filename else ""
        warn(f"{where}{error.strerror or error}")
        return EXIT_BAD_INPUT
    except Exception as error:  # a bug of ours: one line, the traceback on request
        if getattr(args, "debug", False):
            traceback.print_exc()
        text = str(error).splitlines()[0] if str(error) else ""
        warn(
            f"internal error: {type(error).__name__}: {text} "
            "(run again with --debug for the traceback, and report it)"
        )
        return EXIT_INTERNAL


def _dispatch(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    handlers = {
        "demo": store_commands.do_demo,
        "history": store_commands.do_history,
        "tasks": tasks_command.do_tasks,
        "result": result_command.do_result,
        "stream": stream_command.do_stream,
        "runs": runs_command.do_runs,
        "workers": workers_command.do_workers,
        "project": store_commands.do_project,
        "snapshot": snapshot_command.do_snapshot,
        "replay": replay_commands.do_replay,
        "diff": replay_commands.do_diff,
        "verify": replay_commands.do_verify,
        "seal": seal_command.do_seal,
        "archive": retention_commands.do_archive,
        "erase": retention_commands.do_erase,
        "retention": retention_commands.do_retention,
        "export": io_commands.do_export,
        "import": io_commands.do_import,
        "explain": replay_commands.do_explain,
        "trace": io_commands.do_trace,
        "report": report_command.do_report,
        "serve": serve_command.do_serve,
        "worker": worker_command.do_worker,
        "submit": act_commands.do_submit,
        "abort": act_commands.do_abort,
        "retry": act_commands.do_retry,
        "fork": act_commands.do_fork,
        "send": send_command.do_send,
        "inbox": ask_commands.do_inbox,
        "answer": ask_commands.do_answer,
        "schedules": schedule_commands.do_schedules,
        "schedule": schedule_commands.do_schedule,
        "unschedule": schedule_commands.do_unschedule,
    }
    handler = handlers.get(args.command)
    if handler is None:
        parser.error(f"unknown command {args.command}")
    return retention_commands.run_across(args, handler)  # --archive DIR, where a read takes it


__all__ = [
    "EXIT_BAD_INPUT",
    "EXIT_INTERNAL",
    "EXIT_INTERRUPTED",
    "EXIT_OK",
    "EXIT_PROBLEMS",
    "EXIT_UNCHECKED",
    "build_parser",
    "main",
]
