"""Tamper evidence, checked: the digest chain of a log, event by event, for ``verify``.

A store's rows (or an export's lines) are read raw, in log order, and handed to
:class:`~tasktrail.domain.store.chain.ChainCheck`, which reports each edited,
removed, reordered or forged event with its position. An export's heads lines
are checked against the lines before them (an export edited after it was
written), and ``against`` (an export kept apart) checks that every stream head
it recorded is still in the log with the same digest (a stream rewritten since,
digests and all, or events removed from its end). A keyed store's digests are
checked under ``key``; without it they are counted as unverified, and a key given
for a store whose marker records none is a finding (the marker lowered). Seals
(:mod:`.seal_check`) are fed the same rows, in the same pass.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from tasktrail.domain import Store, StoreError, open_store
from tasktrail.domain.store.chain import ChainCheck, ChainProblem, as_bytes
from tasktrail.domain.store.files import refuse_store_input
from tasktrail.domain.store.gaps import Gap, erasures_of, history_acts, rows_and_gaps
from tasktrail.domain.store.keys import (
    KEY_ID_KEY,
    KEYED_MAC_KEY,
    check_reader_key,
    resolve_key,
)
from tasktrail.domain.store.transcoder import row_problem

from .log import Heads, LogReader, _parse_heads, is_jsonl
from .seal_check import SealCheck, export_seal


@dataclass
class ChainReport:
    """What the chain check found: how many events it vouches for, how many were
    recorded before the chain (unchained, not errors), and the problems."""

    chained: int = 0
    unchained: int = 0
    streams: int = 0
    heads_checked: int = 0
    problems: list[ChainProblem] = field(default_factory=list)
    unverified: int = 0
    """Keyed events whose digest could not be checked: no key was given."""
    key_id: str | None = None
    """The key the store records (``None``: unkeyed)."""
    erased: list[str] = field(default_factory=list)
    """Each erasure act's events, said as erased (by whom, when, why), not as edits."""

    def to_dict(self) -> dict[str, object]:
        return {
            "chained": self.chained,
            "unchained": self.unchained,
            "unverified": self.unverified,
            "key_id": self.key_id,
            "streams": self.streams,
            "heads_checked": self.heads_checked,
            "problems": len(self.problems),
        }


def last_heads(path: str | os.PathLike[str]) -> Heads:
    """The last heads line of an export (what ``verify --against`` compares with)."""
    found: Heads | None = None
    name = os.fspath(path)
    refuse_store_input(path, "an export")
    try:
        with open(path, "rb") as handle:
            for number, raw in enumerate(handle, start=1):
                if raw.startswith(b'{"heads"'):
                    found = _parse_heads(raw, number, name)
    except OSError as error:
        raise StoreError(f"cannot read {name}: {error.strerror or error}") from None
    if found is None:
        raise StoreError(f"{name} records no stream heads (an export by this tasktrail does)")
    return found


def check_chain(
    source: str | os.PathLike[str] | Store,
    *,
    until: int | None = None,
    against: str | os.PathLike[str] | None = None,
    skip_invalid: bool = False,
    chain_key: bytes | str | None = None,
    seals: SealCheck | None = None,
) -> ChainReport:
    """Check the digest chain of a store or an export, up to position ``until``, keyed
    digests under ``chain_key`` (else ``$TASKTRAIL_CHAIN_KEY``), and feed ``seals``."""
    expected = dict(last_heads(against).heads) if against is not None else {}
    heads_checked = 0
    key_id: str | None = None
    if not isinstance(source, Store) and is_jsonl(source):
        key = resolve_key(chain_key)
        check, heads_checked, key_id = _check_export(
            Path(source), expected, until, skip_invalid, key, seals
        )
    else:
        store = (
            source
            if isinstance(source, Store)
            else open_store(source, read_only=True, chain_key=chain_key)
        )
        try:
            key_id = store.key_id
            check = ChainCheck(
                chained_after=store.chained_after,
                contiguous=store.kind == "sqlite",
                expected=expected,
                keyed_after=store.keyed_after,
                key=store.chain_key,
                keyed_mac=store.marker.get(KEYED_MAC_KEY),
                erasures=erasures_of(history_acts(store)),  # held to them as each row comes
            )
            _lowered(check, store.chain_key, key_id)
            for item in rows_and_gaps(store, until=until):
                if isinstance(item, Gap):  # events an archive took: their block, their span
                    if seals is not None:
                        seals.add_block(item)
                    check.last_position = max(check.last_position, item.last)
                    continue
                position, stream_id, version, topic, state = item
                problem = row_problem(stream_id, version, topic, state)
                if problem is not None:  # the table edited by hand: say so, read on
                    check.problems.append(ChainProblem(position, str(stream_id), problem))
                    if seals is not None:  # a leaf no event of this shape could have
                        seals.add(position, "", 0, "", repr(state).encode("ascii", "replace"))
                    continue
                raw = as_bytes(state)
                if seals is not None:
                    seals.add(position, stream_id, version, topic, raw)
                check.add(position, stream_id, version, topic, raw)
            if seals is not None:
                seals.finish(store)
        finally:
            if store is not source:
                store.close()
    check.finish()
    report = ChainReport(check.chained, check.unchained, len(check.heads))
    report.problems = check.problems
    report.heads_checked = heads_checked
    report.unverified = check.unverified
    report.key_id = key_id
    report.erased = check.erased
    return report


