"""``tasktrail worker MODULE:ATTR --store LOCATION``: run a host's registry as a fleet
member until SIGTERM or SIGINT (see :class:`tasktrail.domain.Worker`).

``MODULE:ATTR`` names a :class:`~tasktrail.domain.Registry`, or a function that
returns one, or a :class:`WorkerSetup` (a registry plus the optional Turn runtime,
run executor and settings a host uses); the module is imported as Python imports
any module (put its folder on ``PYTHONPATH``).
"""

from __future__ import annotations

import argparse
import importlib
import logging
from pathlib import Path
from typing import Any

import orjson

from tasktrail.domain import (
    InvalidArgument,
    Registry,
    Scheduler,
    StoreError,
    TasktrailError,
    Worker,
)
from tasktrail.domain import WorkerSetup as WorkerSetup  # re-exported from its old home
from tasktrail.domain.app.fleet import lease_ms, worker_name
from tasktrail.domain.app.invocations import check_concurrency
from tasktrail.domain.app.worker_loop import check_grace, check_poll

from .common import EXIT_BAD_INPUT, EXIT_OK, check_folder

HELP = "run a registry as one worker of a fleet on a store (until SIGTERM/SIGINT)"
DESCRIPTION = """\
Run the phases of the tasks in STORE with the definitions in MODULE:ATTR, as one
worker of a fleet: any number of workers may share a store (SQLite on one
machine, PostgreSQL across machines). A worker runs up to --concurrency phases
at once, each on its own task; a phase may be a plain function or an async def.

Each worker renews a lease and holds a lock for its process's life. A worker
whose process died has its running tasks recovered by the others within about
a second, or by itself when restarted; one that stalls (stopped, hung, cut off)
keeps them until its lease lapses (rule 9). SIGTERM or SIGINT starts no new
phase, gives those in flight --grace seconds, then hands their tasks back as
pending with no restart counted (rule 10); a second signal does so at once.

Example:
  PYTHONPATH=. tasktrail worker myapp.tasks:registry --store trail.db --concurrency 32

MODULE:ATTR is a Registry, a function returning one, or a WorkerSetup.
"""


