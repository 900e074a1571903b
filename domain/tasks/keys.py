"""Idempotency keys (rule 18): ``submit(..., key=K)`` creates a task once per key.

A key is a stream of its own, ``key:K``, whose one event (:class:`KeyClaimed`) names the
task the key's first submission created; it is appended with that submission, in the
same append. A later submission with the key finds the stream and is that task,
appending nothing. Two writers that both decided before either appended (PostgreSQL's
can) both write version 1 of the key's stream: the store's version check takes the
first and refuses the other whole (its task's submission too), and the loser, refreshed,
reads the winner's task from the stream (``domain/service/keys.py``).

The stream outlives its task's end for as long as the task's history is kept: a world's
compaction drops an ended task's key stream from memory (:func:`_retired`), and
:meth:`~..world.World.stream` reads it back from the store (one indexed read) when a
submission names the key again, so the in-memory index of keys (``World.streams``) is
as small as the live keyed work.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from ..errors import RuleViolation
from ..world import Draft, World, register_retirer
from .events import TaskEvent, register_event
from .evolve import InvalidTransition, evolves_stream
from .fields import MAX_NAME_BYTES, text_problem
from .state import KeyState

KEY_STREAM_PREFIX = "key:"


def key_stream_id(key: str) -> str:
    """The stream of idempotency key ``key``."""
    return KEY_STREAM_PREFIX + key


@dataclass(frozen=True, kw_only=True, slots=True)
class KeyClaimed(TaskEvent):
    """Idempotency key ``key`` names task ``task_id`` from now on (rule 18): the first
    and only event of the key's stream, appended with the task's submission."""

    task_stream: ClassVar[bool] = False

    key: str

    def stream_id(self) -> str:
        """The key's own stream."""
        return key_stream_id(self.key)


register_event(KeyClaimed)


@evolves_stream(KeyClaimed)
def _claimed(state: KeyState | None, event: KeyClaimed) -> KeyState:
    if state is not None:  # the store's version check lets no second claim in
        raise InvalidTransition(f"key {event.key!r} claimed twice")
    return KeyState(key=event.key, task_id=event.task_id, at=event.at)


def _retired(world: World, stream_id: str, state: Any) -> bool | None:
    """A key's stream is read back from the store once its task ended (see above)."""
    if isinstance(state, KeyState):
        return state.task_id not in world.live
    return None


register_retirer(_retired)


def check_key(key: object, task_id: str | None) -> str:
    """Rule 18's argument check: a key is a non-empty string the log can keep as a
    name (no NUL, valid Unicode, at most MAX_NAME_BYTES as UTF-8)."""
    if not isinstance(key, str) or not key.strip():
        raise RuleViolation(18, f"an idempotency key must be a non-empty string, not {key!r:.80}")
    problem = text_problem("key", key, MAX_NAME_BYTES)
    if problem is not None:
        raise RuleViolation(18, f"idempotency {problem}")
    return key


def key_holder(source: World | Draft, key: str) -> str | None:
    """The task that idempotency key ``key`` names in a world (or a decision's view of
    one), read back from the store if compaction dropped it; ``None`` for a new key."""
    stream_id = key_stream_id(key)
    state = source.get_stream(stream_id) if isinstance(source, Draft) else source.stream(stream_id)
    return state.task_id if isinstance(state, KeyState) else None
