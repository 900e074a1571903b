"""tasktrail: a durable task scheduler kept as an event-sourced state machine.

The code lives in three subpackages: :mod:`tasktrail.domain` (events, rules, the
Scheduler, storage), :mod:`tasktrail.projections` (read models) and
:mod:`tasktrail.replay` (replay, verify, the command line). ``python -m tasktrail``
runs the ``tasktrail`` command line; :data:`__version__` is the installed release.
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version


def _installed_version() -> str:
    """The version of the installed distribution (editable or not), as pip knows it."""
    try:
        return version("tasktrail")
    except PackageNotFoundError:  # imported from a source tree no installer saw
        return "0+unknown"


__version__: str = _installed_version()

__all__ = ["__version__"]
