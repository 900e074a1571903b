"""What one task's page shows, gathered: its tree read stream by stream, as the report
reads it (:func:`tasktrail.replay.report.tree.read_tree`), folded by the replay's one
fold with the report's timeline as one more projection, and the explain trail (the rule,
the actor and the reason behind each event).

The report finds a tree by scanning the store's submissions for owners; the console's
follower knows who owns whom already, so the streams it hands ``read_tree`` answer
``owned()`` and ``runs()`` from memory and read only the tree's own streams by their
keys: the page's cost follows the tree, not the store. A tree of more than
:data:`TREE_LIMIT` tasks is drawn to its first :data:`TREE_LIMIT` (owners first), and
the page says how many more there are.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from tasktrail.domain import TaskState, UnknownTask
from tasktrail.domain.frozen import thawed
from tasktrail.domain.store.recorded import Recorded
from tasktrail.domain.tasks.definitions import parked_now
from tasktrail.domain.tasks.events import event_payload
from tasktrail.domain.tasks.messages import MessageSent
from tasktrail.domain.tasks.restart_limit import restart_limit_of
from tasktrail.projections import default_projections

from ...explain import Step, explain
from ...report.streams import StoreStreams
from ...report.timeline import Timeline, TimelineBuilder
from ...report.tree import read_tree
from ...state import fold
from .follow import Follower

TREE_LIMIT = 200
"""Tasks of a tree one page draws (the task, its owners, then what it owns)."""


@dataclass
class TaskView:
    """One task's page, before any of it is HTML or JSON."""

    task: TaskState
    owners: list[str]
    """Its owner, its owner's owner, ... (nearest first)."""
    children: list[TaskState]
    """The tasks it owns, in submission order."""
    timeline: Timeline
    steps: list[Step]
    """Its explain trail: each event with the rule, actor and reason behind it."""
    events: list[Recorded]
    """Its own stream's events, with their positions (the history's details)."""
    tree: list[str]
    """The tasks drawn (for the page to know which news concerns it)."""
    tree_total: int
    """Tasks of its tree below it and itself, drawn or not."""
    blocked: str | None
    actors: list[str]
    position: int
    """The store position the page was read at."""

    def messages(self) -> list[dict[str, Any]]:
        """The messages sent to the task, oldest first: topic, value, who and why, and
        whether it read them yet."""
        unread = {message.seq for message in self.task.mailbox}
        found = []
        for recorded in self.events:
            event = recorded.event
            if not isinstance(event, MessageSent):
                continue
            found.append(
                {
                    "position": recorded.position,
                    "seq": event.seq,
                    "topic": event.message_topic,
                    "value": thawed(event.value),
                    "at": event.at,
                    "actor": event.actor,
                    "reason": event.why,
                    "read": event.seq not in unread,
                }
            )
        return found

    def history(self) -> list[dict[str, Any]]:
        """The explain trail with each event's recorded fields (``/api/tasks/{id}/history``)."""
        payloads = {r.position: r for r in self.events}
        out = []
        for step in self.steps:
            entry = step.to_dict()
            recorded = payloads.get(step.position)
            if recorded is not None:
                entry["version"] = recorded.originator_version
                entry["fields"] = _plain_payload(recorded)
            out.append(entry)
        return out

    def to_dict(self) -> dict[str, Any]:
        """The task as ``/api/tasks/{id}`` answers it."""
        return {
            **self.task.to_dict(),
            "submitted_at": self.task.submitted_at,
            "updated_at": self.task.updated_at,
            "worker": self.task.worker,
            "owners": self.owners,
            "children": [
                {"id": c.id, "kind": c.kind, "status": c.status, "outcome": _outcome(c)}
                for c in self.children
            ],
            "blocked": self.blocked,
            "actors": self.actors,
            "messages": self.messages(),
            "position": self.position,
        }


class _KnownTree:
    """A store's streams, with the tree's owners and runs given from the follower's
    memory instead of scanned for (``read_tree`` asks ``owned()`` and ``runs()``)."""

    def __init__(
        self, streams: StoreStreams, owned: list[tuple[str, str]], runs: dict[str, list[str]]
    ) -> None:
        self._streams = streams
        self._owned = owned
        self._runs = runs

    def owned(self) -> list[tuple[str, str]]:
        return self._owned

    def tasks(self) -> list[tuple[str, str | None]]:  # pragma: no cover - not read for a tree
        return list(self._owned)

    def runs(self, task_ids: Iterable[str]) -> dict[str, list[str]]:
        return {t: self._runs[t] for t in task_ids if t in self._runs}

    def read(self, stream_ids: Iterable[str]) -> list[Recorded]:
        return self._streams.read(stream_ids)

    def head(self) -> int:
        return self._streams.head()

    def positions(self, topics: Iterable[str]) -> list[int]:  # pragma: no cover
        return self._streams.positions(topics)


def task_view(follower: Follower, task_id: str) -> TaskView:
    """Gather ``task_id``'s page (:class:`UnknownTask` if the follower has not folded it)."""
    with follower.lock:
        task = follower.world.tasks.get(task_id)
        if task is None:
            raise UnknownTask(task_id)
        extras = follower.extras
        owners = follower.owners(task_id)
        subtree, total = follower.below(task_id, TREE_LIMIT)
        tree = [*reversed(owners), *subtree]
        owned = [(t, extras.owner[t]) for t in tree if t in extras.owner]
        runs = {t: list(extras.runs[t]) for t in tree if t in extras.runs}
        children = [follower.world.tasks[c] for c in extras.children.get(task_id, [])[:TREE_LIMIT]]
        actors = sorted(extras.actors.get(task_id, ()))
        position = follower.position
        limit = restart_limit_of(follower.world)
        read = read_tree(_KnownTree(StoreStreams(follower.store), owned, runs), task_id)
    builder = TimelineBuilder(lambda _: True, None)
    state = fold(read.records, projections=[*default_projections(), builder], strict=False)
    # What the tree's own streams say of the task (they may be ahead of the follower).
    task = state.world.tasks.get(task_id, task)
    timeline = builder.finish(None, frozenset(read.context))
    steps = explain(state, task_id)
    events = [r for r in read.records if getattr(r.event, "task_id", None) == task_id]
    events = [r for r in events if type(r.event).task_stream]
    return TaskView(
        task=task,
        owners=owners,
        children=children,
        timeline=timeline,
        steps=steps,
        events=events,
        tree=[*read.tree, *read.context],
        tree_total=total,
        blocked="restart_limit" if parked_now(task, limit) else None,
        actors=actors,
        position=position,
    )


def _outcome(task: TaskState) -> str | None:
    return task.outcome.status if task.outcome is not None else None


def _plain_payload(recorded: Recorded) -> dict[str, Any]:
    payload = event_payload(recorded.event)
    return {k: thawed(v) for k, v in payload.items() if k not in ("task_id",)}
