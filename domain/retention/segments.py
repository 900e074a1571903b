"""Archive segments: the events an archive act took, in log order, in one file.

A segment is the export format (one JSON line an event: ``position``, ``topic``,
``originator_id``, ``originator_version``, ``at``, ``payload``, the payload the stored
bytes exactly, digest included), then one trailer line, the segment's seal
(:func:`segment_seal`), compressed with Zstandard (``zstd -dc FILE`` reads it: RFC
8878, the codec of the kernel, of btrfs and of HTTP; python-zstandard is the binding).
It is written under a hidden name beside its place, fsynced, renamed into place and
its folder fsynced before the store deletes a row: a crash leaves at worst a segment
no act names, which the next archive writes over.
"""

from __future__ import annotations

import hashlib
import hmac
import os
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any

import orjson
import zstandard

from ..errors import InvalidArgument
from ..store.seals import TREE, LogTree
from ..store.transcoder import Row

SEGMENT_VERSION = 1
SUFFIX = ".jsonl.zst"
LEVEL = 6
"""Zstandard's level: about 10x smaller than the rows, at 100+ MB/s."""
_PAYLOAD = b',"payload":'


def segment_name(act_version: int, first: int, last: int) -> str:
    """A segment's file name: the act's number in the history stream and its span."""
    return f"tasktrail-{act_version:06d}-{first:012d}-{last:012d}{SUFFIX}"


def segment_seal(
    tree: LogTree, first: int, name: str, key: bytes | None, key_id: str | None
) -> dict[str, Any]:
    """The seal of a segment: its own tree's root (RFC 6962, the leaves a seal hashes),
    its count and span, when, the store's key id and a MAC under the key when keyed."""
    seal: dict[str, Any] = {
        "segment": SEGMENT_VERSION,
        "tree": TREE,
        "name": name,
        "count": tree.count,
        "first": first,
        "last": tree.position,
        "root": tree.root().hex(),
        "at": datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z"),
        "key_id": key_id,
        "mac": None,
    }
    if key is not None and key_id is not None:
        seal["mac"] = seal_mac(seal, key)
    return seal


def seal_mac(seal: dict[str, Any], key: bytes) -> str:
    """The MAC a segment's seal carries under ``key`` (of the seal with ``mac`` null)."""
    return hmac.new(key, orjson.dumps({**seal, "mac": None}), hashlib.sha256).hexdigest()


class SegmentWriter:
    """Writes one segment: :meth:`add` each row in log order, then :meth:`finish`."""

    def __init__(self, folder: Path | None, act_version: int, sink: IO[bytes] | None = None):
        """A segment of the act numbered ``act_version`` in ``folder`` (``None``: into
        ``sink`` only, a dry run's, that counts the bytes)."""
        self.folder = folder
        self.act_version = act_version
        self.partial = (folder or Path()) / f".tasktrail-{act_version:06d}.{os.getpid()}.partial"
        # Closed in finish, abandon or close_sink.
        self._raw: IO[bytes] = sink if sink is not None else open(self.partial, "wb")  # noqa: SIM115
        self._out = zstandard.ZstdCompressor(level=LEVEL).stream_writer(self._raw)
        self.tree = LogTree()
        self.first = 0
        self.bytes = 0

    def add(self, row: Row) -> None:
        """Write one stored row as its line."""
        position, stream_id, version, topic, state = row
        if not self.first:
            self.first = position
        at = orjson.loads(state).get("at")
        head = orjson.dumps(
            {
                "position": position,
                "topic": topic,
                "originator_id": stream_id,
                "originator_version": version,
                "at": at,
            }
        )
        line = head[:-1] + _PAYLOAD + state + b"}\n"
        self._out.write(line)
        self.bytes += len(line)
        self.tree.add(position, stream_id, version, topic, state)

    def seal(self, key: bytes | None, key_id: str | None) -> dict[str, Any]:
        """The segment's seal (its name from its act and span)."""
        name = segment_name(self.act_version, self.first, self.tree.position)
        return segment_seal(self.tree, self.first, name, key, key_id)

    def finish(self, seal: dict[str, Any]) -> Path:
        """Write the seal, fsync, rename into place, fsync the folder; the path."""
        self._out.write(orjson.dumps(seal) + b"\n")
        self._out.flush(zstandard.FLUSH_FRAME)
        self._raw.flush()
        os.fsync(self._raw.fileno())
        self._raw.close()
        assert self.folder is not None
        path: Path = self.folder / str(seal["name"])
        os.replace(self.partial, path)
        sync_folder(self.folder)
        return path

    def close_sink(self) -> int:
        """A dry run's end: the bytes the segment would take."""
        self._out.flush(zstandard.FLUSH_FRAME)
        return int(getattr(self._raw, "size", 0))

    def abandon(self) -> None:
        """Drop the partial file (an act that will not be recorded)."""
        self._raw.close()
        self.partial.unlink(missing_ok=True)


def sync_folder(folder: Path) -> None:
    """fsync a folder, so a rename into it survives a power cut."""
    handle = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(handle)
    finally:
        os.close(handle)


@dataclass
class SegmentRead:
    """A segment read back: its rows (in order) and its seal line."""

    rows: list[Row]
    seal: dict[str, Any] | None


def read_segment(path: Path) -> SegmentRead:
    """Every row of a segment and its seal; :class:`InvalidArgument` naming the file and
    line for one that cannot be read."""
    rows: list[Row] = []
    seal: dict[str, Any] | None = None
    for number, line in enumerate(_lines(path), start=1):
        where = f"{path}:{number}"
        if line.startswith(b'{"segment"'):
            seal = _json(line, where)
            continue
        split = line.find(_PAYLOAD)
        if split < 0 or not line.endswith(b"}\n"):
            raise InvalidArgument(f"{where}: not an event line of a segment")
        head = _json(line[:split] + b"}", where)
        try:
            row = (
                int(head["position"]),
                str(head["originator_id"]),
                int(head["originator_version"]),
                str(head["topic"]),
                line[split + len(_PAYLOAD) : -2],
            )
        except (KeyError, TypeError, ValueError):
            raise InvalidArgument(f"{where}: not an event line of a segment") from None
        rows.append(row)
    return SegmentRead(rows, seal)


def _lines(path: Path) -> Iterator[bytes]:
    try:
        with open(path, "rb") as raw:
            reader = zstandard.ZstdDecompressor().stream_reader(raw, read_across_frames=True)
            pending = b""
            while chunk := reader.read(1 << 20):
                pending += chunk
                *whole, pending = pending.split(b"\n")
                for line in whole:
                    yield line + b"\n"
            if pending:
                yield pending
    except zstandard.ZstdError as error:
        raise InvalidArgument(f"{path}: not a Zstandard segment ({error})") from None
    except OSError as error:
        raise InvalidArgument(f"cannot read {path}: {error.strerror or error}") from None


def _json(line: bytes, where: str) -> dict[str, Any]:
    try:
        value = orjson.loads(line)
    except orjson.JSONDecodeError as error:
        raise InvalidArgument(f"{where}: not JSON ({error})") from None
    if not isinstance(value, dict):
        raise InvalidArgument(f"{where}: not a JSON object")
    return value


__all__ = [
    "SUFFIX",
    "SegmentRead",
    "SegmentWriter",
    "read_segment",
    "seal_mac",
    "segment_name",
    "segment_seal",
    "sync_folder",
]
