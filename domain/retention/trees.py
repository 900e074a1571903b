"""Which task trees may leave the store: one read of its log, light, in order.

A *unit* is what moves together: a task tree (a root and every task it owns, down),
joined with every other tree an event of it names (a wait on, a fork of, a message to
a task of another tree: any text field of an event that holds a known task id) and
every tree whose events share a stream with it. A stream belongs to the unit of the
tasks its events carry (``task_id``), whatever its name: a task's own stream, its
key's ``key:K``, its runs', wakeups', streams' and asks', and any stream a later
release adds, so long as each of its events carries the task id. A stream with a
scheduler-wide event (``task_id`` empty: passes, settings, schedules, history acts)
belongs to no unit and never moves.

A unit may leave when every task in it has ended (no live task, so no live wait or
message either), before the time asked; when none of its runs is still open and none
was minted on the ledger's latest days (:data:`RECENT_RUN_DAYS`: the daily cap counts
them); and when it holds no task of a schedule's latest tick (a tick's task id is
what makes a second submission of it refused, rule 27).
"""

from __future__ import annotations

import dataclasses
from array import array
from bisect import bisect_left
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field

from ..runs.events import RunDone, RunEvent, RunFailed, RunOrphaned, RunSuperseded
from ..schedules.events import ScheduleRemoved, ScheduleTicked, tick_task_id
from ..store.gaps import Gap, rows_and_gaps
from ..store.recorded import Recorded
from ..store.store import Store
from ..store.transcoder import decode_event
from ..tasks.events import TaskEnded, TaskEvent, TaskSubmitted

RECENT_RUN_DAYS = 3
"""A unit with a run minted on one of the ledger's latest days stays (as many as a
compacted ledger keeps counters of, ``runs/ledger.py``)."""
_RUN_ENDS = (RunDone, RunFailed, RunOrphaned, RunSuperseded)
_TEXT_TYPES = (str, str | None, tuple[str, ...], tuple[str, ...] | None)


@dataclass
class Unit:
    """Trees that move together, and what decides whether they may."""

    roots: list[str] = field(default_factory=list)
    tasks: set[str] = field(default_factory=set)
    streams: set[str] = field(default_factory=set)
    live: int = 0
    ended_at: float = float("-inf")
    """When its last task ended (its roots' ends, since an owner ends after its tasks)."""
    events: int = 0
    kinds: set[str] = field(default_factory=set)
    """The kinds of its roots."""
    open_runs: int = 0
    run_days: set[str] = field(default_factory=set)