def _lowered(check: ChainCheck, key: bytes | None, recorded: str | None) -> None:
    """A key given for a store whose marker records none: it was lowered, or the key is
    another store's (the chain alone cannot tell a recomputed one)."""
    if key is not None and recorded is None:
        check.problems.append(
            ChainProblem(
                None,
                "*",
                "a chain key was given, but the store's marker records none: the marker was "
                "lowered (every digest recomputed without the key), or the key is another "
                "store's",
            )
        )


def _check_export(
    path: Path,
    expected: dict[str, tuple[int, str | None]],
    until: int | None,
    skip: bool,
    key: bytes | None,
    seals: SealCheck | None,
) -> tuple[ChainCheck, int, str | None]:
    own: Heads | None = None
    try:
        own = last_heads(path)
    except StoreError:
        own = None  # an export of an earlier release: no heads, no marker
    sealed = export_seal(path)  # the marker the export recorded, with its seal
    check = ChainCheck(
        chained_after=own.chained_after if own else None,
        expected=expected,
        keyed_after=sealed.keyed_after if sealed else None,
        key=key,
        keyed_mac=sealed.keyed_mac if sealed else None,
    )
    key_id = sealed.key_id if sealed else None
    check_reader_key({KEY_ID_KEY: key_id} if key_id else None, key, str(path))
    _lowered(check, key, key_id)
    reader = LogReader(path, skip_invalid=skip)
    compared: list[int] = []

    def compare(heads: Heads, events: int) -> None:
        # The heads line holds for the lines before it: an edit since shows here.
        compared.append(heads.line)
        where = check.last_position
        if heads.events != events:
            check.problems.append(
                ChainProblem(
                    where,
                    "*",
                    f"the heads line {heads.line} counts {heads.events} events before it, "
                    f"the export holds {events}: lines added or removed",
                )
            )
        for stream_id, head in heads.heads.items():
            if check.heads.get(stream_id) != head:
                check.problems.append(
                    ChainProblem(
                        where,
                        stream_id,
                        f"the heads line {heads.line} records version {head[0]}, the lines "
                        f"before it end at {_shown(check.heads.get(stream_id))}: edited",
                    )
                )
        for stream_id in check.heads.keys() - heads.heads.keys():
            check.problems.append(
                ChainProblem(
                    where, stream_id, f"the heads line {heads.line} does not list this stream"
                )
            )

    reader.on_heads = compare
    for recorded, state, _ in reader.rows():
        if until is not None and recorded.position > until:
            break
        event = recorded.event
        row = (recorded.position, event.stream_id(), recorded.originator_version)
        if seals is not None:
            seals.add(*row, type(event).topic, state)
        check.add(*row, type(event).topic, state)
    if seals is not None:
        seals.finish(None)
    return check, len(compared), key_id


def _shown(head: tuple[int, str | None] | None) -> str:
    if head is None:
        return "nothing"
    return f"version {head[0]}" + ("" if head[1] else " (unchained)")


__all__ = ["ChainReport", "check_chain", "last_heads"]
