"""What a projection is: a fold of the log into SQLite tables, tracked exactly once.

A :class:`Projection` turns each event, with the stream's state before and
after it (folded by the same ``evolve`` the scheduler uses), into row changes
of its tables. The :class:`~.projector.Projector` collects a batch of them and
writes the rows and the projection's new position in one transaction, so a
crash between any two statements leaves either both or neither.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from tasktrail.domain import TaskEvent, World

if TYPE_CHECKING:
    # sqlite-utils imports pandas and numpy when they are installed (about 45 MB and a
    # third of a second): only what writes a read-model file loads it.
    import sqlite_utils


@dataclass
class TableSpec:
    """A read-model table: its columns, primary key and indexes."""

    name: str
    columns: dict[str, type]
    pk: str | tuple[str, ...]
    indexes: list[tuple[str, ...]] = field(default_factory=list)
    times: tuple[str, ...] = ()
    """Columns holding ms since the epoch (the scheduler clock). Each gets a generated
    ``<column>_iso`` column beside it: the same time as ISO-8601 UTC text, computed by
    SQLite as it is read (never written, so folding costs nothing more)."""

    def create(self, db: sqlite_utils.Database) -> None:
        """Create the table and its indexes if they are not there yet, and the ISO-8601
        columns of its times (added to a file an earlier release wrote, too)."""
        table = db.table(self.name)
        if not table.exists():
            table.create(self.columns, pk=self.pk, not_null=_pk_columns(self.pk))
        else:
            # A read-model file an earlier release wrote: add the columns added since.
            have = table.columns_dict
            for column, kind in self.columns.items():
                if column not in have:
                    table.add_column(column, kind)
        present = {row[1] for row in db.execute(f"PRAGMA table_xinfo([{self.name}])")}
        for column in self.times:
            if iso_column(column) not in present:
                db.execute(
                    f"ALTER TABLE [{self.name}] ADD COLUMN [{iso_column(column)}] TEXT "
                    f"GENERATED ALWAYS AS ({iso_sql(f'[{column}]')}) VIRTUAL"
                )
        for columns in self.indexes:
            table.create_index(list(columns), if_not_exists=True)


def iso_column(column: str) -> str:
    """The name of the ISO-8601 text column beside a millisecond time column."""
    return f"{column}_iso"


def iso_sql(ms: str) -> str:
    """SQL for ms since the epoch as ISO-8601 UTC text (``2026-01-05T09:00:03.000Z``)."""
    return f"strftime('%Y-%m-%dT%H:%M:%fZ', {ms} / 1000.0, 'unixepoch')"


def _pk_columns(pk: str | tuple[str, ...]) -> set[str]:
    return {pk} if isinstance(pk, str) else set(pk)


@dataclass
class Changes:
    """Row changes one batch makes to a projection's tables, in order per key.

    Later changes of the same row win; a delete after an upsert removes it.
    """

    upserts: dict[str, dict[Any, dict[str, Any]]] = field(default_factory=dict)
    deletes: dict[str, set[Any]] = field(default_factory=dict)

    def upsert(self, table: str, key: Any, row: dict[str, Any]) -> None:
        self.upserts.setdefault(table, {})[key] = row
        self.deletes.get(table, set()).discard(key)

    def delete(self, table: str, key: Any) -> None:
        self.upserts.get(table, {}).pop(key, None)
        self.deletes.setdefault(table, set()).add(key)

    def __bool__(self) -> bool:
        return any(self.upserts.values()) or any(self.deletes.values())


class Projection:
    """Base class of a read model: name it, declare its tables, turn events into rows."""

    name: str = ""
    tables: tuple[TableSpec, ...] = ()
    version: int = 1
    """Raised when the rows it writes for the same events change meaning: a read-model
    file that tracks it under another version (an earlier release's: none recorded, 1)
    is folded again from position 0 for it (:class:`~.projector.Projector`), so its
    tables stay what a rebuild writes."""
    coalesces: bool = False
    """Whether a stream's events may be applied as one: ``apply`` called once with the
    stream's state before the first of them, the last of them (and its position), the
    state after the last, and the world after all of them, leaves the same rows as
    calling it for each event. True of a projection whose rows are a function of the
    current state (a stream's, or an index of the world), rewritten by each event that
    changes that state; not of one that keeps a row per event (the audit trail). The
    projector and the replay fold then apply it once per stream per batch (see
    :class:`Coalescer`), not once per event."""

    def apply(
        self,
        changes: Changes,
        position: int,
        event: TaskEvent,
        before: Any,
        after: Any,
        world: World,
    ) -> None:
        """Record the row changes ``event`` (at ``position``) makes; ``world`` is after it."""
        raise NotImplementedError

    def keys(self, table: str) -> tuple[str, ...]:
        """The primary-key columns of one of this projection's tables."""
        for spec in self.tables:
            if spec.name == table:
                return (spec.pk,) if isinstance(spec.pk, str) else spec.pk
        raise KeyError(table)


class Coalescer:
    """Each stream's first ``before`` and last event over a batch, for the projections
    that coalesce: :meth:`flush` applies them once per stream."""

    def __init__(self, projections: Iterable[Projection]) -> None:
        self.projections = [p for p in projections if p.coalesces]
        self.touched: dict[str, tuple[Any, TaskEvent, int]] = {}

    def add(self, stream_id: str, position: int, event: TaskEvent, before: Any) -> None:
        """Note that ``event`` (at ``position``) was folded on ``stream_id``."""
        first = self.touched.get(stream_id)
        self.touched[stream_id] = (before if first is None else first[0], event, position)

    def flush(self, world: World, changes: Callable[[Projection], Changes]) -> None:
        """Apply every touched stream to each projection (into ``changes(projection)``),
        with the world as it is now; then forget them."""
        if not self.touched:
            return
        targets = [(p, changes(p)) for p in self.projections]
        # get/stream, not the dicts: a world of live work reads a dropped stream back.
        task, stream = world.get, world.stream
        for stream_id, (before, event, position) in self.touched.items():
            after = task(stream_id) if type(event).task_stream else stream(stream_id)
            for projection, target in targets:
                projection.apply(target, position, event, before, after, world)
        self.touched = {}


def write_changes(db: sqlite_utils.Database, projection: Projection, changes: Changes) -> None:
    """Write one batch of changes (inside the caller's transaction)."""
    for table, keys in changes.deletes.items():
        if not keys:
            continue
        pk = projection.keys(table)
        where = " AND ".join(f"[{column}] = ?" for column in pk)
        db.conn.executemany(
            f"DELETE FROM [{table}] WHERE {where}",
            [key if isinstance(key, tuple) else (key,) for key in keys],
        )
    columns = {spec.name: tuple(spec.columns) for spec in projection.tables}
    for table, rows in changes.upserts.items():
        if rows:
            _replace_all(db, table, columns[table], rows.values())


_PLAIN = frozenset({str, int, float, bool, type(None), bytes})


def _replace_all(
    db: sqlite_utils.Database, table: str, columns: tuple[str, ...], rows: Iterable[dict[str, Any]]
) -> None:
    """``INSERT OR REPLACE`` the rows with one ``executemany``: what sqlite-utils'
    ``insert_all(replace=True)`` writes (values it would turn into JSON, it still does),
    without building its statements and converting every value batch by batch."""
    names = ", ".join(f"[{column}]" for column in columns)
    marks = ", ".join("?" for _ in columns)
    known = set(columns)
    every = operator.itemgetter(*columns) if len(columns) > 1 else None
    params = []
    for row in rows:
        keys = row.keys()
        if every is not None and keys == known:
            values = every(row)
        elif keys <= known:  # a row without some columns: those are NULL
            values = tuple([row.get(column) for column in columns])
        else:
            raise ValueError(f"a row of {table} has columns the table lacks: {sorted(row)}")
        if not _PLAIN.issuperset(map(type, values)):
            from sqlite_utils.db import jsonify_if_needed

            values = tuple(map(jsonify_if_needed, values))
        params.append(values)
    db.conn.executemany(f"INSERT OR REPLACE INTO [{table}] ({names}) VALUES ({marks})", params)
