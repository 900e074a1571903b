"""The ``tasktrail`` commands that move a log in or out of a store: ``export`` writes
it as byte-stable JSONL (its stream heads last), ``import`` writes such an export into
a new, empty store, all or nothing (:mod:`tasktrail.replay.importing`), and ``trace``
rebuilds its phase spans as OTLP/JSON for a tracing UI. An output is never one of the
inputs (by any name) nor a SQLite database, and is written to a temporary file renamed
into place. Each command is a parser builder
``add_<name>`` and a handler ``do_<name>``.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import orjson

from tasktrail.domain import InvalidArgument
from tasktrail.domain.store.files import atomic_output, is_sqlite_file

from .common import (
    EXIT_OK,
    SKIP_HELP,
    SOURCE_HELP,
    STORE_HELP,
    check_output,
    emit,
    refuse_inputs,
    say,
    task_id_argument,
    warn,
)
from .seal_command import add_key_file, key_argument


def add_export(commands: Any) -> None:
    export = commands.add_parser(
        "export",
        help="write a store's log as JSONL (byte-stable)",
        description=(
            "Write every event as one JSON line (position, topic, stream, version, at, the "
            "stored payload), then one line of the stream heads that verify --against reads, "
            "then the seal of the export's position (verify --seals reads it)."
        ),
    )
    export.add_argument("store", help=STORE_HELP)
    export.add_argument("out", type=Path, metavar="OUT.jsonl", help="the .jsonl file to write")
    add_key_file(export)
    export.add_argument("--json", action="store_true", help="report as JSON")


def add_import(commands: Any) -> None:
    imp = commands.add_parser(
        "import",
        help="write a JSONL export into a new, empty store (all or nothing)",
        description=(
            "Check every line as a writer would (the stored limits, each JSON value's size) "
            "and every digest of the chain, then write the events unchanged to a new store, "
            "all or nothing: a SQLite store is written beside the target and renamed into "
            "place, a PostgreSQL one in one transaction. A refused, killed or failed import "
            "leaves no store; a full disk exits 2 saying what was short."
        ),
    )
    imp.add_argument("log", type=Path, metavar="LOG.jsonl", help="the .jsonl export")
    imp.add_argument("store", help="SQLite path or postgresql:// URL (new, or empty)")
    imp.add_argument("--json", action="store_true", help="report as JSON")
    imp.add_argument("--skip-invalid", action="store_true", help=SKIP_HELP)


def add_trace(commands: Any) -> None:
    trace = commands.add_parser(
        "trace",
        help="rebuild phase spans from the log as OTLP/JSON (for a tracing UI)",
        description=(
            "Rebuild the tasktrail.phase spans from the log, with their original start and end "
            "times on the scheduler clock, and write them as OTLP/JSON. With TASK, only the "
            "trace that task belongs to. Phases a crash cut off end where recovery found them."
        ),
    )
    trace.add_argument("source", help=SOURCE_HELP)
    trace.add_argument("task", nargs="?", help="the task id (default: every task)")
    trace.add_argument(
        "--out", type=Path, metavar="FILE", help="the .json file to write (default: stdout)"
    )


def do_export(args: argparse.Namespace) -> int:
    from tasktrail.replay import export

    out = check_output(args.out, [args.store])
    count = export(args.store, out, chain_key=key_argument(args))
    if args.json:
        emit({"events": count, "out": str(args.out)})
    else:
        say(f"exported {count} events to {args.out}")
    return EXIT_OK


def do_import(args: argparse.Namespace) -> int:
    from tasktrail.replay import import_log
    from tasktrail.replay.log import Skipped

    target = Path(args.store)
    if "://" not in args.store and not args.store.startswith("file:"):
        refuse_inputs(target, [args.log], what="refusing to import a log into itself")
        if target.is_file() and target.stat().st_size and not is_sqlite_file(target):
            raise InvalidArgument(f"{args.store} is not a SQLite store: refusing to write into it")
    skipped: list[Skipped] = []
    count = import_log(args.log, args.store, skip_invalid=args.skip_invalid, skipped=skipped)
    for line in skipped:
        warn(f"{args.log}:{line.line}: skipped: {line.reason}")
    if args.json:
        emit(
            {
                "events": count,
                "store": args.store,
                "skipped": [{"line": s.line, "reason": s.reason} for s in skipped],
            }
        )
    else:
        say(f"imported {count} events into {args.store}")
    return EXIT_OK


def do_trace(args: argparse.Namespace) -> int:
    from tasktrail.projections.trace import rebuild, to_otlp_json

    out = check_output(args.out, [args.source]) if args.out is not None else None
    task = task_id_argument(args.task) if args.task is not None else None
    spans = rebuild(args.source, task)
    if out is None:
        emit(to_otlp_json(spans))
        return EXIT_OK
    with atomic_output(out) as handle:
        handle.write(orjson.dumps(to_otlp_json(spans), option=orjson.OPT_INDENT_2) + b"\n")
    traces = len({span.context.trace_id for span in spans if span.context is not None})
    say(f"wrote {len(spans)} spans ({traces} traces) to {args.out}")
    return EXIT_OK
