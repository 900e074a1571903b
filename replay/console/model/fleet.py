"""What the fleet's pages show: the workers (live or not, the tasks each holds, its
lease), the run ledger (paged, newest first, by day, live or task) and the schedules.
Each reads the follower's fold; the workers also read the store's lease table and the
workers' liveness locks, as ``tasktrail workers`` does (nothing is written)."""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

from tasktrail.domain import InvalidArgument, RunState, ledger_of
from tasktrail.domain.schedules.events import schedule_stream_id
from tasktrail.domain.schedules.state import live_schedules

from ...cli.workers_command import worker_rows
from .follow import Follower
from .listing import MAX_PER_PAGE, PER_PAGE

WORKERS_FRESH_S = 1.0
"""How long a look at the workers serves every page that asks: each look reads the lease
table and every live worker's liveness lock (a PostgreSQL session of its own)."""


def workers(follower: Follower) -> list[dict[str, Any]]:
    """Each worker, as ``tasktrail workers --json`` prints it (looked at again once the
    log moved, or :data:`WORKERS_FRESH_S` after the last look)."""
    with follower.lock:
        looked = follower.workers_seen
        now = time.monotonic()
        fresh = looked is not None and now - looked[0] < WORKERS_FRESH_S
        if looked is not None and fresh and looked[1] == follower.position:
            return looked[2]
        world = follower.world
        running = [world.tasks[t] for t in world.live if world.tasks[t].status == "running"]
        rows = worker_rows(follower.store, running)
        follower.workers_seen = (now, follower.position, rows)
        return rows


@dataclass(frozen=True)
class RunQuery:
    """The run ledger's filters and page."""

    day: str = ""
    task: str = ""
    live: bool = False
    page: int = 1
    per_page: int = PER_PAGE

    @classmethod
    def parse(cls, params: Mapping[str, str]) -> RunQuery:
        day = params.get("day", "").strip()
        if day and (len(day) != 10 or day[4] != "-" or day[7] != "-"):
            raise InvalidArgument(f"day {day!r}: give YYYY-MM-DD")
        live = params.get("live", "").strip().lower() in ("1", "true", "on", "yes")
        page = _whole(params.get("page", ""), "page", 1, 10**9)
        per_page = _whole(params.get("per_page", ""), "per_page", PER_PAGE, MAX_PER_PAGE)
        return cls(day, params.get("task", "").strip()[:500], live, page, per_page)

    def link(self, page: int) -> str:
        params: dict[str, str] = {"page": str(page)}
        for name in ("day", "task"):
            if getattr(self, name):
                params[name] = getattr(self, name)
        if self.live:
            params["live"] = "1"
        return "/runs?" + urlencode(params)


def runs(follower: Follower, query: RunQuery) -> tuple[list[RunState], int]:
    """The page of runs ``query`` asks for, newest minted first, and how many match."""
    skip = (query.page - 1) * query.per_page
    shown: list[RunState] = []
    total = 0
    with follower.lock:
        for run in reversed(list(ledger_of(follower.world).runs.values())):
            if query.live and not run.live:
                continue
            if query.day and run.day != query.day:
                continue
            if query.task and run.task_id != query.task:
                continue
            total += 1
            if skip < total <= skip + query.per_page:
                shown.append(run)
    return shown, total


def schedules(follower: Follower) -> list[dict[str, Any]]:
    """The live schedules by name, as ``tasktrail schedules --json`` prints them."""
    with follower.lock:
        world = follower.world
        found = [world.stream(schedule_stream_id(name)) for name in sorted(live_schedules(world))]
    return [s.to_dict() for s in found if s is not None]


def _whole(raw: str, name: str, default: int, most: int) -> int:
    if not raw.strip():
        return default
    try:
        value = int(raw)
    except ValueError:
        raise InvalidArgument(f"{name} {raw!r}: a whole number") from None
    if not 1 <= value <= most:
        raise InvalidArgument(f"{name} {value}: from 1 to {most}")
    return value
