"""``tasktrail snapshot STORE``: take a snapshot of a store now, ``--list`` those kept, or
``--prune`` those of an earlier format.

A snapshot is the world of live work as of one log position, kept beside the log
(see :mod:`tasktrail.domain.history`): opening the store, ``tasks``, ``replay
--until`` and a projector resuming start from the latest one and fold only the
events after it. A scheduler takes one every so many events and at close; this
command takes one for a store written before snapshots existed, or after a long
tail. It folds the store from its latest good snapshot (no scheduler is opened:
nothing is recovered, no event is appended) and writes the snapshot at the
position it folded to. Each snapshot written drops, in its transaction, those of an
earlier format below it, which nothing reads any more; ``--prune`` drops them without
taking one (a table an earlier release filled). ``--list`` only reads.
"""

from __future__ import annotations

import argparse
from typing import Any

from tasktrail.domain import InvalidArgument, open_store
from tasktrail.domain.store.files import is_sqlite_file, sqlite_tables
from tasktrail.domain.store.location import parse_location
from tasktrail.domain.tasks.describe import format_at

from .common import EXIT_OK, STORE_HELP, emit, local_file, say, warn

DESCRIPTION = """\
Take a snapshot of a store now and print its position: the world of live work
as of the store's last event, saved in the store's tasktrail_snapshots table so
that opening the store (and tasks, replay --until, project) folds only the events
after it. A scheduler takes one every 20,000 events and at close; take one by hand
for a store written before snapshots existed, or one left with a long tail. No
scheduler is opened (nothing recovered, no event appended): the log is folded from
its latest good snapshot, and a snapshot already at that position is kept as is.
The store must exist; it is written only in its snapshot table.

--every N also takes one every N events along the log, as a scheduler writing it
would have (from the latest good snapshot on): for a store written before
snapshots existed, so that replay --until an earlier position starts near one.

Snapshots kept: about one every 20,000 events (or every N with --every), however
often one is taken: each one written drops, in the same transaction, the one before
it when the one before that is within that many events, so replay --until any
position starts from a snapshot at most about that far back, and a million events
keep about 50 snapshots (each the size of the live work it holds) even for a host
that takes one at every close. A snapshot of an earlier format (an earlier
release's) is passed over when the store is opened or replayed; once one of this
format is kept above it, the next snapshot written drops it.

--prune drops those earlier-format snapshots now, without taking one (a table an
earlier release filled), and every snapshot an open would pass over: one whose body
does not match its digest, holds a value of the wrong type or parts that disagree,
or whose heads do not match the log (each named on stderr); it prints how many it
dropped and kept.

--list prints the snapshots kept (position, format, written at, size in bytes)
and only reads, as replay, tasks and verify do: verify checks each snapshot kept
against the fold and never drops one. A snapshot is derived data: one that
cannot be read is passed over, never trusted.
"""


