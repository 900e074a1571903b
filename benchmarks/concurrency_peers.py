"""The systems ``python -m benchmarks.concurrency`` runs: tasktrail and its peers.

Each peer runs on the store it is made for, in its recommended async or concurrent
mode; a job queue's task is one job doing three awaits (``--peer-shape single``, the
least it can record) or a chain of three jobs (``chain``, a record a phase as
tasktrail's checkpoints; :data:`SYSTEMS` says how, each peer's module why). The
peers are the ``bench`` extra's (``pip install -e '.[bench]'``); one not installed is
named and left out, and the rest run.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .concurrency_runs import Run, Started
    from .fleet import Stores

Start = Callable[["Stores", "Run", dict[str, str]], "Started"]


@dataclass(frozen=True)
class System:
    """A system the benchmark runs: where, what a task is, and what it needs."""

    name: str
    stores: tuple[str, ...]
    shape: str
    """What a task of three phases is, in this system."""
    needs: tuple[str, ...] = ()
    """The modules it imports (the ``bench`` extra's packages)."""
    peer: bool = True
    """A job queue run only on ``next3`` (``sync3``/``async3`` are tasktrail's and
    DBOS's alone)."""


BOTH = ("sqlite", "postgresql")
SYSTEMS = {
    s.name: s
    for s in (
        System("tasktrail", BOTH, "three phases of one task", peer=False),
        System("dbos", BOTH, "a workflow of three steps (poll 1 s)", needs=("dbos",), peer=False),
        System(
            "dbos-fast",
            BOTH,
            "a workflow of three steps (poll --dbos-fast-poll)",
            needs=("dbos",),
            peer=False,
        ),
        System(
            "huey",
            ("sqlite",),
            "one task of three waits, or a pipeline of three",
            needs=("huey", "gevent"),
        ),
        System(
            "pgqueuer",
            ("postgresql",),
            "one job of three awaits, or a chain of three",
            needs=("pgqueuer", "asyncpg"),
        ),
        System(
            "procrastinate",
            ("postgresql",),
            "one job of three awaits, or a chain of three",
            needs=("procrastinate",),
        ),
    )
}


def missing(name: str) -> list[str]:
    """The modules ``name`` needs that are not installed."""
    return [module for module in SYSTEMS[name].needs if importlib.util.find_spec(module) is None]


def versions(names: list[str]) -> dict[str, str]:
    """The installed version of each package the systems ``names`` need."""
    from importlib import metadata

    packages = sorted({m for n in names for m in SYSTEMS[n].needs})
    return {p: metadata.version(p) for p in packages if importlib.util.find_spec(p)}


def runs(name: str, store: str, kind: str) -> bool:
    """Whether ``name`` runs on ``store`` with phases of ``kind``."""
    system = SYSTEMS[name]
    return store in system.stores and (kind == "next3" or not system.peer)


def starter(name: str) -> Start:
    """How ``name`` starts its workers and submits its tasks."""
    from . import concurrency_runs

    if name == "tasktrail":
        return concurrency_runs.tasktrail
    if name in ("dbos", "dbos-fast"):
        return concurrency_runs.dbos
    if name == "huey":
        from . import concurrency_huey

        return concurrency_huey.start
    if name == "pgqueuer":
        from . import concurrency_pgqueuer

        return concurrency_pgqueuer.start
    from . import concurrency_procrastinate

    return concurrency_procrastinate.start
