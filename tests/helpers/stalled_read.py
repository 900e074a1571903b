"""A read command the leftover tests kill mid-run.

    python tests/helpers/stalled_read.py ARGV...

Runs ``tasktrail ARGV`` in this process with the store's first read of its rows held
up: once the command has opened the store (and an export its temporary file), it
prints ``reading`` and waits, until the test kills it.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from typing import Any

from tasktrail.domain.store.store import Store
from tasktrail.replay.cli import main


def stalled(self: Store, after: int, until: int | None) -> Iterator[list[Any]]:
    print("reading", flush=True)
    sys.stdin.read()  # killed here
    yield from ()


Store._pages = stalled  # type: ignore[method-assign]

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
