"""What a report shows, gathered: one fold of what the report needs, and nothing more.

With a task, :func:`gather` reads that task's tree (its owners up to the root, and
everything it owns, at any depth) stream by stream (:mod:`.streams`), plus the task
streams of tasks the tree awaited and the pass streams its events name. Without one,
it folds the whole log and draws every task, or, given a ``limit``, one page of that
many tasks in tree order (``page`` 1 first). Either way the
events go through the replay's one fold (:func:`tasktrail.replay.fold`), with the
timeline as one more projection, and the state that fold leaves gives the owner tree,
the explain trail (:func:`tasktrail.replay.explain`) and the verify result
(:func:`tasktrail.replay.verify`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from tasktrail.domain import (
    InvalidArgument,
    Registry,
    Store,
    TaskState,
    UnknownTask,
    open_store,
)
from tasktrail.domain.store.location import parse_location
from tasktrail.domain.tasks.definitions import blocked_reason, parked_now
from tasktrail.domain.tasks.restart_limit import DEFAULT_RESTART_LIMIT, restart_limit_of
from tasktrail.projections import default_projections

from ..explain import Step, explain
from ..log import is_jsonl, read_log
from ..state import SchedulerState, Until, fold
from ..verify import VerifyReport, verify
from .streams import Index, LogStreams, StoreStreams, Streams
from .timeline import Timeline, TimelineBuilder
from .tree import AcrossStreams
from .tree import below as _below
from .tree import read_tree as _read_tree

DEFAULT_LIMIT = 2_000
"""Tasks one page of a whole store's report draws unless told otherwise: a store with
more is drawn a page at a time (each page some 5 MB of HTML), ``page`` 1 first."""


@dataclass(frozen=True)
class Page:
    """One page of a whole store's tasks, in tree order: ``number`` of ``pages``, each
    ``limit`` tasks; ``first`` and ``last`` count from 1 over all ``total`` tasks."""

    number: int
    pages: int
    limit: int
    total: int

    @property
    def first(self) -> int:
        return min((self.number - 1) * self.limit + 1, self.total)

    @property
    def last(self) -> int:
        return min(self.number * self.limit, self.total)

    def __str__(self) -> str:
        return (
            f"tasks {self.first}-{self.last} of {self.total} drawn "
            f"(page {self.number} of {self.pages} at --limit {self.limit})"
        )


@dataclass
class ReportData:
    """Everything one report shows, before any of it is written as HTML."""

    source: str
    task_id: str | None
    until: Until
    head: int
    """The store's last position when the report was taken."""
    state: SchedulerState
    timeline: Timeline
    verify: VerifyReport
    steps: list[Step] | None
    """The explain trail of ``task_id`` (``None`` for a whole-store report)."""
    blocked: dict[str, str]
    """Each blocked live task's reason (rule 13), as far as the report can compute it."""
    scope: str
    """What was read, in words."""
    restart_limit: int
    """What "parked" was measured against: the limit given, else the one the log
    recorded by the report's position (else 3)."""
    registry_used: bool = False
    """Whether blocked reasons were judged with the definitions (else only the restart
    limit is)."""
    tree: frozenset[str] = field(default_factory=frozenset)
    """The tasks of the tree asked (empty for a whole-store report)."""
    generated_at: datetime | None = None
    page: Page | None = None
    """Which page of a whole-store report's tasks is drawn (``None``: every task)."""

    @property
    def taken_at(self) -> float | None:
        """The scheduler-clock time the report shows the state at: ``--until``'s, else
        the time of the last event folded."""
        return self.until.at if self.until.at is not None else self.timeline.clock

    @property
    def tasks(self) -> dict[str, TaskState]:
        return self.state.world.tasks


