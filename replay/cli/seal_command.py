"""``tasktrail seal STORE``: one JSON line that commits to the whole log up to a position
(:mod:`tasktrail.domain.store.seals`), to keep outside the store (appended to a file, a
ticket, a transparency log); ``verify STORE --seals FILE`` checks the log still extends
it. Also what every command that reads or checks digests shares: ``--key-file``.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from tasktrail.domain.store.keys import KEY_ENV, read_key_file

from .common import EXIT_OK, STORE_HELP, emit, until_argument

KEY_FILE_HELP = (
    f"a file holding the store's chain key (default: ${KEY_ENV}); with it, keyed digests "
    "and seal MACs are checked, and seals carry a MAC"
)


def add_key_file(command: Any) -> None:
    """The ``--key-file`` option of a command that reads or checks digests."""
    command.add_argument("--key-file", type=Path, metavar="FILE", help=KEY_FILE_HELP)


def key_argument(args: argparse.Namespace) -> bytes | None:
    """The key a ``--key-file`` names (``None``: the store opens with ``$TASKTRAIL_CHAIN_KEY``
    if set)."""
    path = getattr(args, "key_file", None)
    return read_key_file(path) if path is not None else None


def add_seal(commands: Any) -> None:
    seal = commands.add_parser(
        "seal",
        help="print one JSON line committing to the whole log, to keep elsewhere",
        description=(
            "Print a seal of the log up to its head (or --until a position): the root of a "
            "Merkle tree (RFC 6962 hashing) over every event in log order, its peaks, the "
            "count, the position, the time, the store's marker and latest snapshot and, for a "
            "keyed store given its key, a MAC. Keep the line outside the store (append it to "
            "a file, a ticket, a transparency log): verify STORE --seals FILE reports where "
            "the log stops agreeing with it. Reads the store only."
        ),
    )
    seal.add_argument("store", help=STORE_HELP)
    seal.add_argument("--until", type=int, metavar="N", help="seal up to this position")
    add_key_file(seal)


def do_seal(args: argparse.Namespace) -> int:
    from tasktrail.domain import open_store
    from tasktrail.domain.commands.sealing import take_seal

    until = until_argument(args.until).position  # checked before the store is opened
    with open_store(args.store, read_only=True, chain_key=key_argument(args)) as store:
        sealed = take_seal(store, until=until)
    emit(sealed.to_dict())
    return EXIT_OK
