"""The scheduler's history commands (the Retention issue): ``archive``, ``erase``,
``configure_retention`` and ``configure_seals``, a command group the ``Scheduler`` is
made of (``app/assembly.py``)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from .archiving import DEFAULT_BATCH, ArchiveReport, archive
from .erasure import Erased, erase

if TYPE_CHECKING:
    from ..clock import Clock
    from ..store.store import Store


class RetentionCommands:
    """Archive, erase, and the policies workers keep."""

    if TYPE_CHECKING:
        store: Store
        clock: Clock

        def refresh(self) -> int: ...

    def archive(
        self,
        *,
        before: float,
        to: str | Path | None,
        kind: str | None = None,
        dry_run: bool = False,
        batch: int = DEFAULT_BATCH,
        actor: str | None = None,
        reason: str | None = None,
    ) -> ArchiveReport:
        """Move every task tree whose tasks all ended before ``before`` (ms on the
        scheduler clock; no live task, open run or schedule's latest tick in it) to
        segment files in ``to`` (``None``: delete them, proofs kept: a prune), ``batch``
        events an act; ``dry_run``: say what would move and how many bytes."""
        report = archive(
            self.store,
            before=before,
            to=to,
            kind=kind,
            dry_run=dry_run,
            batch=batch,
            at=self.clock(),
            actor=actor,
            why=reason,
        )
        if not dry_run:
            self.refresh()
        return report

    def erase(
        self,
        task_id: str,
        *,
        actor: str | None = None,
        reason: str | None = None,
        archive: str | Path | None = None,
    ) -> Erased:
        """Erase the values of the finished tree of ``task_id`` (memos, results,
        messages, error details: every field of any JSON value) from the store's events,
        keeping what the proofs need; a live tree is refused (rule 37, nothing appended).
        Read models drop the values at their next catch-up. ``archive``: the archive
        folder, for a tree archived there (its segments are written again, erased)."""
        erased = erase(
            self.store, task_id, actor=actor, why=reason, at=self.clock(), archive=archive
        )
        self.refresh()
        return erased


__all__ = ["RetentionCommands"]
