"""What a host hands ``tasktrail worker`` (:class:`WorkerSetup`): its registry and, where
it has them, the Turn runtime, the run executor and the settings a worker uses. A
service module names one as ``MODULE:ATTR``; docs/hosting.md builds one end to end.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..runs.executor import Executor
from ..runs.settings import RunSettings
from ..tasks.definitions import Registry
from ..turns.runtime import Runtime


@dataclass
class WorkerSetup:
    """What ``tasktrail worker`` runs: a registry and, where the host has them, the
    runtime that controller passes drive and the executor that dispatch uses."""

    registry: Registry
    runtime: Runtime | None = None
    executor: Executor | None = None
    run_settings: RunSettings | None = None
    restart_limit: int | None = None
    """A restart limit to record at open; ``None``: the one the store recorded."""
