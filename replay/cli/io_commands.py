"""The ``tasktrail`` commands that move a log in or out of a store: ``export`` writes
it as byte-stable JSONL, ``import`` appends such an export to a new, empty store, and
``trace`` rebuilds its phase spans as OTLP/JSON for a tracing UI. Each command is a
parser builder ``add_<name>`` and a handler ``do_<name>``.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from .common import EXIT_OK, SKIP_HELP, SOURCE_HELP, emit, existing


def add_export(commands: Any) -> None:
    export = commands.add_parser(
        "export",
        help="write a store's log as JSONL (byte-stable)",
        description="Write every event as one JSON line: position, topic, stream, version, at.",
    )
    export.add_argument("store", help="SQLite path or postgresql:// URL")
    export.add_argument("out", type=Path, metavar="OUT.jsonl", help="the .jsonl file to write")
    export.add_argument("--json", action="store_true", help="report as JSON")


def add_import(commands: Any) -> None:
    imp = commands.add_parser(
        "import",
        help="append a JSONL export to a new, empty store",
        description="Check every line, then append the events unchanged to an empty store.",
    )
    imp.add_argument("log", type=Path, metavar="LOG.jsonl", help="the .jsonl export")
    imp.add_argument("store", help="SQLite path or postgresql:// URL (must be empty)")
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

    count = export(existing(args.store), args.out)
    if args.json:
        emit({"events": count, "out": str(args.out)})
    else:
        print(f"exported {count} events to {args.out}")
    return EXIT_OK


def do_import(args: argparse.Namespace) -> int:
    from tasktrail.replay import import_log

    count = import_log(args.log, args.store, skip_invalid=args.skip_invalid)
    if args.json:
        emit({"events": count, "store": args.store})
    else:
        print(f"imported {count} events into {args.store}")
    return EXIT_OK


def do_trace(args: argparse.Namespace) -> int:
    from tasktrail.projections.trace import rebuild, to_otlp_json, write_otlp_json

    spans = rebuild(args.source, args.task)
    if args.out is None:
        emit(to_otlp_json(spans))
        return EXIT_OK
    write_otlp_json(spans, args.out)
    traces = len({span.context.trace_id for span in spans if span.context is not None})
    print(f"wrote {len(spans)} spans ({traces} traces) to {args.out}")
    return EXIT_OK
