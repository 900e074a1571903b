"""The scheduler's history commands (the Retention issue): ``archive``, ``erase``,
``configure_retention`` and ``configure_seals``, a command group the ``Scheduler`` is
made of (``app/assembly.py``)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from .archiving import DEFAULT_BATCH, ArchiveReport, archive
from .erasure import Erased, erase
from .policy import configure_retention, configure_seals

if TYPE_CHECKING:
    from ..clock import Clock
    from ..store.seals import Seal
    from ..store.store import Store
    from ..tasks.events import TaskEvent


T = TypeVar("T")


class RetentionCommands:
    """Archive, erase, and the policies workers keep."""

    if TYPE_CHECKING:
        store: Store
        clock: Clock

        def refresh(self) -> int: ...

        def _decide(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T: ...

    seal_sink: Callable[[Seal], None] | None = None
    """The host's callable a worker's keeper hands each periodic seal (``configure_seals``
    with a callable ``to``): this process's, not recorded."""

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

    def configure_retention(
        self,
        *,
        keep_days: float | None,
        per_kind: dict[str, float] | None = None,
        archive_to: str | Path | None = None,
        actor: str | None = None,
        reason: str | None = None,
    ) -> None:
        """Keep ``keep_days`` of finished history (a kind's own in ``per_kind``): every
        worker takes the trees ended before then, in small acts beside its work, to
        segments in ``archive_to`` or, with none, pruned with their proofs
        (``HistoryPruned``); ``keep_days=None``: keep everything. Recorded (rule 38
        refuses less than a minute), so every worker of the fleet keeps the same."""
        folder = None if archive_to is None else str(Path(archive_to).resolve())
        self._decide(configure_retention, keep_days, per_kind, folder, actor=actor, why=reason)

    def configure_seals(
        self,
        *,
        every_s: float | None = None,
        every_events: int | None = None,
        to: str | Path | Callable[[Seal], None] | None = None,
        actor: str | None = None,
        reason: str | None = None,
    ) -> None:
        """Seal the log every ``every_s`` seconds and/or ``every_events`` events: a worker
        appends the seal line to the file ``to`` (fsynced), or hands it to ``to`` if a
        callable (this process's: each worker's host gives its own). Recorded (rule 39
        refuses less than a second or an event), so the window only seals catch stays
        bounded on every worker."""
        path = None
        if callable(to):
            self.seal_sink = to
        elif to is not None:
            path = str(Path(to).resolve())
        self._decide(configure_seals, every_s, every_events, path, actor=actor, why=reason)


def history_across(store: Store, task_id: str, archive: str | Path) -> list[TaskEvent]:
    """One task's events, oldest first, read across ``archive`` (the store's archive
    folder) on a read-only store of its own: the scheduler's store and its world never
    hold a segment's rows. A segment that fails its check is an
    :class:`~.across.ArchiveWarning` naming it, its events left out."""
    from ..store.store import Store
    from .across import archive_folder, findings, reading_archive, warn_of

    folder = archive_folder(archive)
    reader = Store(store.location, read_only=True, chain_key=store.chain_key)
    try:
        with reading_archive(folder, reader) as views:
            events = reader.stream(task_id)
    finally:
        reader.close()
    warn_of(findings(views), stacklevel=3)  # at the caller of Scheduler.history
    return events


__all__ = ["RetentionCommands", "history_across"]
