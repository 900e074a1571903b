"""What one process keeps of dispatch runs outside the log: its executor, gate, slots and
submits in flight. Below the run commands and both of their halves (``run_submits``,
``run_ticks``), which read it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..runs.events import Trigger
from ..runs.executor import Executor
from ..runs.gate import DispatchGate, OpenGate
from ..runs.slots import DispatchSlots

RunPayload = Callable[[str, Trigger], Any]
"""``payload(task_id, trigger)``: the host's per-run data (JSON) for a run being minted."""


@dataclass
class RunRuntime:
    """Process-local dispatch state: executor, slots, submits in flight, cursor (the
    settings are in the log)."""

    executor: Executor | None = None
    gate: DispatchGate = field(default_factory=OpenGate)
    payload: RunPayload | None = None
    slots: DispatchSlots = field(default_factory=DispatchSlots)
    submit_live: set[str] = field(default_factory=set)
    reconcile_cursor: int = 0
