"""``tasktrail runs STORE``: the run ledger (SPEC section 3), a run a line in ledger
(mint) order under a header: its id ``task|day|attempt``, status, trigger, submits
used, and its job or why it failed. ``--day`` one local day's, ``--live`` the runs in
flight, ``--task`` one task's; ``--json`` JSON Lines, a run a line, no header.

Every run of the history comes from the whole log, folded from position 0 (a
snapshot keeps only live runs and recent days); ``--live`` alone reads the latest
snapshot and the events after it. The store is only read.
"""

from __future__ import annotations

import argparse
from datetime import date
from typing import Any

from tasktrail.domain import RunState, ledger_of, open_store

from .common import EXIT_OK, STORE_HELP, emit, say, task_id_argument

HEADER = f"{'RUN':<48} {'STATUS':<11} {'TRIGGER':<9} {'SUBMITS':>7}  JOB / ERROR"

DESCRIPTION = """\
List the run ledger of a store: every dispatch run, in the order it was minted,
one a line under a header: the run id (task|day|attempt), its status
(dispatching, running, done, failed, orphaned, superseded), its trigger (manual
or scheduled), the submits it used, and its executor job (or the error it
ended with). When nothing matches, a line says so (exit 0). The store is only
read: every run comes from the whole log; --live alone reads the latest
snapshot and the events after it.

examples:
  tasktrail runs trail.db                         every run
  tasktrail runs trail.db --day 2026-01-05        one local day's runs
  tasktrail runs trail.db --live                  the runs in flight, reconcile's work
  tasktrail runs trail.db --task nightly --json | jq -c '{run_id, status, error}'
"""


def day_argument(text: str) -> str:
    """A local day on the command line, as the ledger writes it: ``YYYY-MM-DD``."""
    try:
        date.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a day: give YYYY-MM-DD") from None
    if len(text) != 10:
        raise argparse.ArgumentTypeError(f"{text!r} is not a day: give YYYY-MM-DD")
    return text


def add_runs(commands: Any) -> None:
    runs = commands.add_parser(
        "runs",
        help="the run ledger: each dispatch run, its status and its job (--live: in flight)",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    runs.add_argument("store", help=STORE_HELP)
    runs.add_argument(
        "--day",
        type=day_argument,
        metavar="DAY",
        help="only the runs of this local day (YYYY-MM-DD, in the run settings' time zone)",
    )
    runs.add_argument(
        "--live",
        action="store_true",
        help="only the runs in flight (dispatching or running): what reconcile visits",
    )
    runs.add_argument("--task", metavar="TASK", help="only the runs of this task")
    runs.add_argument(
        "--json",
        action="store_true",
        help="JSON Lines: one JSON object per run, a line each (no header, no notes)",
    )


def do_runs(args: argparse.Namespace) -> int:
    from tasktrail.domain.history import restore

    task = task_id_argument(args.task) if args.task is not None else None
    only_live = args.live and args.day is None
    with open_store(args.store, read_only=True) as store:
        world = restore(store, snapshots=only_live).world  # read only: nothing appended
    ledger = ledger_of(world)
    shown = 0
    for run in ledger.runs.values():
        if args.live and not run.live:
            continue
        if args.day is not None and run.day != args.day:
            continue
        if task is not None and run.task_id != task:
            continue
        if args.json:
            emit(run.to_dict())
        else:
            if shown == 0:
                say(HEADER)
            say(_line(run))
        shown += 1
    if shown == 0 and not args.json:
        say(_nothing(args))
    return EXIT_OK


def _line(run: RunState) -> str:
    if run.error is not None:
        what = f"{run.error.code}: {run.error.message}"
    elif run.job_id is not None:
        known = run.live and run.last_known_status is not None
        what = f"{run.job_id}" + (f" ({run.last_known_status})" if known else "")
    else:
        what = f"waiting to submit ({run.last_submit_error})" if run.last_submit_error else ""
    return (
        f"{run.run_id:<48} {run.status:<11} {run.trigger:<9} {run.submit_attempts:>7}  {what}"
    ).rstrip()


def _nothing(args: argparse.Namespace) -> str:
    """The line a ledger with no run to show says, naming what was asked."""
    scope = "live run" if args.live else "run"
    asked = [f"--{name} {getattr(args, name)}" for name in ("day", "task") if getattr(args, name)]
    return f"no {scope} matches {' '.join(asked)}" if asked else f"no {scope} in this store"
