"""Archives a store and SIGKILLs itself at one step of the archive (the kill tests of
issue 45): ``python archive_crash.py STORE FOLDER BEFORE STEP``."""

from __future__ import annotations

import os
import signal
import sys

from tasktrail.domain import open_store
from tasktrail.domain.retention.archiving import archive


def main() -> None:
    store_url, folder, before, step = sys.argv[1:5]

    def crash(at: str) -> None:
        if at == step:
            os.kill(os.getpid(), signal.SIGKILL)

    with open_store(store_url) as store:
        archive(store, before=float(before), to=folder, batch=1_000_000, crash=crash)


if __name__ == "__main__":
    main()