class TreeScan:
    """The units of a log, from its events in order (:meth:`add`)."""

    def __init__(self) -> None:
        self._parent: dict[str, str] = {}  # union-find over task ids and stream ids
        self._tasks: dict[str, tuple[str, bool]] = {}  # task -> (kind of its root, live)
        self._roots: set[str] = set()
        self._stream_task: dict[str, str] = {}  # a stream -> the first task its events carry
        self._links: set[tuple[str, str]] = set()  # a stream -> any other task they carry
        self._ended: dict[str, float] = {}
        self._stream_events: dict[str, int] = {}
        self._shared: set[str] = set()  # streams with a scheduler-wide event: never move
        self._runs: dict[str, tuple[str, str, bool]] = {}  # run stream -> task, day, open
        self._latest_tick: dict[str, float] = {}
        self._removed: set[str] = set()
        self.position = 0
        self.leaves = 0
        """Leaves of the full log's tree so far: rows read and events of gaps passed."""
        self._positions = array("q")  # every row read and still in the log, and its leaf
        self._leaf = array("q")
        self._gone = array("q")  # (first, last) of each span of rows acts took, flattened
        self._gone_rows = 0

    def _find(self, node: str) -> str:
        parent = self._parent
        root = parent.setdefault(node, node)
        # A node a forgotten unit held is no one's parent any more (``.get``): a stream
        # that became shared after it was joined may still point at one.
        while root != (up := parent.get(root, root)):
            root = up
        while node != root:
            parent[node], node = root, parent[node]
        return root

    def _join(self, a: str, b: str) -> None:
        ra, rb = self._find(a), self._find(b)
        if ra != rb:
            self._parent[rb] = ra

    def read(self, store: Store, pause: Callable[[], None] | None = None) -> None:
        """Fold the log's rows after the last one read, counting each one's leaf in the
        full log's tree (the gaps of acts in their place); ``pause`` every 1,000 rows
        (a keeper's, to leave the interpreter to the worker's threads)."""
        for item in rows_and_gaps(store, after=self.position):
            if isinstance(item, Gap):
                self.leaves += item.size
                continue
            position, stream_id, version, topic, state = item
            event = decode_event(topic, stream_id, bytes(state), position)
            self._positions.append(position)
            self._leaf.append(self.leaves)
            self.leaves += 1
            self.add(Recorded(position, event, version))
            if pause is not None and not position % 1000:
                pause()

    def leaf_of(self, position: int) -> int:
        """The leaf of a row this scan read (by its position)."""
        at = bisect_left(self._positions, position)
        if at == len(self._positions) or self._positions[at] != position:
            raise KeyError(f"position {position} was not read by this scan")
        return self._leaf[at]

    def took(self, spans: Iterable[tuple[int, int]]) -> None:
        """Rows an act took out of the log (``(first, last)`` spans of positions, every
        one a row this scan read): their leaves are never asked again. Once they are half
        the rows held, the rows are held again without them, so a keeper's memory follows
        the rows the store keeps, not every row it ever read."""
        for first, last in spans:
            self._gone.extend((first, last))
            self._gone_rows += last - first + 1
        if self._gone_rows * 2 <= len(self._positions):
            return
        gone = sorted(zip(self._gone[::2], self._gone[1::2], strict=True))
        positions, leaves = array("q"), array("q")
        at = 0
        for position, leaf in zip(self._positions, self._leaf, strict=True):
            while at < len(gone) and gone[at][1] < position:
                at += 1
            if at == len(gone) or position < gone[at][0]:
                positions.append(position)
                leaves.append(leaf)
        self._positions, self._leaf = positions, leaves
        self._gone, self._gone_rows = array("q"), 0

    def add(self, recorded: Recorded) -> None:
        """Fold one event of the log."""
        event = recorded.event
        self.position = recorded.position
        stream_id = event.stream_id()
        task_id = event.task_id
        if isinstance(event, ScheduleTicked):
            self._latest_tick[event.name] = event.tick_at
        elif isinstance(event, ScheduleRemoved):
            self._removed.add(event.name)
        if not task_id:
            self._shared.add(stream_id)
            return
        self._stream_events[stream_id] = self._stream_events.get(stream_id, 0) + 1
        if isinstance(event, TaskSubmitted):
            owner = event.owner_id
            self._tasks[task_id] = (
                self._tasks[owner][0] if owner in self._tasks else event.kind,
                True,
            )
            if owner:
                self._join(owner, task_id)
            else:
                self._roots.add(task_id)
        elif isinstance(event, TaskEnded):
            kind = self._tasks.get(task_id, ("", False))[0]
            self._tasks[task_id] = (kind, False)
            self._ended[task_id] = event.at
        elif isinstance(event, RunEvent):
            open_ = not isinstance(event, _RUN_ENDS)
            self._runs[stream_id] = (task_id, event.day, open_)
        first = self._stream_task.setdefault(stream_id, task_id)
        if first != task_id:
            self._links.add((stream_id, task_id))
        for named in _named_tasks(event):
            if named != task_id and named in self._tasks:
                self._join(task_id, named)

    def units(self) -> dict[str, Unit]:
        """Every unit, by its union-find root."""
        for stream_id, task_id in [*self._stream_task.items(), *self._links]:
            if stream_id not in self._shared:  # a shared stream stays, and binds no one
                self._join(task_id, stream_id)
        units: dict[str, Unit] = {}
        for task_id, (kind, live) in self._tasks.items():
            unit = units.setdefault(self._find(task_id), Unit())
            unit.tasks.add(task_id)
            unit.live += live
            if task_id in self._roots:
                unit.roots.append(task_id)
                unit.kinds.add(kind)
            ended = self._ended.get(task_id)
            if ended is not None and ended > unit.ended_at:
                unit.ended_at = ended
        for stream_id, count in self._stream_events.items():
            if stream_id in self._shared:
                continue  # it also holds scheduler-wide events: it stays
            unit = units.setdefault(self._find(stream_id), Unit())
            unit.streams.add(stream_id)
            unit.events += count
        recent = set(sorted({day for _, day, _ in self._runs.values()})[-RECENT_RUN_DAYS:])
        for stream_id, (_, day, open_) in self._runs.items():
            unit = units.setdefault(self._find(stream_id), Unit())
            unit.open_runs += open_
            if day in recent:
                unit.run_days.add(day)
        for name, tick_at in self._latest_tick.items():
            if name not in self._removed:
                latest = tick_task_id(name, tick_at)
                if latest in self._tasks:
                    units[self._find(latest)].live += 1  # the schedule's latest tick stays
        return units

    def movable(
        self, before: float, kind: str | None = None, keep: Callable[[Unit], float] | None = None
    ) -> Iterator[Unit]:
        """The units that may leave, oldest end first: every task ended before
        ``before`` (less ``keep(unit)`` ms, a policy's), no open run and none of the
        latest days, no latest tick, and (with ``kind``) every root of that kind."""
        chosen = [
            unit
            for unit in self.units().values()
            if unit.roots
            and not unit.live
            and not unit.open_runs
            and not unit.run_days
            and unit.ended_at < before - (keep(unit) if keep is not None else 0)
            and (kind is None or unit.kinds == {kind})
        ]
        chosen.sort(key=lambda unit: (unit.ended_at, min(unit.roots)))
        return iter(chosen)

    def forget(self, units: Iterable[Unit]) -> None:
        """Units an act took: out of the scan (their events left the log), their ids
        out of the union-find too, so a keeper that runs for years holds what the store
        keeps, not every id it ever took."""
        for unit in units:
            for task_id in unit.tasks:
                self._tasks.pop(task_id, None)
                self._ended.pop(task_id, None)
                self._roots.discard(task_id)
                self._parent.pop(task_id, None)
            for stream_id in unit.streams:
                self._stream_events.pop(stream_id, None)
                self._stream_task.pop(stream_id, None)
                self._runs.pop(stream_id, None)
                self._parent.pop(stream_id, None)
            self._links = {link for link in self._links if link[0] not in unit.streams}

    def unit_of(self, task_id: str) -> Unit | None:
        """The unit holding task ``task_id`` (``None``: no such task in the log)."""
        if task_id not in self._tasks:
            return None
        return self.units().get(self._find(task_id))


_FIELDS: dict[type, tuple[str, ...]] = {}


def _named_tasks(event: TaskEvent) -> Iterator[str]:
    """The text values of an event's fields other than its own task id (a task it
    names, if one is a known task id)."""
    cls = type(event)
    names = _FIELDS.get(cls)
    if names is None:
        names = _FIELDS[cls] = tuple(
            f.name
            for f in dataclasses.fields(cls)
            if f.name not in ("task_id", "actor", "why") and _is_text(f.type)
        )
    for name in names:
        value = getattr(event, name)
        if isinstance(value, str):
            yield value
        elif isinstance(value, tuple):
            yield from (v for v in value if isinstance(v, str))


def _is_text(annotation: object) -> bool:
    text = str(annotation).replace(" ", "")
    return text in ("str", "str|None", "tuple[str,...]", "tuple[str,...]|None") or (
        annotation in _TEXT_TYPES
    )


__all__ = ["RECENT_RUN_DAYS", "TreeScan", "Unit"]
