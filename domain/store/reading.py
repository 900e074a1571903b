"""What a read-only open of a store reads through: ``open_store`` gives each store it
opens read-only to :data:`READ_ACROSS`'s factory, if one is set, to read it across an
archive (:func:`tasktrail.domain.retention.across.reading_archive` sets it)."""

from __future__ import annotations

from collections.abc import Callable
from contextvars import ContextVar
from typing import Any

READ_ACROSS: ContextVar[Callable[[Any], Any] | None] = ContextVar("read_across", default=None)
"""Makes a store's archive view (``Store.archive``) from the store, or ``None``."""

__all__ = ["READ_ACROSS"]
