"""Tamper evidence, checked: the digest chain of a log, event by event, for ``verify``.

A store's rows (or an export's lines) are read raw, in log order, and handed to
:class:`~tasktrail.domain.store.chain.ChainCheck`, which reports each edited,
removed, reordered or forged event with its position. An export's heads lines
are checked against the lines before them (an export edited after it was
written), and ``against`` (an export kept apart) checks that every stream head
it recorded is still in the log with the same digest (a stream rewritten since,
digests and all, or events removed from its end).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from tasktrail.domain import Store, StoreError, open_store
from tasktrail.domain.store.chain import ChainCheck, ChainProblem, as_bytes
from tasktrail.domain.store.transcoder import row_problem

from .log import Heads, LogReader, _parse_heads, is_jsonl


@dataclass
class ChainReport:
    """What the chain check found: how many events it vouches for, how many were
    recorded before the chain (unchained, not errors), and the problems."""

    chained: int = 0
    unchained: int = 0
    streams: int = 0
    heads_checked: int = 0
    problems: list[ChainProblem] = field(default_factory=list)

    def to_dict(self) -> dict[str, object]:
        return {
            "chained": self.chained,
            "unchained": self.unchained,
            "streams": self.streams,
            "heads_checked": self.heads_checked,
            "problems": len(self.problems),
        }


def last_heads(path: str | os.PathLike[str]) -> Heads:
    """The last heads line of an export (what ``verify --against`` compares with)."""
    found: Heads | None = None
    name = os.fspath(path)
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
) -> ChainReport:
    """Check the digest chain of a store or an export, up to position ``until``."""
    expected = dict(last_heads(against).heads) if against is not None else {}
    heads_checked = 0
    if not isinstance(source, Store) and is_jsonl(source):
        check, heads_checked = _check_export(Path(source), expected, until, skip_invalid)
    else:
        store = source if isinstance(source, Store) else open_store(source, read_only=True)
        try:
            check = ChainCheck(
                chained_after=store.chained_after,
                contiguous=store.kind == "sqlite",
                expected=expected,
            )
            for position, stream_id, version, topic, state in store.rows(until=until):
                problem = row_problem(stream_id, version, topic, state)
                if problem is not None:  # the table edited by hand: say so, read on
                    check.problems.append(ChainProblem(position, str(stream_id), problem))
                    continue
                check.add(position, stream_id, version, topic, as_bytes(state))
        finally:
            if store is not source:
                store.close()
    check.finish()
    report = ChainReport(check.chained, check.unchained, len(check.heads))
    report.problems = check.problems
    report.heads_checked = heads_checked
    return report


def _check_export(
    path: Path, expected: dict[str, tuple[int, str | None]], until: int | None, skip: bool
) -> tuple[ChainCheck, int]:
    own: Heads | None = None
    try:
        own = last_heads(path)
    except StoreError:
        own = None  # an export of an earlier release: no heads, no marker
    check = ChainCheck(chained_after=own.chained_after if own else None, expected=expected)
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
        check.add(
            recorded.position,
            event.stream_id(),
            recorded.originator_version,
            type(event).topic,
            state,
        )
    return check, len(compared)


def _shown(head: tuple[int, str | None] | None) -> str:
    if head is None:
        return "nothing"
    return f"version {head[0]}" + ("" if head[1] else " (unchained)")


__all__ = ["ChainReport", "check_chain", "last_heads"]
