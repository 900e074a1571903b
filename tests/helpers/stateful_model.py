"""The model the stateful test (``test_stateful.py``) holds the scheduler to.

It is written from SPEC.md section 1 alone, without the domain's ``evolve`` or
``decide``: it follows the commands the scheduler accepted and predicts each task's
status, abort mark, outcome and restart count.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tasktrail.domain.schedules.cron import CATCH_UP_LIMIT

RESTART_LIMIT = 2
MINUTE = 60_000


@dataclass
class ModelTask:
    status: str = "pending"
    owner: str | None = None
    marked: bool = False
    outcome: str | None = None
    restarts: int = 0
    phase: str = "a"
    mailbox: list[tuple[int, str]] = field(default_factory=list)  # unread: (seq, topic)
    sent: int = 0
    reads: list[int] = field(default_factory=list)  # read by its invocation, not marked yet
    topic: str | None = None  # waiting for a message on it (rule 21)
    until: float | None = None
    priority: int = 0
    attempts: int = 0
    """The checkpoint's attempt: the failed tries of its phase so far (rule 23)."""
    asks: dict[str, tuple[str, float | None, bool, float]] = field(default_factory=dict)
    """Its latest ask on each topic: status, deadline, assigned (to ana), asked at."""
    asking: str | None = None  # the topic of the ask it waits for (rules 30-32)
    streams: dict[str, list[Any]] = field(default_factory=dict)
    """Each output stream's chunks recorded, in offset order (rule 29)."""
    closed: set[str] = field(default_factory=set)
    """The streams its phases closed (a decided outcome closes the rest: rule 29)."""
    kind: str = "a"
    tenant: str | None = None
    """A kind ``c`` task's limit key: one runs a phase at a time per tenant (rule 33)."""
    mode: str | None = None
    started: bool = False
    window_until: float | None = None
    """A debounced submission's window end (rule 35), while it never ran."""


