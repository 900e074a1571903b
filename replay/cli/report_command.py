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

from tasktrail.domain import InvalidArgument

from .common import EXIT_OK, SOURCE_HELP, UNTIL_HELP, until_argument

DEFAULT_LIMIT = 2_000
"""``gather``'s own default (tests/test_report.py holds the two equal), written out so
that parsing the command line imports none of the report."""

DESCRIPTION = """\
Draw the history of a task tree as one HTML file that opens from disk and loads
nothing: a timeline on the scheduler clock (a row per task: its stays, sleeps,
waits with arrows to what it awaited, held outcomes, Turns per role, dispatch runs;
marks for abort marks, crashes and recoveries, refusals), the owner tree with
outcomes, restarts and blocked reasons, TASK's explain trail (each event, the rule
that applied, before -> after) and the verify result. With TASK it reads only that
task's streams, its owners' and what it owns; without, the whole log, every task
drawn (a store of more than --limit tasks page by page: --page P). Type in the
page's search box to find tasks; hover for details; Ctrl + wheel zooms.
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
        "--limit",
        type=int,
        default=DEFAULT_LIMIT,
        metavar="N",
        help=f"without TASK: tasks a page draws (default {DEFAULT_LIMIT}; "
        "a store with fewer is drawn whole)",
    )
    report.add_argument(
        "--page",
        type=int,
        default=1,
        metavar="P",
        help="without TASK: the page to draw, 1 first (default 1)",
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
    if args.limit is not None and args.limit < 1:
        raise InvalidArgument(f"--limit {args.limit}: give at least 1 task a page")
    if args.page < 1:
        raise InvalidArgument(f"--page {args.page}: pages start at 1")
    until = until_argument(args.until)
    registry = None
    if args.registry:
        from .worker_command import load_setup

        registry = load_setup(args.registry).registry
    data = write_report(
        args.source,
        args.out,
        args.task,
        until=until,
        limit=args.limit,
        restart_limit=args.restart_limit,
        registry=registry,
        page=args.page,
    )
    verdict = "ok" if data.verify.ok else f"{len(data.verify.violations)} violations"
    print(f"wrote {args.out}: {data.scope}; verify {verdict}")
    return EXIT_OK
