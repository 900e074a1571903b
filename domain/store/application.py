"""The eventsourcing ``Application`` behind a store, and what opening one needs: closing a
half-built one, and saying why it failed (PostgreSQL's creation races: ``creation.py``).
"""

from __future__ import annotations

import contextlib
from typing import Any

from eventsourcing.application import Application
from eventsourcing.persistence import InfrastructureFactory, Mapper

from .transcoder import OrjsonTranscoder, TaskMapper


class TaskApplication(Application[str]):
    """The eventsourcing application that holds task streams."""

    name = "tasktrail"

    def __init__(
        self, env: dict[str, str], factory: InfrastructureFactory[Any] | None = None
    ) -> None:
        self._prebuilt_factory = factory
        try:
            super().__init__(env)
        except BaseException:
            # Half built: release its connections now, not whenever it is collected
            # (a psycopg pool closed from its own worker thread cannot join it).
            close_quietly(getattr(self, "factory", None))
            raise

    def construct_factory(self, env: Any) -> InfrastructureFactory[Any]:
        if self._prebuilt_factory is not None:
            return self._prebuilt_factory
        return super().construct_factory(env)

    def construct_mapper(self) -> Mapper[str]:
        return TaskMapper(transcoder=OrjsonTranscoder())


def describe(error: BaseException) -> str:
    """An error's first line (its class name when it has no text)."""
    text = str(error).strip() or type(error).__name__
    return text.splitlines()[0]


def open_failure(kind: str, env: dict[str, str], error: BaseException) -> str:
    """Why opening failed: a database without the log, or the server's own words."""
    text = describe(error)
    if "no such table" in text or "does not exist" in text:
        return "it holds no tasktrail log (no table of events)"
    if kind == "postgresql":
        from .postgres import connection_problem  # the driver: PostgreSQL stores only

        return connection_problem(env) or text
    return text


def close_quietly(resource: Any) -> None:
    """Close an application or factory that failed to open; its own errors do not matter."""
    if resource is not None:
        # Already broken: the error that matters is the one being raised.
        with contextlib.suppress(Exception):
            resource.close()
