"""A mixed, seeded workload: owner trees, waits of both policies, sleeps, holds,
abort cascades, retries and passes that run registered phases.

The crash writer runs it until it is killed; the soak test runs it for a
bounded time. One :meth:`Workload.step` is one command (or one pass); a
refused command is part of the workload, anything else that raises is a bug.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any, ClassVar

from tasktrail.domain import ManualClock, Refused, Registry, Scheduler, TaskDefinition

KINDS = ("tree", "leaf", "manual")
PHASES = {"tree": ("plan", "write"), "leaf": ("go", "done"), "manual": ("step", "step2")}
NOT_HOLDING = ("pending", "running", "waiting", "sleeping")


def workload_registry(rng: random.Random) -> Registry:
    """``tree`` owns 1-3 ``leaf`` tasks and waits on them; ``manual`` takes two steps."""

    def plan(invocation: Any) -> None:
        kids = [invocation.submit("leaf", phase="go") for _ in range(rng.randint(1, 3))]
        invocation.wait(kids, rng.choice(["all", "failFast"]), then="write")

    def go(invocation: Any) -> str:
        invocation.memo("seen", invocation.now())
        return "done"

    def done(invocation: Any) -> None:
        invocation.finish(rng.choice(["completed", "completed", "failed"]))

    def aborted(invocation: Any) -> None:
        invocation.finish("aborted", reason="abort_requested")

    return Registry(
        [
            TaskDefinition(
                "tree", 1, {"plan": plan, "write": lambda i: i.finish("completed")}, abort=aborted
            ),
            TaskDefinition("leaf", 1, {"go": go, "done": done}, abort=aborted),
            TaskDefinition(
                "manual", 1, {"step": lambda i: "step2", "step2": lambda i: i.finish("completed")}
            ),
        ]
    )


Ack = Callable[[dict[str, Any]], None]


class Workload:
    """Issues one random command at a time to a scheduler."""

    WEIGHTS: ClassVar[dict[str, int]] = {
        "submit": 12,
        "submit_child": 10,
        "reserve": 14,
        "checkpoint": 8,
        "memo": 8,
        "wait": 6,
        "sleep": 6,
        "finish": 12,
        "abort": 5,
        "retry": 2,
        "pass": 6,
        "advance": 6,
        "project": 3,
    }

    def __init__(
        self,
        scheduler: Scheduler,
        clock: ManualClock,
        rng: random.Random,
        *,
        ack: Ack | None = None,
        project: Callable[[], Any] | None = None,
        max_live: int | None = None,
    ) -> None:
        self.s = scheduler
        self.clock = clock
        self.rng = rng
        self.ack = ack or (lambda record: None)
        self.project = project
        self.max_live = max_live
        self.ids: list[str] = list(scheduler.world.tasks)[-40:]
        self.names = list(self.WEIGHTS)
        self.weights = list(self.WEIGHTS.values())
        self.done: dict[str, int] = {}
        self.refused = 0

    # ─── picking tasks ──────────────────────────────────────────────────────

    def _recent(self, statuses: tuple[str, ...]) -> str | None:
        # A compacted world has dropped the ended tasks nothing live refers to; none of
        # those is in a live status, so a missing id is simply not a candidate.
        tasks = self.s.world.tasks
        found = [t for t in self.ids[-40:] if t in tasks and tasks[t].status in statuses]
        return self.rng.choice(found) if found else None

    def _running_here(self) -> str | None:
        running = [t for t in self.s._invocations if self.s.world.tasks[t].status == "running"]
        return self.rng.choice(sorted(running)) if running else None

    def _live(self) -> str | None:
        live = self.s.world.live
        return self.rng.choice(sorted(live)) if live else None

    # ─── one command ────────────────────────────────────────────────────────

    def step(self) -> str:
        """Issue one command; returns its name (``refused`` when a rule refused it)."""
        name = self.rng.choices(self.names, self.weights)[0]
        if self.max_live is not None and len(self.s.world.live) > self.max_live:
            name = self.rng.choice(["abort", "pass", "finish", "advance"])
        try:
            record = getattr(self, f"_{name}")()
        except Refused:
            self.refused += 1
            return "refused"
        if record is None:
            return "skipped"
        self.done[name] = self.done.get(name, 0) + 1
        self.ack({"command": name, **record})
        return name

    def _submit(self, owner: str | None = None) -> dict[str, Any]:
        kind = self.rng.choice(KINDS if owner is None else ("leaf", "manual"))
        task_id = self.s.submit(
            kind,
            owner=owner,
            phase=PHASES[kind][0],
            abandon_on_restart=self.rng.random() < 0.1,
        )
        self.ids.append(task_id)
        del self.ids[:-200]
        return {"task": task_id, "owner": owner}

    def _submit_child(self) -> dict[str, Any] | None:
        owner = self._recent(NOT_HOLDING)
        return None if owner is None else self._submit(owner)

    def _reserve(self) -> dict[str, Any] | None:
        task_id = self._recent(("pending", "sleeping", "waiting"))
        if task_id is None:
            return None
        return {"task": task_id, "mode": self.s.reserve(task_id)}

    def _checkpoint(self) -> dict[str, Any] | None:
        task_id = self._running_here()
        if task_id is None:
            return None
        phase = self.rng.choice(PHASES[self.s.world.tasks[task_id].kind])
        self.s.checkpoint(task_id, phase, attempt=self.rng.choice([None, 1, 2]))
        return {"task": task_id}

    def _memo(self) -> dict[str, Any] | None:
        task_id = self._running_here()
        if task_id is None:
            return None
        self.s.memo(task_id, self.rng.choice("abc"), {"n": self.rng.randint(0, 99)})
        return {"task": task_id}

    def _wait(self) -> dict[str, Any] | None:
        task_id = self._running_here()
        if task_id is None:
            return None
        children = sorted(self.s.world.live_children.get(task_id, ()))
        if children and self.rng.random() < 0.7:
            on, policy = children, self.rng.choice(["all", "failFast"])
        else:
            on, policy = [t for t in self.ids[-5:] if t != task_id][:2], "all"
        if not on:
            return None
        self.s.wait(task_id, on, policy)
        return {"task": task_id}

    def _sleep(self) -> dict[str, Any] | None:
        task_id = self._running_here()
        if task_id is None:
            return None
        self.s.sleep(task_id, until=self.clock.now + self.rng.randint(0, 400))
        return {"task": task_id}

    def _finish(self) -> dict[str, Any] | None:
        task_id = self._running_here()
        if task_id is None:
            return None
        status = self.rng.choice(["completed", "completed", "failed", "aborted"])
        self.s.finish(task_id, status, error="stop" if status == "failed" else None)
        return {"task": task_id, "status": status}

    def _abort(self) -> dict[str, Any] | None:
        task_id = self._recent((*NOT_HOLDING, "completing")) or self._live()
        if task_id is None:
            return None
        return {"task": task_id, "changed": self.s.abort(task_id)}

    def _retry(self) -> dict[str, Any] | None:
        task_id = self._recent(("pending",))
        if task_id is None:
            return None
        return {"task": task_id, "parked": self.s.retry(task_id)}

    def _pass(self) -> dict[str, Any]:
        report = self.s.run_pass()
        return {"reserved": len(report.reserved), "ended": len(report.ended)}

    def _advance(self) -> dict[str, Any]:
        return {"now": self.clock.advance(self.rng.randint(1, 300))}

    def _project(self) -> dict[str, Any] | None:
        if self.project is None:
            return None
        self.project()
        return {}
