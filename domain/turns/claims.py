"""Who may ask a runtime to clean up a role: a claim on the open obligation
(``cleanup.claimed``), so that of the processes sharing a store at most one live one
asks its runtime for a given obligation (task, role, number) at a time.

A claim is the fleet's rule for running tasks applied to cleanups: a reservation
records the worker on the task and that worker's lease (the store's lease table,
:mod:`..store.leases`) keeps the others off it; a claim records the worker on the
obligation (``RuntimeCleanupClaimed``) and the same lease keeps the others from asking
their runtime. A claim is an intent, recorded before ``Runtime.cleanup`` is asked;
what came of the call (settled, failed) is recorded after it, as before.

:func:`claim_cleanup` is decided on the log as it stands (the decision cycle folds
other writers' events first), and the claim is appended at the next version of the
task's cleanup stream, so two processes that decide on the same log cannot both
append one: the loser gets a :class:`~..errors.ConflictError` and :func:`claim`
decides again, to find the winner's claim. A claim whose worker's lease expired is
taken over (recovered once, as a lost worker's task is); one made under this worker's
name by an earlier process (a restart) is made again, so that it too goes through
the stream's version. A process holding its own claim appends nothing at its next
attempts: an attempt that leaves the obligation open still records nothing.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Literal

from ..errors import ConflictError
from ..tasks.context import Context
from ..tasks.guards import not_closing as _open
from ..world import Draft
from .cleanup import NO_OBLIGATION, open_obligation
from .events import RuntimeCleanupClaimed
from .host import PassHost
from .refusals import TurnRuleViolation
from .settings import TurnSettings

CLAIMED = "cleanup.claimed"
"""The rule that refuses a claim another live worker holds."""
CLAIM_ATTEMPTS = 5
"""How often a claim that lost the append race is decided again (each sees more)."""

Claim = Literal["ours", "held", "gone"]
"""``ours``: this process may ask its runtime; ``held``: another live worker holds the
claim; ``gone``: the obligation is settled or replaced (nothing to ask)."""


class LiveWorkers:
    """Whether a worker's lease is current, read from the lease table. A worker found
    alive is kept for the questions after (a pass, or one round of cleanups, reads the
    table once, and only if some obligation is claimed by another worker): stale only
    in the safe direction, one that died since waits for the next read. A worker not
    found is looked for again in the table as it stands now: one that started since the
    last read (and claimed since) is alive, and taking its claim would have two
    runtimes asked. The read again costs one per claim taken over, each once."""

    def __init__(self, read: Callable[[], frozenset[str]]) -> None:
        self._read = read
        self._alive: frozenset[str] | None = None
        self._lock = threading.Lock()  # a pass's per-task passes ask from threads

    def __call__(self, worker: str) -> bool:
        with self._lock:
            if self._alive is not None and worker in self._alive:
                return True
            # First question, or a worker the last read did not find: read the table now.
            self._alive = self._read()
            return worker in self._alive


def claim_cleanup(
    draft: Draft,
    ctx: Context,
    settings: TurnSettings,
    task_id: str,
    role: str,
    number: int,
    *,
    held: bool,
    alive: Callable[[str], bool],
    pass_id: str | None = None,
) -> bool:
    """Claim obligation ``number`` of the role for this worker (``ctx.worker``) before
    its runtime is asked; returns whether a claim was recorded now (``False``: this
    process, ``held``, claimed it already). Refused, appending nothing:
    ``cleanup.claimed`` while another worker whose lease is current (``alive``) holds
    it, ``cleanup.no_obligation`` once that obligation is no longer open."""
    _open(ctx, task_id)
    obligation = open_obligation(draft, task_id, role, number)
    worker = ctx.worker or ""
    holder = obligation.claimed_by
    if holder == worker and held:
        return False
    # cleanup.claimed: nothing a live worker holds is taken by another; a lost worker's
    # claim is taken over (a claim under this name that this process did not make is
    # an earlier process's: made again, through the stream's version).
    if holder is not None and holder != worker and alive(holder):
        raise TurnRuleViolation(
            CLAIMED,
            f"worker {holder} holds the runtime cleanup of role {role!r} (obligation {number})",
            task_id=task_id,
        )
    draft.emit_stream(
        RuntimeCleanupClaimed(
            task_id=task_id,
            at=ctx.now,
            role=role,
            worker=worker,
            taken_from=holder,
            pass_id=pass_id,
        )
    )
    return True


def claim(
    host: PassHost,
    settings: TurnSettings,
    task_id: str,
    role: str,
    number: int,
    alive: Callable[[str], bool],
    pass_id: str | None = None,
) -> Claim:
    """Claim the obligation for this process (:func:`claim_cleanup`), deciding again
    after an append race lost to another writer; remembers the claims it holds in the
    host's :class:`~.attempts.CleanupAttempts`."""
    attempts = host.cleanup_attempts
    for attempt in range(CLAIM_ATTEMPTS):
        try:
            host._decide(
                claim_cleanup,
                settings,
                task_id,
                role,
                number,
                held=attempts.holds(task_id, role, number),
                alive=alive,
                pass_id=pass_id,
            )
        except ConflictError:
            # Another writer appended to the task's cleanup stream since this world
            # folded it (a claim, a settle): decided again on the log as it now stands.
            if attempt == CLAIM_ATTEMPTS - 1:
                raise
            continue
        except TurnRuleViolation as refused:
            if refused.rule not in (CLAIMED, NO_OBLIGATION):
                raise
            attempts.release(task_id, role)
            return "held" if refused.rule == CLAIMED else "gone"
        attempts.hold(task_id, role, number)
        return "ours"
    raise AssertionError("unreachable")
