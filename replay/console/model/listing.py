"""The task list: the filters of ``tasktrail tasks`` (kind, status, outcome, submission
time), a search over ids, kinds, actors and errors, and pages, over every task the
follower folded (ended ones too), newest first unless asked otherwise.

A query comes from a URL's parameters (:meth:`TaskQuery.parse`), the same for the page
(``/``) and the API (``/api/tasks``); a bad value is :class:`InvalidArgument`, shown
beside the form or answered 400. Every task is reachable: page ``P`` of ``per_page``.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from typing import Any

from tasktrail.domain import InvalidArgument, TaskState
from tasktrail.domain.tasks.definitions import parked_now
from tasktrail.domain.tasks.restart_limit import restart_limit_of

from ...cli.tasks_command import OUTCOMES, STATUSES, time_argument
from .follow import Follower

PER_PAGE = 50
MAX_PER_PAGE = 500
ORDERS = ("newest", "oldest")
LIVE = "live"
"""A status filter of its own: every task not terminal."""


@dataclass(frozen=True)
class TaskQuery:
    """What the list is asked for (every field optional)."""

    q: str = ""
    kind: str = ""
    status: str = ""
    outcome: str = ""
    since: str = ""
    until: str = ""
    order: str = "newest"
    page: int = 1
    per_page: int = PER_PAGE

    @classmethod
    def parse(cls, params: Mapping[str, str]) -> TaskQuery:
        """A query from URL parameters; unknown parameters are ignored, a bad value is
        :class:`InvalidArgument` naming it."""
        values: dict[str, Any] = {}
        for name in ("q", "kind", "status", "outcome", "since", "until", "order"):
            value = params.get(name, "").strip()
            if len(value) > 200:
                raise InvalidArgument(f"{name}: at most 200 characters")
            values[name] = value
        if values["status"] and values["status"] not in (*STATUSES, LIVE):
            raise InvalidArgument(
                f"status {values['status']!r}: one of {', '.join((*STATUSES, LIVE))}"
            )
        if values["outcome"] and values["outcome"] not in OUTCOMES:
            raise InvalidArgument(f"outcome {values['outcome']!r}: one of {', '.join(OUTCOMES)}")
        if values["order"] and values["order"] not in ORDERS:
            raise InvalidArgument(f"order {values['order']!r}: newest or oldest")
        values["order"] = values["order"] or "newest"
        values["page"] = _count(params.get("page", ""), "page", 1, 10**9)
        values["per_page"] = _count(params.get("per_page", ""), "per_page", PER_PAGE, MAX_PER_PAGE)
        query = cls(**values)
        since, until = query.bounds()
        if since is not None and until is not None and since > until:
            raise InvalidArgument("since is after until: no task could match")
        return query

    def bounds(self) -> tuple[float | None, float | None]:
        """``since`` and ``until`` as ms since the epoch (``None`` where not given)."""
        return _time(self.since, "since"), _time(self.until, "until")

    def params(self, **changes: Any) -> dict[str, str]:
        """The query's parameters that differ from the defaults (with ``changes``), for
        a link that keeps the filters."""
        changed = replace(self, **changes)
        default = TaskQuery()
        return {
            f.name: str(getattr(changed, f.name))
            for f in fields(self)
            if getattr(changed, f.name) != getattr(default, f.name)
        }

    def to_dict(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


@dataclass
class TaskPage:
    """One page of matching tasks, and where it stands in all of them."""

    query: TaskQuery
    tasks: list[TaskState]
    total: int
    """Tasks matching the filters, on every page."""
    position: int
    """The store position the list was read at."""
    restart_limit: int
    actors: dict[str, list[str]]
    """The actors named on each listed task's events."""

    @property
    def pages(self) -> int:
        return max(1, -(-self.total // self.query.per_page))

    @property
    def first(self) -> int:
        """The number (from 1) of the page's first task among all matching (0: none)."""
        return min((self.query.page - 1) * self.query.per_page + 1, self.total)

    @property
    def last(self) -> int:
        return min(self.query.page * self.query.per_page, self.total)

    def parked(self, task: TaskState) -> bool:
        return parked_now(task, self.restart_limit)

    def to_dict(self) -> dict[str, Any]:
        return {
            "position": self.position,
            "total": self.total,
            "page": self.query.page,
            "pages": self.pages,
            "per_page": self.query.per_page,
            "query": self.query.to_dict(),
            "tasks": [task_row(t, self.actors.get(t.id, []), self.parked(t)) for t in self.tasks],
        }


def list_tasks(follower: Follower, query: TaskQuery) -> TaskPage:
    """The page of tasks ``query`` asks for, read under the follower's lock."""
    since, until = query.bounds()
    terms = query.q.lower().split()
    skip = (query.page - 1) * query.per_page
    shown: list[TaskState] = []
    total = 0
    with follower.lock:
        filtered = query.kind or query.status or query.outcome or terms
        if not filtered and since is None and until is None:
            return _unfiltered(follower, query, skip)
        tasks = follower.world.tasks
        extras = follower.extras
        order = reversed(extras.order) if query.order == "newest" else iter(extras.order)
        for task_id in order:
            task = tasks.get(task_id)
            if task is None:
                continue
            if query.kind and task.kind != query.kind:
                continue
            status = task.status
            # "live" is every status but terminal
            wanted = query.status
            if wanted and status != wanted and (wanted != LIVE or status == "terminal"):
                continue
            if query.outcome and (task.outcome is None or task.outcome.status != query.outcome):
                continue
            if since is not None and task.submitted_at < since:
                continue
            if until is not None and task.submitted_at > until:
                continue
            if terms:
                words = extras.words.get(task_id)
                if words is None:
                    words = extras.words[task_id] = _words(task, extras.actors.get(task_id))
                if not all(term in words for term in terms):
                    continue
            total += 1
            if skip < total <= skip + query.per_page:
                shown.append(task)
        actors = {t.id: sorted(extras.actors.get(t.id, ())) for t in shown}
        return TaskPage(
            query, shown, total, follower.position, restart_limit_of(follower.world), actors
        )


def _unfiltered(follower: Follower, query: TaskQuery, skip: int) -> TaskPage:
    """Every task, one page of them: a slice of the submission order (the list's first
    page costs the same on a store of any size)."""
    order = follower.extras.order
    total = len(order)
    if query.order == "newest":
        ids = order[max(0, total - skip - query.per_page) : max(0, total - skip)][::-1]
    else:
        ids = order[skip : skip + query.per_page]
    tasks = follower.world.tasks
    shown = [tasks[t] for t in ids if t in tasks]
    actors = {t.id: sorted(follower.extras.actors.get(t.id, ())) for t in shown}
    limit = restart_limit_of(follower.world)
    return TaskPage(query, shown, total, follower.position, limit, actors)


def kinds(follower: Follower, limit: int = 500) -> list[str]:
    """The kinds submitted, for the kind filter to offer (any kind can still be typed)."""
    with follower.lock:
        return sorted(follower.extras.kinds)[:limit]


def task_row(task: TaskState, actors: list[str], parked: bool) -> dict[str, Any]:
    """One task as the list (and ``/api/tasks``) shows it."""
    outcome = task.outcome
    return {
        "id": task.id,
        "kind": task.kind,
        "status": task.status,
        "phase": task.checkpoint.phase if task.checkpoint is not None else None,
        "outcome": outcome.status if outcome is not None else None,
        "error": outcome.message if outcome is not None else None,
        "reason": outcome.reason if outcome is not None else None,
        "owner_id": task.owner_id,
        "submitted_at": task.submitted_at,
        "updated_at": task.updated_at,
        "priority": task.priority,
        "restarts": task.restarts,
        "abort_requested": task.abort_requested,
        "blocked": "restart_limit" if parked else None,
        "worker": task.worker,
        "actors": actors,
    }


def _words(task: TaskState, actors: set[str] | None) -> str:
    """What the search box matches a task by: id, kind, actors, error and reason."""
    said = [task.id, task.kind, *(actors or ())]
    if task.outcome is not None:
        said += [task.outcome.message or "", task.outcome.reason or ""]
    return " ".join(said).lower()


def _count(text: str, name: str, default: int, most: int) -> int:
    if not text.strip():
        return default
    try:
        value = int(text)
    except ValueError:
        raise InvalidArgument(f"{name} {text!r}: a whole number") from None
    if not 1 <= value <= most:
        raise InvalidArgument(f"{name} {value}: from 1 to {most}")
    return value


def _time(text: str, name: str) -> float | None:
    if not text:
        return None
    try:
        return time_argument(text)
    except argparse.ArgumentTypeError as error:
        raise InvalidArgument(f"{name}: {error}") from None
