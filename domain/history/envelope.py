"""A snapshot's body: the world, the chain heads of the streams it holds, and a digest
of both, checked before the world is trusted.

The body is one JSON object, ``{"heads": ..., "world": ..., "digest": "<hex>"}``,
whose digest, the last key, is the SHA-256 of the bytes before it (closed with
``}``), as an event's digest closes its payload (:mod:`..store.chain`); more keys
may come before it (a seal of the log at the snapshot's position). ``heads`` maps
each stream the world holds to ``[version, digest]``: the version the world folded
it to and the chain digest of that event in the log (``null`` for one recorded
before the chain). :func:`heads_problem` reads the log's row at each of those
versions and the one after it (indexed lookups, as many as the streams the snapshot
holds: the live work, not the history) and finds a snapshot that no longer matches
the log: a stream the log does not hold to that version with that digest, or one
the log took further before the snapshot's position.

What this catches and what it cannot: an edited body (the digest no longer
matches), a log rewritten or rolled back under a snapshot (its heads no longer
match), a snapshot from another store. Someone who can write the store and
recomputes the digest after editing the world is caught only by ``verify``, which
compares every snapshot with the fold from position 0 (docs/reliability.md).
"""

from __future__ import annotations

import hashlib
import hmac
from typing import TYPE_CHECKING, Any

import orjson

from ..store.chain import unseal
from ..world import World
from .codec import SnapshotUnreadable
from .table import SnapshotTable

if TYPE_CHECKING:
    from ..store.store import Store

_KEY = b',"digest":"'
_HEX = 64
_SUFFIX = len(_KEY) + _HEX + 2  # the key, the digest, '"}'


def body_digest(content: bytes, key: bytes | None = None) -> str:
    """The digest of a body's content (the JSON object before its digest, closed):
    SHA-256, or HMAC-SHA256 under ``key`` (for a keyed store: the keyed chain of issue
    30 passes its key here, so that no one without it can seal an edited body)."""
    if key is not None:
        return hmac.new(key, content, hashlib.sha256).hexdigest()
    return hashlib.sha256(content).hexdigest()


def keyed_snapshot(store: Store | None, position: int | None) -> bool:
    """Whether the snapshot at ``position`` is sealed under the chain key: one of a keyed
    store past the position it was keyed after (one taken before, plain SHA-256)."""
    after = store.keyed_after if store is not None and store.key_id is not None else None
    return after is not None and position is not None and position > after


def body_key(store: Store | None, position: int | None) -> bytes | None:
    """The key a snapshot body's digest is an HMAC under (issue 30), else ``None``."""
    return store.chain_key if store is not None and keyed_snapshot(store, position) else None


def held_versions(world: World) -> dict[str, int]:
    """Each stream ``world`` holds (tasks' and the others), with the version it folded."""
    versions = {task_id: task.events for task_id, task in world.tasks.items()}
    versions.update(world.stream_versions)
    return versions


def seal_body(
    world_bytes: bytes,
    heads: dict[str, tuple[int, str | None]],
    key: bytes | None = None,
    seal: dict[str, Any] | None = None,
) -> bytes:
    """The body to store: ``world_bytes`` (:func:`~.codec.encode_world`) with the heads
    of the streams it holds and the ``seal`` of the log at its position (if given:
    :mod:`.sealed`), closed by the digest of all (under ``key``, if given)."""
    listed = {stream: [version, digest] for stream, (version, digest) in sorted(heads.items())}
    content = b'{"heads":' + orjson.dumps(listed) + b',"world":' + world_bytes
    if seal is not None:
        content += b',"seal":' + orjson.dumps(seal)
    content += b"}"
    return content[:-1] + _KEY + body_digest(content, key).encode("ascii") + b'"}'


def open_body(
    body: bytes, key: bytes | None = None
) -> tuple[Any, dict[str, tuple[int, str | None]]]:
    """The world's data and the heads of a stored body, once its digest (under ``key``,
    if given) matches; :class:`SnapshotUnreadable` if it does not, or the body is no
    such object."""
    if len(body) <= _SUFFIX or not body.endswith(b'"}') or body[-_SUFFIX:][: len(_KEY)] != _KEY:
        raise SnapshotUnreadable("its body carries no digest")
    content = body[:-_SUFFIX] + b"}"
    stated = body[-_HEX - 2 : -2]
    if not hmac.compare_digest(body_digest(content, key).encode("ascii"), stated):
        raise SnapshotUnreadable("its body does not match its digest (edited after it was taken)")
    try:
        whole = orjson.loads(body)
    except orjson.JSONDecodeError as error:
        raise SnapshotUnreadable(f"its body is not JSON ({error})") from None
    if not isinstance(whole, dict) or not {"heads", "world"} <= set(whole):
        raise SnapshotUnreadable("its body holds no world and heads")
    heads: dict[str, tuple[int, str | None]] = {}
    listed = whole["heads"]
    if not isinstance(listed, dict):
        raise SnapshotUnreadable("its heads are not an object")
    for stream, head in listed.items():
        if (
            not isinstance(head, list)
            or len(head) != 2
            or head[0].__class__ is not int
            or not (head[1] is None or head[1].__class__ is str)
        ):
            raise SnapshotUnreadable(f"its head of stream {stream!r} is not [version, digest]")
        heads[stream] = (head[0], head[1])
    return whole["world"], heads


def read_heads(
    store: Any, versions: dict[str, int], position: int
) -> dict[str, tuple[int, str | None]]:
    """The log's heads of ``versions`` (stream -> version): each stream's digest at that
    version, as a snapshot at ``position`` records them; a stream the log does not
    hold so, at or before ``position``, raises :class:`SnapshotUnreadable`."""
    rows = SnapshotTable(store).rows_at(versions)
    heads: dict[str, tuple[int, str | None]] = {}
    for stream, version in versions.items():
        problem = _head_problem(rows, stream, version, position)
        if problem is not None:
            raise SnapshotUnreadable(problem)
        heads[stream] = (version, _digest(rows[(stream, version)][1]))
    return heads


def heads_problem(
    store: Any, world: World, heads: dict[str, tuple[int, str | None]], position: int
) -> str | None:
    """How the heads a snapshot at ``position`` recorded disagree with its world or with
    the log, or ``None``."""
    versions = held_versions(world)
    if set(versions) != set(heads) or any(
        heads[stream][0] != version for stream, version in versions.items()
    ):
        return "its heads are not those of the streams it holds"
    rows = SnapshotTable(store).rows_at(versions)
    for stream, (version, digest) in sorted(heads.items()):
        problem = _head_problem(rows, stream, version, position)
        if problem is not None:
            return problem
        if _digest(rows[(stream, version)][1]) != digest:
            return (
                f"stream {stream} version {version} in the log is not the event it "
                "recorded (its digest differs)"
            )
    return None


def _head_problem(
    rows: dict[tuple[str, int], tuple[int, bytes]], stream: str, version: int, position: int
) -> str | None:
    row = rows.get((stream, version))
    if row is None or row[0] > position:
        return f"the log holds no version {version} of stream {stream} at its position"
    after = rows.get((stream, version + 1))
    if after is not None and after[0] <= position:
        return (
            f"the log holds version {version + 1} of stream {stream} at position "
            f"{after[0]}, before the snapshot's"
        )
    return None


def _digest(tail: bytes) -> str | None:
    return unseal(tail)[1]
