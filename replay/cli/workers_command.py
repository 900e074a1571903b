"""``tasktrail workers STORE``: the workers of a fleet as the store knows them, one a
line under a header: live or not (its lease current on this machine's clock, or
gone), its last heartbeat, when its lease runs out, and the tasks it holds running.

The leases come from the store's lease table (``tasktrail_leases``), read without
creating it (:func:`~tasktrail.domain.store.lease_view.read_leases`); the running
tasks from the latest snapshot and the events after it. A worker named on a running
task with no lease left is listed too ("gone": its tasks wait for recovery, rule 9).
The store is only read.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterable
from typing import Any

from tasktrail.domain import Store, TaskState, open_store, system_clock
from tasktrail.domain.store.lease_view import read_leases
from tasktrail.domain.store.liveness_kinds import liveness_for
from tasktrail.domain.tasks.describe import format_at

from .common import EXIT_OK, STORE_HELP, emit, say

HEADER = f"{'WORKER':<32} {'LIVE':<5} {'LAST HEARTBEAT':<24}  {'LEASE UNTIL':<24}  RUNNING"

DESCRIPTION = """\
List the workers of a store: each worker's name, whether it is live (its lease
is current by this machine's clock and its process holds its liveness lock;
"gone": its process died, so its lock is free though its lease runs, or it holds
running tasks and no lease), its last heartbeat, when its lease runs out, and how
many tasks it holds running (their ids follow). Workers of one fleet share a
clock: the system clock. When no worker ever held a lease and none holds a
task, a line says so (exit 0). The store is only read: a store no worker ran
on has no lease table, and this does not create one.

examples:
  tasktrail workers trail.db
  tasktrail workers postgresql://app@db.internal/prod?schema=jobs --json
"""


def add_workers(commands: Any) -> None:
    workers = commands.add_parser(
        "workers",
        help="each worker of a fleet: live or not, last heartbeat, tasks it holds running",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    workers.add_argument("store", help=STORE_HELP)
    workers.add_argument(
        "--json",
        action="store_true",
        help="JSON Lines: one JSON object per worker, a line each (no header, no notes)",
    )


def do_workers(args: argparse.Namespace) -> int:
    from tasktrail.domain.history import restore

    with open_store(args.store, read_only=True) as store:
        world = restore(store).world  # read only: nothing appended
        found = worker_rows(store, world.tasks.values())
    for number, row in enumerate(found):
        if args.json:
            emit(row)
            continue
        if number == 0:
            say(HEADER)
        live, gone = row["live"], row["process_gone"]
        held = row["running"]
        leased = row["renewed_at"] is not None
        state = "yes" if live else ("no" if leased and not gone else "gone")
        heartbeat = format_at(row["renewed_at"]) if leased else "-"
        until = format_at(row["expires_at"]) if leased else "-"
        tasks = f"{len(held)}" + (f"  {', '.join(held)}" if held else "")
        say(f"{row['worker']:<32} {state:<5} {heartbeat:<24}  {until:<24}  {tasks}")
    if not found and not args.json:
        say("no worker in this store (none holds a lease or a running task)")
    return EXIT_OK


def worker_rows(store: Store, tasks: Iterable[TaskState]) -> list[dict[str, Any]]:
    """Each worker of the store, by name: live or not, whether its process is gone, its
    lease's times and the tasks it holds running (``tasks``: the store's, folded). What
    ``tasktrail workers --json`` prints a line each, and the console's workers page."""
    leases = read_leases(store)
    now = system_clock()
    # A worker whose lease runs but whose process is gone (its liveness lock free).
    location = store.location
    liveness = liveness_for(location.kind, location.path, location.env)
    keys = {
        name: lease.liveness
        for name, lease in leases.items()
        if lease.liveness and not lease.expired(now)
    }
    try:
        gone = liveness.gone(keys, wait=True) if keys else set()  # a free lock, twice
    finally:
        liveness.release()
    running: dict[str, list[str]] = {}
    for task in tasks:
        if task.status == "running" and task.worker is not None:
            running.setdefault(task.worker, []).append(task.id)
    rows = []
    for name in sorted(set(leases) | set(running)):
        lease = leases.get(name)
        rows.append(
            {
                "worker": name,
                "live": lease is not None and not lease.expired(now) and name not in gone,
                "process_gone": name in gone,
                "renewed_at": lease.renewed_at if lease else None,
                "expires_at": lease.expires_at if lease else None,
                "started_at": lease.started_at if lease else None,
                "running": running.get(name, []),
            }
        )
    return rows
