"""The gate before minting a run (the dispatcher's `runTaskNow` / `dispatchDueTasks` /
`reconcileDispatch`): durable jobs off, admissions closed, a maintenance drain.

The host answers the three questions through a :class:`DispatchGate` (the default,
:class:`OpenGate`, is always open); :func:`gate_refusal` is the rule that turns the
answers into a refusal code, checked before anything is minted, so a refused run
uses no attempt of the day and no place under the daily cap. A drain's code depends
on who asked (:data:`GateCaller`). Nothing here reads the wall clock or storage.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal, Protocol

from .executor import DrainError

GateCode = Literal["durable_jobs_off", "admissions_closed", "maintenance_drain_active"]

GateCaller = Literal["command", "tick", "reconcile"]
"""Who asks the gate: a command minting one run (``mint_run``, the dispatcher's
``runTaskNow``), the scheduled tick (``dispatchDueTasks``) or reconcile
(``reconcileDispatch``)."""


class DispatchGate(Protocol):
    """What the host says about dispatching at all, asked before every mint and tick."""

    def durable_jobs_enabled(self) -> bool:
        """Whether durable jobs are on (off: ``durable_jobs_off``)."""
        ...

    def admissions_open(self) -> bool:
        """Whether the executor admits jobs (closed: ``admissions_closed``)."""
        ...

    def acquire_dispatch_lease(self) -> Callable[[], None]:
        """Hold maintenance off while a dispatch or a reconcile runs; returns the
        release. Raise :class:`~.executor.DrainError` while a maintenance drain is
        active (a command is refused ``admissions_closed``, the tick and reconcile
        answer ``maintenance_drain_active``)."""
        ...


def gate_refusal(
    durable_jobs_enabled: bool, admissions_open: bool, drain_active: bool, *, caller: GateCaller
) -> GateCode | None:
    """Why the gate refuses to mint, in the dispatcher's order, or ``None``.

    A drain refuses a command ``admissions_closed`` and the tick and reconcile
    ``maintenance_drain_active``."""
    # runs.gate: durable jobs off, then admissions closed, then a maintenance drain;
    # refused before minting, so nothing is recorded and no attempt is used.
    if not durable_jobs_enabled:
        return "durable_jobs_off"
    if not admissions_open:
        return "admissions_closed"
    if drain_active:
        # runs.drain_code (dispatcher): runTaskNow's lease throws a drain to its caller
        # as admissions_closed; only dispatchDueTasks and reconcileDispatch answer
        # maintenance_drain_active.
        return "admissions_closed" if caller == "command" else "maintenance_drain_active"
    return None


def _release() -> None:
    return None


class OpenGate:
    """The default gate: durable jobs on, admissions open, never draining."""

    def durable_jobs_enabled(self) -> bool:
        """Always on."""
        return True

    def admissions_open(self) -> bool:
        """Always open."""
        return True

    def acquire_dispatch_lease(self) -> Callable[[], None]:
        """Never draining; the release does nothing."""
        return _release


@dataclass
class SwitchedGate:
    """A gate a host (or a test) switches by hand: ``durable_jobs``, ``admissions``,
    ``draining``; ``leases`` counts the dispatch leases held now."""

    durable_jobs: bool = True
    admissions: bool = True
    draining: bool = False
    leases: int = 0

    def durable_jobs_enabled(self) -> bool:
        """``durable_jobs``."""
        return self.durable_jobs

    def admissions_open(self) -> bool:
        """``admissions``."""
        return self.admissions

    def acquire_dispatch_lease(self) -> Callable[[], None]:
        """A lease, or :class:`~.executor.DrainError` while ``draining``."""
        if self.draining:
            raise DrainError("a maintenance drain is active")
        self.leases += 1
        released = False

        def release() -> None:
            nonlocal released
            if not released:
                released = True
                self.leases -= 1

        return release
