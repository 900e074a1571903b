"""The liveness each kind of store keeps for a process (:mod:`.liveness`): chosen here, above
both kinds, so that the PostgreSQL one (:mod:`.advisory`, built on the base) and the base
never import each other."""

from __future__ import annotations

from collections.abc import Mapping

from .liveness import FileLiveness, Liveness


def liveness_for(kind: str, path: str | None, env: Mapping[str, str]) -> Liveness:
    """The liveness of a store: by ``flock`` beside a SQLite file, by advisory lock on
    PostgreSQL, none for a SQLite store without a file (``:memory:``)."""
    if kind == "postgresql":
        from .advisory import AdvisoryLiveness  # the driver: PostgreSQL stores only

        return AdvisoryLiveness(env)
    if path is not None and path != ":memory:":
        return FileLiveness(path)
    return Liveness()