def add_worker(commands: Any) -> None:
    parser = commands.add_parser(
        "worker",
        help=HELP,
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("target", metavar="MODULE:ATTR", help="the registry to run")
    parser.add_argument(
        "--store",
        required=True,
        metavar="LOCATION",
        help="SQLite path or postgresql:// URL (created if new)",
    )
    parser.add_argument(
        "--worker",
        default=None,
        metavar="NAME",
        help="this worker's name (default $TASKTRAIL_WORKER, else unique)",
    )
    parser.add_argument(
        "--lease", type=float, default=30_000, metavar="MS", help="lease length (default 30000)"
    )
    parser.add_argument(
        "--poll",
        type=_poll,
        default=100,
        metavar="MS",
        help="time between looks for new events when idle (default 100); the store's news "
        "wakes an idle worker sooner (docs/fleet.md)",
    )
    parser.add_argument("--quiet", action="store_true", help="log warnings only, not decisions")
    parser.add_argument(
        "--concurrency",
        type=_concurrency,
        default=16,
        metavar="N",
        help="phases in flight at once, each on its own task (default 16); async def "
        "phases wait together on one event loop, sync ones each in a thread",
    )
    parser.add_argument(
        "--grace",
        type=_grace,
        default=10.0,
        metavar="S",
        help="at SIGTERM/SIGINT, seconds the phases in flight get to reach their next "
        "decision before the close hands their tasks back (default 10); a second "
        "signal closes at once",
    )
    parser.add_argument(
        "--stats",
        type=_stats,
        metavar="FILE",
        default=None,
        help="at exit, append one JSON line of this worker's totals to FILE "
        "(events written, conflicts, ticks)",
    )
    parser.add_argument(  # issue 45: configure_seals, recorded for the fleet
        "--seal-to", type=Path, metavar="PATH", help="append a seal line to PATH periodically"
    )
    parser.add_argument(
        "--seal-every",
        type=float,
        metavar="S",
        default=60.0,
        help="with --seal-to: seconds between two seals (default 60)",
    )


def load_setup(target: str) -> WorkerSetup:
    """Import ``MODULE:ATTR`` and make a :class:`WorkerSetup` of it."""
    module_name, _, attr = target.partition(":")
    if not module_name or not attr:
        raise TasktrailError(f"{target!r} is not MODULE:ATTR (e.g. myapp.tasks:registry)")
    try:
        module = importlib.import_module(module_name)
    except ImportError as error:
        raise TasktrailError(f"cannot import {module_name}: {error}") from None
    value: Any = module
    for part in attr.split("."):
        if not hasattr(value, part):
            raise TasktrailError(f"{module_name} has no attribute {attr}")
        value = getattr(value, part)
    if callable(value) and not isinstance(value, Registry | WorkerSetup):
        value = value()
    if isinstance(value, Registry):
        return WorkerSetup(value)
    if isinstance(value, WorkerSetup):
        return value
    raise TasktrailError(
        f"{target} is a {type(value).__name__}, not a Registry or WorkerSetup "
        "(or a function returning one)"
    )


def do_worker(args: argparse.Namespace) -> int:
    from tasktrail.domain import InvalidArgument
    from tasktrail.domain.store.files import is_sqlite_file

    if args.stats is not None and is_sqlite_file(args.stats):  # --stats is written with open()
        raise InvalidArgument(
            f"--stats {args.stats} is a SQLite database or part of one (a store?): "
            "give the totals a file of their own"
        )
    logging.basicConfig(
        level=logging.WARNING if args.quiet else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    try:
        # What Scheduler.open would refuse, refused before it opens (or creates) the store.
        lease_ms(args.lease)
        if args.worker is not None:
            worker_name(args.worker)
        setup = load_setup(args.target)
        scheduler = Scheduler.open(
            args.store,
            registry=setup.registry,
            restart_limit=setup.restart_limit,
            worker=args.worker,
            lease=args.lease,
        )
    except (TasktrailError, StoreError) as error:
        logging.getLogger("tasktrail.worker").error("%s", error)
        return EXIT_BAD_INPUT
    if setup.executor is not None:
        scheduler.configure_runs(executor=setup.executor, settings=setup.run_settings)
    if args.seal_to is not None:
        scheduler.configure_seals(every_s=args.seal_every, to=args.seal_to, reason="--seal-to")
    worker = Worker(
        scheduler,
        runtime=setup.runtime,
        poll_ms=args.poll,
        concurrency=args.concurrency,
        grace_s=args.grace,
    )
    worker.install_signal_handlers()
    try:
        worker.run()
    finally:
        if args.stats:
            totals = {
                "worker": scheduler.worker,
                "events_written": scheduler.events_written,
                "conflicts": scheduler.conflicts,
                "ticks": worker.ticks,
            }
            with open(args.stats, "a") as out:
                out.write(orjson.dumps(totals).decode() + "\n")
    return EXIT_OK


def _concurrency(text: str) -> int:
    try:
        return check_concurrency(int(text))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"--concurrency takes a whole number of at least 1, not {text!r}"
        ) from None


def _grace(text: str) -> float:
    try:
        return check_grace(float(text))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"--grace takes a finite number of seconds >= 0, not {text!r}"
        ) from None


def _poll(text: str) -> float:
    try:
        return check_poll(float(text))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"--poll takes a finite number of milliseconds > 0, not {text!r}"
        ) from None


def _stats(text: str) -> str:
    """The totals file, checked before the store is opened: appended to only at the
    worker's end, where a missing folder would fail after all the work."""
    try:
        check_folder(Path(text))
    except InvalidArgument as error:
        raise argparse.ArgumentTypeError(str(error)) from None
    return text
