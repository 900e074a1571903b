"""Creating tasktrail's objects in a PostgreSQL schema from many processes at once: the
advisory lock every creation takes, and telling a lost creation race from a real failure.

Its own module, below both the application and the recorders that create tables, so
neither imports the other for it.
"""

from __future__ import annotations

from typing import Any

POSTGRES_CREATION_RACES = frozenset({"23505", "42P07", "42710", "XX000"})
"""unique_violation, duplicate_table, duplicate_object, internal_error: what
concurrent ``CREATE ... IF NOT EXISTS`` on a fresh PostgreSQL schema raise."""


def creation_race(error: BaseException) -> bool:
    """Whether opening failed because another process created the same tables at once
    (PostgreSQL: a unique or duplicate error in its catalog, "tuple concurrently updated")."""
    seen: BaseException | None = error
    while seen is not None:
        if getattr(seen, "sqlstate", None) in POSTGRES_CREATION_RACES:
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def lock_creation(cursor: Any, schema: str) -> None:
    """Hold, until the cursor's transaction ends, PostgreSQL's advisory lock on creating
    tasktrail's objects in ``schema``: concurrent ``CREATE ... IF NOT EXISTS`` of one
    object race in the catalog (a unique violation, "tuple concurrently updated"), so
    every creation takes this lock first and the second finds the object made."""
    cursor.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (CREATION_LOCK + schema,))


CREATION_LOCK = "tasktrail create in schema "
