"""The chain key: where it comes from, how a store names it, and who may write with it.

A keyed store computes every digest after its marker's ``keyed_after`` as an
HMAC-SHA256 under the key (:mod:`.chain`), so an edit whose digests were recomputed
without the key shows at ``verify`` with the key. The key comes from ``chain_key=``
(bytes or text), else ``$TASKTRAIL_CHAIN_KEY`` (its text as UTF-8), else a key file
(``--key-file``, the CLI's). The store never holds the key: its marker records that
it is keyed (``keyed_after``) and the key's identifier (``chain_key_id``: a hash of
an HMAC of a fixed label under the key), which tells a wrong key from the right one
and says nothing of the key.

A writer opening a keyed store without its key, or with another key, is refused
before anything is written. A writer with a key opening an unkeyed store keys it
from its head on (the events before stay as they were). A reader may open a keyed
store without the key: ``verify`` then says it could not check the keys.
"""

from __future__ import annotations

import hashlib
import hmac
import os
from collections.abc import Callable
from pathlib import Path

from ..errors import InvalidArgument, StoreError
from .files import refuse_store_input

KEY_ENV = "TASKTRAIL_CHAIN_KEY"
KEY_ID_KEY = "chain_key_id"
KEYED_AFTER_KEY = "keyed_after"
KEYED_MAC_KEY = "keyed_mac"
_AFTER_LABEL = b"tasktrail keyed after, v1\n"
_ID_LABEL = b"tasktrail chain key identifier, v1"
_KEY_SOURCES = f"chain_key=, ${KEY_ENV} or --key-file"

ChainKey = bytes | str
"""A key as given: bytes, or text (used as its UTF-8 bytes)."""


def resolve_key(given: ChainKey | None = None) -> bytes | None:
    """The key to use: ``given``, else ``$TASKTRAIL_CHAIN_KEY``, else none."""
    if given is None:
        given = os.environ.get(KEY_ENV) or None
        if given is None:
            return None
    if isinstance(given, str):
        key = given.encode("utf-8", "surrogatepass")
    elif isinstance(given, bytes | bytearray | memoryview):
        key = bytes(given)
    else:
        raise InvalidArgument(f"chain_key must be bytes or text, not {type(given).__name__}")
    if not key:
        raise InvalidArgument("the chain key is empty: give a key of at least one byte")
    return key


def read_key_file(path: str | os.PathLike[str]) -> bytes:
    """A key kept in a file: its bytes, one trailing newline dropped."""
    refuse_store_input(path, "a key file")
    try:
        key = Path(path).read_bytes()
    except OSError as error:
        raise InvalidArgument(
            f"cannot read the key file {os.fspath(path)}: {error.strerror or error}"
        ) from None
    key = key.removesuffix(b"\n").removesuffix(b"\r")
    if not key:
        raise InvalidArgument(f"the key file {os.fspath(path)} is empty")
    return key


def key_id(key: bytes) -> str:
    """The identifier a store records for its key: tells keys apart, reveals none."""
    return hashlib.sha256(hmac.new(key, _ID_LABEL, hashlib.sha256).digest()).hexdigest()[:32]


def keyed_mac(key: bytes, stream_id: str, version: int) -> str:
    """What the marker's ``keyed_mac`` holds: an HMAC under the key of the last event left
    unkeyed (its stream and version; ``""`` and 0 when the store was keyed empty). It
    binds ``keyed_after`` to the log: moved later, it names another event, and nobody
    without the key can vouch for that one."""
    text = f"{stream_id}\n{version}".encode("utf-8", "surrogatepass")
    return hmac.new(key, _AFTER_LABEL + text, hashlib.sha256).hexdigest()


def keyed_after(marker: dict[str, str] | None) -> int | None:
    """The position after which every digest is keyed (``None``: the store is unkeyed)."""
    text = (marker or {}).get(KEYED_AFTER_KEY, "")
    return int(text) if text.isdigit() else None


def check_writer_key(marker: dict[str, str], key: bytes | None, where: str) -> bool:
    """Refuse a writer the store's key does not admit; ``True`` when the store is still
    unkeyed and the writer brings a key (it is to be keyed from its head on)."""
    recorded = marker.get(KEY_ID_KEY)
    if recorded is None:
        return key is not None
    if key is None:
        raise StoreError(
            f"{where} is keyed (chain key id {recorded}): a writer needs its key "
            f"({_KEY_SOURCES}); nothing was written"
        )
    check_reader_key(marker, key, where)
    return False


def check_reader_key(marker: dict[str, str] | None, key: bytes | None, where: str) -> None:
    """Refuse a key that is not the store's (no key, or an unkeyed store, passes here:
    ``verify`` reports those)."""
    recorded = (marker or {}).get(KEY_ID_KEY)
    if key is not None and recorded is not None and key_id(key) != recorded:
        raise StoreError(
            f"{where}: the chain key given (id {key_id(key)}) is not this store's (id "
            f"{recorded}): another store's key, or the store's marker was edited; "
            "nothing was written"
        )


def settle_key(
    marker: dict[str, str],
    key: bytes | None,
    read_only: bool,
    where: str,
    claim: Callable[[bytes], dict[str, str]],
) -> dict[str, str]:
    """The marker once the key is settled: a reader's key checked, a writer's checked or,
    on an unkeyed store, recorded through ``claim`` (another writer's may win: checked)."""
    if read_only:
        check_reader_key(marker, key, where)
    elif check_writer_key(marker, key, where) and key is not None:
        marker = claim(key)
        check_writer_key(marker, key, where)
    return marker


__all__ = [
    "KEYED_AFTER_KEY",
    "KEYED_MAC_KEY",
    "KEY_ENV",
    "KEY_ID_KEY",
    "ChainKey",
    "check_reader_key",
    "check_writer_key",
    "key_id",
    "keyed_after",
    "keyed_mac",
    "read_key_file",
    "resolve_key",
    "settle_key",
]
