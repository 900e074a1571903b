"""What every ``tasktrail`` command shares: the exit codes a script can rely on (0 ok,
1 violations or differences found, 2 bad input), the help texts of the arguments
several commands take, the check that a store given by path exists, and the one way
a command writes a JSON line to stdout.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import orjson

from tasktrail.domain import StoreError

EXIT_OK, EXIT_PROBLEMS, EXIT_BAD_INPUT = 0, 1, 2

SOURCE_HELP = "SQLite path, postgresql:// URL, or .jsonl export"
UNTIL_HELP = "stop after this position (an integer) or at this time (ISO-8601, e.g. ...Z)"
SKIP_HELP = "skip log lines that cannot be read, and report each one (never the default)"


def existing(location: str) -> str:
    if "://" not in location and not Path(location).exists():
        raise StoreError(f"no store at {location} (give an existing SQLite file or a URL)")
    return location


def emit(value: Any) -> None:
    sys.stdout.write(orjson.dumps(value, default=repr).decode() + "\n")
