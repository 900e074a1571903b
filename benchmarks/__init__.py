"""tasktrail's benchmarks: every measurement beside its physical limit and plain eventsourcing.

Run ``python -m benchmarks [--quick] [--json PATH]`` from the repository root.
Each figure is a rate (or a latency, a size) taken in the same process and the
same run as the limit it is compared with, so the ratios hold on a noisy
machine where absolute times do not. See ``benchmarks/README.md``.
"""

from .report import Figure, format_table, machine

__all__ = ["Figure", "format_table", "machine"]
