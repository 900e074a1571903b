"""What the benchmarks' tests share: the package, imported from the checkout, and the
mark of a benchmark run end to end."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]
END_TO_END = pytest.mark.slow
"""A benchmark run end to end, in processes of its own (4-46 s each on 2 cores, a
quarter of the default run's CPU in all): in the long profile, which CI's run runs too.
The default profile keeps the units (figures, goals, tables, refusals)."""


def bench_module(name: str) -> ModuleType:
    """A module of the ``benchmarks`` package (it lives beside domain/, not in tasktrail)."""
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    return importlib.import_module(name)