def add_snapshot(commands: Any) -> None:
    snapshot = commands.add_parser(
        "snapshot",
        help="take a snapshot of a store now (--list: the snapshots kept)",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    snapshot.add_argument("store", help=STORE_HELP)
    which = snapshot.add_mutually_exclusive_group()
    which.add_argument(
        "--list", action="store_true", help="print the snapshots kept (read only), take none"
    )
    which.add_argument(
        "--prune",
        action="store_true",
        help="drop unreadable snapshots and those of an earlier format, take none",
    )
    which.add_argument(
        "--every",
        type=int,
        metavar="N",
        help="also take one every N events along the log (N >= 1000)",
    )
    snapshot.add_argument("--json", action="store_true", help="JSON: one object (a line each)")


def do_snapshot(args: argparse.Namespace) -> int:
    from tasktrail.domain.history import (
        DEFAULT_EVERY,
        Restored,
        SnapshotTable,
        restore,
        take_snapshot,
    )

    if args.prune:
        return _prune(args)
    if args.list:
        with open_store(args.store, read_only=True) as store:
            kept = SnapshotTable(store).kept()
        for one in kept:
            if args.json:
                emit(one.__dict__)
            else:
                say(
                    f"{one.position:>10}  format {one.format}  {format_at(one.written_at)}  "
                    f"{one.size:>10} bytes"
                )
        if not kept and not args.json:
            say(f"no snapshots kept in {args.store}")
        return EXIT_OK
    if args.every is not None and args.every < 1000:
        raise InvalidArgument(f"--every must be at least 1000 events, not {args.every}")
    _check_is_store(args.store)
    # Read-only first: a store that is not there (or holds nothing) is refused before
    # anything is opened for writing, which would create it.
    with open_store(args.store, read_only=True) as store:
        if store.head() == 0:
            raise InvalidArgument(f"{args.store} holds no events: nothing to snapshot")
    with open_store(args.store) as store:
        table = SnapshotTable(store)
        taken = set(table.positions())
        along: list[int] = []
        dropped: set[int] = set()

        def on_the_way(restored: Restored) -> None:
            # The world is the fold up to here: save it as a writer would have.
            position = restored.position
            if restored.folded % args.every == 0 and position not in taken:
                dropped.update(take_snapshot(store, restored.world, position, args.every))
                along.append(position)

        restored = restore(store, on_event=on_the_way if args.every else None)
        for problem in restored.problems:
            warn(f"{problem}; passed over")
        position = restored.position
        already = position in taken or position in along
        # Taken or not, an earlier release's snapshots below the newest go.
        spacing = args.every or DEFAULT_EVERY
        dropped.update(
            table.prune() if already else take_snapshot(store, restored.world, position, spacing)
        )
    live = sum(1 for task in restored.world.tasks.values() if task.status != "terminal")
    if along and not args.json:
        say(f"{len(along)} snapshots taken along the log, every {args.every} events")
    if dropped and not args.json:
        say(f"{len(dropped)} superseded snapshots dropped")
    if args.json:
        emit(
            {
                "position": position,
                "taken": not already,
                "live_tasks": live,
                "along": along,
                "dropped": sorted(dropped),
            }
        )
    elif already:
        say(f"a snapshot at position {position} (the store's last) is already kept")
    else:
        say(f"snapshot taken at position {position}: {live} live tasks")
    return EXIT_OK


def _prune(args: argparse.Namespace) -> int:
    """Drop the snapshots an open passes over (unreadable, or failing a check) and those
    the kept ones supersede, taking none."""
    from tasktrail.domain.history import SnapshotTable, failing

    _check_is_store(args.store)
    # Read-only first: with no snapshot kept there is nothing to drop, and a writable
    # open would create the table (or, on a server, the store).
    with open_store(args.store, read_only=True) as store:
        rows = SnapshotTable(store).count()
        kept = SnapshotTable(store).positions()
        bad = failing(store) if kept else {}
    dropped: list[int] = []
    unreadable: list[int] = []
    malformed = 0
    if rows:
        with open_store(args.store) as store:
            table = SnapshotTable(store)
            unreadable = table.drop(sorted(bad))
            malformed = table.drop_malformed()
            dropped = sorted(unreadable + table.prune())
    for position in unreadable:
        warn(f"dropped the snapshot at position {position}: {bad[position]}")
    if malformed:
        warn(f"dropped {malformed} rows whose columns are not of their types")
    if args.json:
        emit({"dropped": dropped, "kept": len(kept) - len(dropped), "malformed": malformed})
    else:
        say(
            f"{len(dropped)} snapshots dropped (unreadable, or of an earlier format), "
            f"{len(kept) - len(dropped)} kept"
        )
    return EXIT_OK


def _check_is_store(location: str) -> None:
    """Refuse a local file that is missing or not a tasktrail store (a writable open
    would create one, or tables in it)."""
    if parse_location(location).read_only:
        raise InvalidArgument(
            f"{location} opens the store read-only (mode=ro or immutable=1): snapshot "
            "writes its snapshot table; give the store's path"
        )
    path = local_file(location)
    if path is None:
        return  # a server's store: the read-only open refuses one that is not there
    if not path.exists():
        raise InvalidArgument(f"no store at {location}: snapshot takes one of a store there")
    if not is_sqlite_file(path) or "stored_events" not in sqlite_tables(path):
        raise InvalidArgument(f"{location} is not a tasktrail store: refusing to write into it")
