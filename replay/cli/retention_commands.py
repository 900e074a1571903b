"""The history commands (the Retention issue): ``archive`` (finished task trees to
segment files, or ``--dry-run``), ``erase`` (a finished tree's values), ``retention``
(the policy and what it would free), and ``--archive DIR`` on the read commands:
:func:`run_across` runs a command reading across the archive, says each segment that
fails (exit 1), and without ``--archive`` says once which archived ranges it skipped.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from tasktrail.domain import InvalidArgument

from .common import EXIT_OK, EXIT_PROBLEMS, STORE_HELP, emit, say, warn
from .seal_command import add_key_file, key_argument

READS_ACROSS = ("history", "explain", "replay", "verify", "report", "export", "project", "trace")
"""The read commands that take ``--archive DIR``."""
ARCHIVE_HELP = (
    "the archive folder of the store's segments (tasktrail archive --to): their events "
    "are read as if still in place, each checked against the act that named it"
)


def add_archive_option(commands: Any) -> None:
    """``--archive DIR`` on every read command of :data:`READS_ACROSS`."""
    for name in READS_ACROSS:
        commands.choices[name].add_argument(
            "--archive", type=Path, metavar="DIR", default=None, help=ARCHIVE_HELP
        )


def run_across(args: argparse.Namespace, handler: Callable[[argparse.Namespace], int]) -> int:
    """Run a command's handler reading across ``--archive`` if given (a segment that
    fails is said and makes the exit 1), else saying which archived ranges it skips."""
    from tasktrail.domain.retention.across import findings, reading_archive

    if getattr(args, "command", None) not in READS_ACROSS:
        return handler(args)
    folder = getattr(args, "archive", None)
    if folder is not None and not Path(folder).is_dir():
        raise InvalidArgument(f"--archive {folder}: not a folder")
    try:
        with reading_archive(folder) as views:
            code = handler(args)
    except InvalidArgument:
        raise  # refused before anything was read: no note
    finally:
        if folder is None and sys.exc_info()[0] is not InvalidArgument:
            _skipped_note(getattr(args, "store", None) or getattr(args, "source", None))
    found = findings(views)
    for finding in found:
        warn(str(finding))
    return EXIT_PROBLEMS if found and code == EXIT_OK else code


def _skipped_note(location: str | None) -> None:
    """Once: the ranges archive and prune acts took that this read leaves out."""
    from tasktrail.domain import open_store
    from tasktrail.domain.retention.across import skipped_ranges
    from tasktrail.domain.store.gaps import gaps_of, history_acts
    from tasktrail.replay.log import is_jsonl

    if location is None or is_jsonl(location):
        return
    try:
        with open_store(location, read_only=True) as store:
            gaps = gaps_of(history_acts(store))
    except Exception:  # the command itself says what is wrong with the store
        return
    said = skipped_ranges(gaps, "pass --archive DIR to read them")
    if said is not None:
        warn(f"note: {said}")


def add_archive(commands: Any) -> None:
    archive = commands.add_parser(
        "archive",
        help="move finished task trees to compressed segment files, proofs kept",
        description=(
            "Move every task tree whose tasks all ended before TIME (no live task, no open "
            "run, no schedule's latest tick in it) to Zstandard segment files in DIR, each "
            "fsynced before one transaction records it (HistoryArchived: its seal and the "
            "blocks it held in the log's tree) and deletes its rows. Read commands take "
            "--archive DIR to read them in place; seals taken before still verify."
        ),
    )
    archive.add_argument("store", help=STORE_HELP)
    archive.add_argument("--before", required=True, metavar="TIME", help=_TIME_HELP)
    archive.add_argument("--to", required=True, type=Path, metavar="DIR", help="the folder")
    archive.add_argument("--kind", metavar="K", help="only trees whose root is of this kind")
    archive.add_argument("--dry-run", action="store_true", help="say what would move, write none")
    archive.add_argument("--batch", type=int, default=20_000, metavar="N", help="events a segment")
    archive.add_argument("--actor", help="who archives (default $TASKTRAIL_ACTOR, else user@host)")
    archive.add_argument("--reason", help="why")
    archive.add_argument(
        "--vacuum",
        action="store_true",
        help="then give the freed space back (SQLite: converts a file made before archives "
        "existed to incremental vacuum, rewriting it once; PostgreSQL: VACUUM the table)",
    )
    archive.add_argument("--json", action="store_true", help="the report as JSON")
    add_key_file(archive)


_TIME_HELP = "an ISO-8601 time (say Z for UTC), or ms since the epoch, or 30d (days ago)"


def parse_time(text: str, what: str) -> float:
    """``--before``: an ISO-8601 time, ms since the epoch, or ``Nd`` (N days ago)."""
    text = text.strip()
    try:
        if text.endswith("d") and text[:-1].isdigit():
            return time.time() * 1000 - int(text[:-1]) * 86_400_000
        if text.replace(".", "", 1).isdigit():
            return float(text)
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise InvalidArgument(f"{what} {text!r}: {_TIME_HELP}") from None
    if moment.tzinfo is None:
        raise InvalidArgument(f"{what} {text!r} needs a time zone (say Z for UTC)")
    return moment.astimezone(UTC).timestamp() * 1000


def do_archive(args: argparse.Namespace) -> int:
    from tasktrail.domain import open_store
    from tasktrail.domain.retention.archiving import archive
    from tasktrail.domain.store.removal import vacuum

    from .act_commands import default_actor

    before = parse_time(args.before, "--before")
    if args.batch < 1:
        raise InvalidArgument(f"--batch must be at least 1, not {args.batch}")
    open_store(args.store, read_only=True).close()  # a write command never creates a store
    folder = args.to
    if not args.dry_run:
        folder.mkdir(parents=True, exist_ok=True)
    with open_store(args.store, read_only=args.dry_run, chain_key=key_argument(args)) as store:
        report = archive(
            store,
            before=before,
            to=folder,
            kind=args.kind,
            dry_run=args.dry_run,
            batch=args.batch,
            actor=args.actor or default_actor(),
            why=args.reason,
        )
        sizes = vacuum(store) if args.vacuum and not args.dry_run else None
    if args.json:
        emit({**report.to_dict(), **({"vacuum": list(sizes)} if sizes else {})})
        return EXIT_OK
    if sizes is not None:
        say(f"vacuum: {sizes[0]} bytes before, {sizes[1]} after")
    verb = "would move" if args.dry_run else "moved"
    total = report.to_dict()
    say(
        f"{verb} {report.trees} trees, {report.events} events ({total['stored_bytes']} bytes "
        f"stored, {total['segment_bytes']} bytes of segments) to {os.fspath(folder)}"
    )
    for act in report.acts:
        say(
            f"  {act.segment}: {len(act.trees)} trees, {act.events} events, "
            f"positions {act.first}-{act.last}"
        )
    return EXIT_OK


def add_erase(commands: Any) -> None:
    erase = commands.add_parser(
        "erase",
        help="erase the values of a finished task tree, keeping its proofs",
        description=(
            "Take the values a person may ask to have forgotten (memos, results, messages, "
            "error details: every field of any JSON value) out of the events of the "
            "finished tree of TASK, in the store and, at their next catch-up, the read "
            "models. Each event keeps its digest and its leaf in the log's tree: verify "
            "proves the chain and every seal, and says the events are erased (by whom, "
            "when, why). A live tree is refused (rule 37), nothing written."
        ),
    )
    erase.add_argument("store", help=STORE_HELP)
    erase.add_argument("task", help="a task of the tree (its root, or any task in it)")
    erase.add_argument("--actor", help="who erases (default $TASKTRAIL_ACTOR, else user@host)")
    erase.add_argument("--reason", help="why (a request's reference, say)")
    erase.add_argument("--json", action="store_true", help="what was erased, as JSON")
    erase.add_argument(
        "--archive", type=Path, metavar="DIR", help="the archive folder, for an archived tree"
    )
    add_key_file(erase)


def do_erase(args: argparse.Namespace) -> int:
    from tasktrail.domain import open_store
    from tasktrail.domain.retention.erasure import erase

    from .act_commands import default_actor
    from .common import task_id_argument

    task_id = task_id_argument(args.task)
    open_store(args.store, read_only=True).close()  # a write command never creates a store
    with open_store(args.store, chain_key=key_argument(args)) as store:
        done = erase(
            store,
            task_id,
            actor=args.actor or default_actor(),
            why=args.reason,
            archive=args.archive,
        )
    if args.json:
        emit(done.__dict__)
    else:
        say(f"erased {done.events} events of the tree of {done.tree} ({len(done.tasks)} tasks)")
    return EXIT_OK


def add_retention(commands: Any) -> None:
    retention = commands.add_parser(
        "retention",
        help="the retention policy and seal cadence in force, and what they would free",
        description=(
            "Print the retention policy workers keep (Scheduler.configure_retention) and "
            "the seal cadence (configure_seals), and what the policy would take now: the "
            "trees, events and bytes a worker would archive or prune. Reads the store only."
        ),
    )
    retention.add_argument("store", help=STORE_HELP)
    retention.add_argument("--json", action="store_true", help="as JSON")


def do_retention(args: argparse.Namespace) -> int:
    from tasktrail.domain import open_store
    from tasktrail.domain.retention.archiving import archive, scan
    from tasktrail.domain.retention.keeper import setting
    from tasktrail.domain.retention.policy import RETENTION_STREAM, SEALS_STREAM, keep_ms

    with open_store(args.store, read_only=True) as store:
        policy = setting(store, RETENTION_STREAM)
        cadence = setting(store, SEALS_STREAM)
        found: dict[str, Any] = {
            "policy": dict(policy) if policy else None,
            "seals": dict(cadence) if cadence else None,
        }
        if policy is not None and policy.get("keep_days"):
            trees = scan(store)
            now = store.latest_at  # as of the log's last event (the scheduler clock's)
            units = list(trees.movable(now, keep=lambda u: keep_ms(policy, u.kinds)))
            folder = policy.get("archive_to")
            report = archive(store, before=now, to=folder, units=units, dry_run=True)
            found["would_free"] = {k: v for k, v in report.to_dict().items() if k != "acts"}
    if args.json:
        emit(found)
        return EXIT_OK
    if policy is None or not policy.get("keep_days"):
        say("retention: none (history is kept whole)")
    else:
        kinds = policy.get("per_kind") or {}
        where = policy.get("archive_to") or "nowhere: pruned, proofs kept"
        say(
            f"retention: keep {policy['keep_days']} days"
            + (f" ({', '.join(f'{k}: {v}' for k, v in kinds.items())})" if kinds else "")
            + f", archived to {where}"
        )
        free = found["would_free"]
        say(
            f"  would take now: {free['trees']} trees, {free['events']} events, "
            f"{free['stored_bytes']} bytes stored"
        )
    if cadence is None:
        say("seals: none periodic")
    else:
        say(
            f"seals: every {cadence.get('every_s')} s / {cadence.get('every_events')} events, "
            f"to {cadence.get('to') or 'the host callable'}"
        )
    return EXIT_OK


__all__ = [
    "READS_ACROSS",
    "add_archive",
    "add_archive_option",
    "add_erase",
    "add_retention",
    "do_archive",
    "do_erase",
    "do_retention",
    "parse_time",
    "run_across",
]
