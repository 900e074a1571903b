"""A scheduler's world given another's state in place, its readers told.

The world object a scheduler holds is held by others too (a batch's base, the readers
of its changes: ``World.watchers``, :mod:`..app.changes`), so a batch's view that
becomes the world, or a restored snapshot, is copied into it rather than put in its
place. Its readers' sets stay with it and learn which tasks the new state changed."""

from __future__ import annotations

from collections.abc import Iterable

from ..world import World


def hold_in_place(world: World, other: World, changed: Iterable[str] | None = None) -> None:
    """Give ``world`` the state of ``other``; ``changed``: the tasks whose state differs
    (``None``: any may: every task live in either)."""
    watchers = world.watchers
    touched: set[str] = set()
    if watchers:
        touched = set(changed) if changed is not None else set(world.live) | set(other.live)
    vars(world).update(vars(other))
    world.watchers = watchers
    for watcher in watchers:
        watcher |= touched


__all__ = ["hold_in_place"]