class Model:
    """Task statuses as SPEC.md section 1 describes them, command by command."""

    def __init__(self) -> None:
        self.tasks: dict[str, ModelTask] = {}
        self.keys: dict[str, str] = {}
        """Each idempotency key with the task it names (rule 18): its first submission's."""
        self.schedules: dict[str, tuple[bool, float]] = {}
        """Each live schedule's catch-up flag and next tick."""
        self.windows: dict[str, str] = {}
        """Each debounce key with the task its latest window opened (rule 35)."""
        self.bucket: tuple[float, float | None] = (1.0, None)
        """Kind ``c``'s rate bucket (rule 34): tokens left at the last start, and when."""

    def tokens(self, now: float) -> float:
        """Kind ``c``'s tokens at ``now``: 1 at most, half a token more a second."""
        left, at = self.bucket
        return left if at is None else min(1.0, left + (now - at) / 2000)

    def held(self, task_id: str, now: float) -> str | None:
        """Whether a run reservation of ``task_id`` would be held back, and by what."""
        task = self.tasks[task_id]
        if task.kind != "c" or task.marked:
            return None  # an abort handler is neither limited nor rate limited
        busy = any(
            other.status == "running" and other.mode == "run" and other.tenant == task.tenant
            for t, other in self.tasks.items()
            if t != task_id and other.kind == "c"
        )
        if task.tenant is not None and busy:
            return "limited"
        return "rate_limited" if self.tokens(now) < 1 - 1e-9 else None

    def collapses_into(self, key: str, now: float) -> str | None:
        """The task a debounced submit with ``key`` at ``now`` collapses into (rule 35)."""
        task_id = self.windows.get(key)
        task = self.tasks.get(task_id) if task_id is not None else None
        if task is None or task.started or task.marked or task.status != "sleeping":
            return None
        return task_id if task.window_until is not None and now < task.window_until else None

    def live(self, task_id: str) -> bool:
        return self.tasks[task_id].status != "terminal"

    def children(self, task_id: str) -> list[str]:
        return [t for t, m in self.tasks.items() if m.owner == task_id and self.live(t)]

    def cancelling(self, task_id: str) -> bool:
        task = self.tasks[task_id]
        if task.status == "terminal":
            return False
        return task.marked or (task.status == "completing" and task.outcome != "completed")

    def cascade(self, task_id: str) -> None:
        for child in self.children(task_id):
            if not self.tasks[child].marked:
                self.tasks[child].marked = True
                self.tasks[child].restarts = 0  # an abort mark resets restarts (rule 12)
                self.close_asks(child, "abort")
            self.cascade(child)

    def close_asks(self, task_id: str, cause: str) -> None:
        """An abort mark closes its task's open ask (22); a reservation past its deadline."""
        asks = self.tasks[task_id].asks
        for topic, (status, deadline, assigned, at) in list(asks.items()):
            if status == "open":
                asks[topic] = (cause, deadline, assigned, at)

    def ask(
        self, task_id: str, topic: str, timeout: int | None, assigned: bool, now: float
    ) -> None:
        task = self.tasks[task_id]
        task.status, task.restarts, task.attempts = "waiting", 0, 0
        task.topic = task.asking = topic
        task.until = None if timeout is None else now + timeout * 1000
        task.asks.pop(topic, None)  # the latest ask on a topic is kept, last
        task.asks[topic] = ("open", task.until, assigned, now)

    def answer(self, task_id: str, topic: str, actor: str, now: float) -> bool:
        """Rules 30 (none open, or past its deadline), 32 (answered), 31 (not ana's)."""
        asked = self.tasks[task_id].asks.get(topic)
        if asked is None or asked[0] != "open":
            return False
        _, deadline, assigned, at = asked
        if (deadline is not None and now >= deadline) or (assigned and actor != "ana"):
            return False
        self.tasks[task_id].asks[topic] = ("answered", deadline, assigned, at)
        return True

    def inbox(self, now: float) -> list[str]:
        """The open asks not past their deadline, oldest first (then by task id)."""
        found = [
            (at, task_id)
            for task_id, task in self.tasks.items()
            for status, deadline, _, at in task.asks.values()
            if status == "open" and (deadline is None or now < deadline)
        ]
        return [task_id for _, task_id in sorted(found)]

    def submit(self, task_id: str, owner: str | None) -> None:
        self.tasks[task_id] = ModelTask(owner=owner)
        node = owner
        while node is not None:
            if self.cancelling(node):
                self.tasks[task_id].marked = True
            node = self.tasks[node].owner

    def decided(self, task_id: str) -> None:
        """A decision of the task's invocation was recorded: what it read is read (21)."""
        task = self.tasks[task_id]
        task.mailbox = [(seq, topic) for seq, topic in task.mailbox if seq not in task.reads]
        task.reads = []

    def send(self, task_id: str, topic: str) -> bool:
        task = self.tasks[task_id]
        if task.status in ("completing", "terminal"):
            return False  # rule 20
        task.sent += 1
        task.mailbox.append((task.sent, topic))
        return True

    def read(self, task_id: str, topic: str) -> None:
        task = self.tasks[task_id]
        for seq, on in task.mailbox:
            if on == topic and seq not in task.reads:
                task.reads.append(seq)
                return

    def end(self, task_id: str, outcome: str) -> None:
        task = self.tasks[task_id]
        task.topic = task.until = task.asking = None
        if self.children(task_id):
            task.status, task.outcome, task.restarts = "completing", outcome, 0
            if outcome != "completed":
                self.cascade(task_id)
            return
        task.status, task.outcome, task.restarts = "terminal", outcome, 0
        owner = task.owner
        while owner is not None:
            holder = self.tasks[owner]
            if holder.status != "completing" or self.children(owner):
                break
            holder.status = "terminal"
            owner = holder.owner

    def reserve(self, task_id: str, now: float) -> None:
        task = self.tasks[task_id]
        due = task.until is not None and now >= task.until
        if task.asking is not None and not task.marked:  # an ask's wait: its answer (30)
            assert task.asks[task.asking][0] != "open" or due
            self.close_asks(task_id, "timeout")
        elif task.topic is not None and not task.marked:  # 21 (22: a mark beats a message)
            assert any(topic == task.topic for _, topic in task.mailbox) or due
        task.topic = task.until = task.asking = None
        task.reads = []  # a new invocation: it has read nothing yet
        if task.marked and task.restarts >= RESTART_LIMIT:
            self.end(task_id, "faulted")  # rule 12
            return
        task.status = "running"

    def checkpoint(self, task_id: str, phase: str) -> None:
        task = self.tasks[task_id]
        if phase != task.phase or task.attempts:
            task.restarts = 0
        task.phase, task.attempts = phase, 0

    def wait_or_sleep(self, task_id: str, status: str) -> None:
        task = self.tasks[task_id]
        task.status, task.restarts, task.attempts = status, 0, 0

    def phase_fails(self, task_id: str, max_attempts: int) -> None:
        """Rule 23: a failed phase with tries left sleeps its backoff; else it fails."""
        task = self.tasks[task_id]
        if task.attempts + 1 < max_attempts:
            task.status, task.restarts, task.attempts = "sleeping", 0, task.attempts + 1
        else:
            self.end(task_id, "failed")

    def abort(self, task_id: str) -> None:
        task = self.tasks[task_id]
        if self.live(task_id):
            if not task.marked:  # a second request is no new mark: restarts stay
                task.marked, task.restarts = True, 0
                self.close_asks(task_id, "abort")
            self.cascade(task_id)

    def retry(self, task_id: str) -> None:
        task = self.tasks[task_id]
        parked = not task.marked and task.restarts >= RESTART_LIMIT
        if task.status not in ("running", "completing", "terminal") and parked:
            task.restarts = 0

    def fork(self, task_id: str, source_id: str) -> bool:
        """A fork of ``source_id`` as of now: refused with no checkpoint to start from,
        or below an owner holding its outcome (rule 5); else submitted at its phase."""
        source = self.tasks[source_id]
        owner = source.owner
        if source.status in ("completing", "terminal") or (
            owner is not None and self.tasks[owner].status in ("completing", "terminal")
        ):
            return False
        self.submit(task_id, owner)
        self.tasks[task_id].phase = source.phase
        self.tasks[task_id].attempts = source.attempts
        return True

    def schedule(self, name: str, catch_up: bool, now: float) -> None:
        """A per-minute schedule: due at the first whole minute after ``now``; recorded
        again the same way, it stays as it was."""
        if self.schedules.get(name, (None,))[0] != catch_up:
            self.schedules[name] = (catch_up, (now // MINUTE + 1) * MINUTE)

    def tick_schedules(self, now: float) -> list[str]:
        """Rule 27: each due schedule's latest minute, or with catch-up each missed minute
        (the latest CATCH_UP_LIMIT), each submitted once."""
        submitted = []
        for name, (catch_up, due) in sorted(self.schedules.items()):
            if due > now:
                continue
            latest = now // MINUTE * MINUTE
            first = max(due, latest - (CATCH_UP_LIMIT - 1) * MINUTE) if catch_up else latest
            for tick in range(int(first), int(latest) + 1, MINUTE):
                task_id = f"sched:{name}:{tick}"
                if task_id not in self.tasks:
                    self.submit(task_id, None)
                    submitted.append(task_id)
            self.schedules[name] = (catch_up, latest + MINUTE)
        return submitted

    def crash(self) -> None:
        for task in self.tasks.values():
            task.reads = []  # unmarked reads die with the invocation
            if task.status == "running":
                task.status = "pending"
                task.restarts += 1

    def view(self) -> dict[str, tuple]:
        return {
            t: (
                m.status,
                m.marked,
                m.outcome if m.status in ("completing", "terminal") else None,
                m.restarts,
                len(m.mailbox),
                m.topic,
                m.priority,
                tuple(sorted((topic, a[0]) for topic, a in m.asks.items())),
                {
                    name: (len(chunks), name in m.closed or m.status in ("completing", "terminal"))
                    for name, chunks in sorted(m.streams.items())
                },
            )
            for t, m in self.tasks.items()
        }
