"""Datasette metadata for a store and its read models, shipped with the package.

``datasette-metadata.json`` (beside this module) describes the tables and holds the
canned queries an auditor asks first: ``task_trail`` (one task's events, oldest
first), ``running_at`` (what was running at a time T) and ``runs_of_day`` (the run
ledger of one day) on the read models, and ``stream_events`` on the store's
``event_log`` view. Datasette names a database after its file, and the shipped file
names the demo's files, ``tasktrail-demo.db`` and ``tasktrail-demo-views.db``;
:func:`datasette_metadata` gives the same metadata for files of other names.
"""

from __future__ import annotations

import copy
import json
import os
from pathlib import Path
from typing import Any

METADATA_FILE = Path(__file__).with_name("datasette-metadata.json")
"""The shipped metadata (``datasette STORE VIEWS --metadata METADATA_FILE``)."""
SHIPPED_VIEWS = "tasktrail-demo-views"
SHIPPED_STORE = "tasktrail-demo"


def datasette_metadata(
    views: str | os.PathLike[str], store: str | os.PathLike[str] | None = None
) -> dict[str, Any]:
    """The shipped metadata with its databases named after ``views`` (a read-model file)
    and ``store`` (a SQLite store), as Datasette names them: by the file's stem."""
    shipped: dict[str, Any] = json.loads(METADATA_FILE.read_text(encoding="utf-8"))
    metadata = copy.deepcopy(shipped)
    databases = metadata["databases"]
    renamed = {Path(views).stem: databases[SHIPPED_VIEWS]}
    if store is not None:
        renamed[Path(store).stem] = databases[SHIPPED_STORE]
    metadata["databases"] = renamed
    return metadata
