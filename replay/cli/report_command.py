"""``tasktrail report STORE [TASK] --out FILE.html``: an incident report to look at.

Writes one self-contained HTML file (see :mod:`tasktrail.replay.report`): the
timeline of a task tree on the scheduler clock, its owner tree, the task's explain
trail and the verify result, as of the end of the log or ``--until``. It reads the
tree's streams only, writes only ``--out`` (through a temporary file renamed into
place) and refuses an ``--out`` that is the store itself.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from .common import EXIT_OK, SOURCE_HELP, UNTIL_HELP

DESCRIPTION = """\
Draw the history of a task tree as one HTML file that opens from disk and loads
nothing: a timeline on the scheduler clock (a row per task: its stays, sleeps,
waits with arrows to what it awaited, held outcomes, Turns per role, dispatch runs;
marks for abort marks, crashes and recoveries, refusals), the owner tree with
outcomes, restarts and blocked reasons, TASK's explain trail (each event, the rule
that applied, before -> after) and the verify result. With TASK it reads only that
task's streams, its owners' and what it owns; without, the whole log (the first
--limit tasks in tree order are drawn). Hover for details; Ctrl + wheel zooms.
"""


def add_report(commands: Any) -> None:
    report = commands.add_parser(
        "report",
        help="draw a task tree's history as one self-contained HTML file",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    report.add_argument("source", metavar="STORE", help=SOURCE_HELP)
    report.add_argument(
        "task", metavar="TASK", nargs="?", help="the task whose tree to draw (default: all)"
    )
    report.add_argument(
        "--out", metavar="FILE.html", type=Path, required=True, help="the .html file to write"
    )
    report.add_argument("--until", metavar="N|TIME", help=UNTIL_HELP)
    report.add_argument(
        "--limit", type=int, default=200, metavar="N", help="tasks drawn without TASK (default 200)"
    )
    report.add_argument(
        "--restart-limit",
        type=int,
        default=None,
        metavar="N",
        help="measure parked tasks against N restarts "
        "(default: the restart limit the log recorded, else 3)",
    )
    report.add_argument(
        "--registry",
        metavar="MODULE:ATTR",
        help="the definitions, to judge every blocked reason (default: restart_limit only)",
    )


def do_report(args: argparse.Namespace) -> int:
    from tasktrail.replay.report import check_out, write_report

    check_out(args.source, args.out)  # before anything is imported, opened or read
    registry = None
    if args.registry:
        from .worker_command import load_setup

        registry = load_setup(args.registry).registry
    data = write_report(
        args.source,
        args.out,
        args.task,
        until=args.until,
        limit=args.limit,
        restart_limit=args.restart_limit,
        registry=registry,
    )
    verdict = "ok" if data.verify.ok else f"{len(data.verify.violations)} violations"
    print(f"wrote {args.out}: {data.scope}; verify {verdict}")
    return EXIT_OK
