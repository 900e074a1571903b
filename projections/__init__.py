"""tasktrail's read models: the live mirror, pending wakeups, ledgers and audit trail.

Each is a fold of the event log into SQLite tables (sqlite-utils), kept current
by a :class:`Projector` whose tracked positions commit with the rows they
cover, and rebuildable from position 0 with identical tables.
"""

from .audit import AuditTrail, command_of
from .base import Changes, Projection, TableSpec
from .datasette import METADATA_FILE, datasette_metadata
from .ledger import Ledgers
from .live import LiveMirror
from .projector import CatchUp, Projector, default_out, default_projections
from .queries import ReadModel, task_from_row
from .wakeups import PendingWakeups

__all__ = [
    "METADATA_FILE",
    "AuditTrail",
    "CatchUp",
    "Changes",
    "Ledgers",
    "LiveMirror",
    "PendingWakeups",
    "Projection",
    "Projector",
    "ReadModel",
    "TableSpec",
    "command_of",
    "datasette_metadata",
    "default_out",
    "default_projections",
    "task_from_row",
]
