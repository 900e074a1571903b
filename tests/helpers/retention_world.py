"""A store with finished task trees and live work, for the Retention issue's tests."""

from __future__ import annotations

from dataclasses import dataclass, field

from tasktrail.domain import ManualClock, Registry, Scheduler, TaskDefinition

START = 1_767_603_600_000
DAY = 86_400_000


def registry() -> Registry:
    """One kind whose phase does nothing (the tests decide for it)."""
    return Registry([TaskDefinition("job", 1, {"start": lambda task: None})])


@dataclass
class Trees:
    """What :func:`record` made: the finished roots (with their children), the live ones."""

    finished: list[str] = field(default_factory=list)
    children: dict[str, list[str]] = field(default_factory=dict)
    keys: dict[str, str] = field(default_factory=dict)
    live: list[str] = field(default_factory=list)
    waiting: list[str] = field(default_factory=list)


def record(s: Scheduler, clock: ManualClock, trees: int = 12, *, secret: str = "s3cret") -> Trees:
    """Finished trees (a root, two children, memos, a message, a keyed submission, a
    result, an error detail), a live tree, and a waiting task, interleaved in the log."""
    made = Trees()
    for n in range(trees):
        key = f"k-{n}-{int(clock())}"
        root = s.submit("job", phase="start", memos={"who": f"{secret}-{n}"}, key=key)
        made.keys[root] = key
        s.reserve(root)
        s.memo(root, "note", {"address": f"{secret}-memo-{n}"})
        s.send(root, "hello", {"text": f"{secret}-message-{n}"})
        kids = []
        for _ in range(2):
            kid = s.submit("job", owner=root, phase="start")
            s.reserve(kid)
            s.finish(kid, "failed", error={"message": "boom", "detail": f"{secret}-err-{n}"})
            kids.append(kid)
        s.finish(root, "completed", result={"answer": f"{secret}-result-{n}"})
        made.finished.append(root)
        made.children[root] = kids
        if n == trees // 2:  # live work in the middle of the log
            live = s.submit("job", phase="start")
            made.live.append(live)
            waiter = s.submit("job", phase="start")
            s.reserve(waiter)
            awaited = s.submit("job", phase="start")
            s.wait(waiter, on=[awaited], policy="all")
            made.waiting += [waiter, awaited]
        clock.advance(60_000)
    return made


def opened(url: str, clock: ManualClock) -> Scheduler:
    """A scheduler on ``url`` with :func:`registry`."""
    return Scheduler.open(url, clock=clock, registry=registry())