def gather(
    source: str | os.PathLike[str] | Store,
    task_id: str | None = None,
    *,
    until: int | float | str | datetime | Until | None = None,
    limit: int | None = DEFAULT_LIMIT,
    restart_limit: int | None = None,
    registry: Registry | None = None,
    page: int = 1,
) -> ReportData:
    """Read and fold what a report of ``task_id`` (or of the whole log) needs.
    ``restart_limit`` (``None``: the one the log recorded at each position, as the
    scheduler decided with it) is what "parked" is measured against. Without a task,
    every task is drawn, or, past ``limit`` tasks (``None``: no limit), page ``page`` of
    ``limit`` tasks in tree order."""
    stop = Until.parse(until)
    if limit is not None and limit < 1:
        raise InvalidArgument(f"limit must be at least 1, not {limit}")
    if page < 1:
        raise InvalidArgument(f"page must be at least 1, not {page}")
    if restart_limit is not None and (
        isinstance(restart_limit, bool) or not isinstance(restart_limit, int) or restart_limit < 1
    ):
        raise InvalidArgument(f"restart_limit must be an integer >= 1, not {restart_limit!r}")
    name = _name(source)
    opened: Store | None = None
    try:
        streams: Streams
        if isinstance(source, Store):
            streams = StoreStreams(source) if source.archive is None else AcrossStreams(source)
        elif is_jsonl(source):
            streams = LogStreams(source)
        else:
            opened = open_store(source, read_only=True)  # refuses what is not a store
            streams = StoreStreams(opened) if opened.archive is None else AcrossStreams(opened)
        paged: Page | None = None
        if task_id is None:
            order = _tree_order(Index.of(streams.tasks()))
            per_page = limit if limit is not None else max(len(order), 1)
            paged = Page(page, max(1, -(-len(order) // per_page)), per_page, len(order))
            if page > paged.pages:
                raise InvalidArgument(
                    f"page {page} is past the last page: {len(order)} tasks make "
                    f"{paged.pages} page{'s' if paged.pages > 1 else ''} of {per_page}"
                )
            drawn = frozenset(order[(page - 1) * per_page : page * per_page])
            if paged.pages == 1:
                paged = None  # every task drawn
            records, reader, _ = read_log(opened if opened is not None else source)
            builder = TimelineBuilder(drawn.__contains__, restart_limit)
            projections = [p for p in default_projections() if p.name != "audit"]
            state = fold(records, until=stop, projections=[*projections, builder], strict=False)
            if reader is not None:
                state.skipped = list(reader.skipped)
            timeline = builder.finish(stop.at)
            scope = f"the whole log: {state.events} events, "
            scope += (
                str(paged)
                if paged is not None
                else f"all {len(timeline.rows)} task{'s' if len(timeline.rows) != 1 else ''} drawn"
            )
            report = verify(state)
            tree: frozenset[str] = frozenset()
            steps = None
        else:
            read = _read_tree(streams, task_id)
            builder = TimelineBuilder(lambda _: True, restart_limit)
            state = fold(
                read.records,
                until=stop,
                projections=[*default_projections(), builder],
                strict=False,
            )
            if task_id not in state.world.tasks:
                raise UnknownTask(task_id)
            timeline = builder.finish(stop.at, frozenset(read.context))
            tree = frozenset(t for t in read.tree if t in state.world.tasks)
            scope = (
                f"the tree of {task_id}: {len(tree)} task{'s' if len(tree) != 1 else ''}"
                + (f" and {len(read.context)} awaited" if read.context else "")
                + f", {read.streams} streams, {state.events} events"
            )
            report = _scoped(verify(state), frozenset(read.subtree))
            steps = explain(state, task_id)
        head = streams.head()
    finally:
        if opened is not None:
            opened.close()
    limit = restart_limit if restart_limit is not None else restart_limit_of(state.held)
    blocked = {
        tid: reason
        for tid, task in state.world.tasks.items()
        if (reason := _blocked(task, registry, limit)) is not None
    }
    return ReportData(
        source=name,
        task_id=task_id,
        until=stop,
        head=head,
        state=state,
        timeline=timeline,
        verify=report,
        steps=steps,
        blocked=blocked,
        scope=scope,
        restart_limit=limit,
        registry_used=registry is not None,
        tree=tree,
        page=paged,
    )


def _scoped(report: VerifyReport, members: frozenset[str]) -> VerifyReport:
    """Keep the violations a tree's own streams can show: those of the task and what it
    owns (its owners' siblings, and the owners of tasks it awaited, were not read)."""
    kept = [v for v in report.violations if v.task_id is None or v.task_id in members]
    return VerifyReport(report.position, report.events, report.checks, kept)


def _tree_order(index: Index) -> list[str]:
    """Every task, owners before what they own, trees in the order their roots were
    submitted (a task whose owner is unknown counts as a root)."""
    roots = [t for t, owner in index.owner.items() if owner is None or owner not in index.owner]
    return [task for root in roots for task in _below(index, root)]


def _blocked(task: TaskState, registry: Registry | None, restart_limit: int) -> str | None:
    if registry is not None:
        return blocked_reason(task, registry, restart_limit)
    # Without the definitions only the restart limit can be judged (rule 13).
    return "restart_limit" if parked_now(task, restart_limit) else None


def _name(source: Any) -> str:
    """The source as it may be shown: a URL without its password."""
    if isinstance(source, Store):
        return str(source.location)
    text = os.fspath(source)
    return str(parse_location(text)) if "://" in text else text


__all__ = ["DEFAULT_LIMIT", "DEFAULT_RESTART_LIMIT", "Page", "ReportData", "gather"]
