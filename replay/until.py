"""Where a replay stops: :class:`Until`, kept in :mod:`tasktrail.domain.history.until`
(the scheduler's ``fork`` reads a task as of one too) and named here as before."""

from tasktrail.domain.history.until import Until

__all__ = ["Until"]
