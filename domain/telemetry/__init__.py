"""Telemetry: live phase spans and metrics (``live``), and spans folded from history
(``spans``). ``set_default_providers`` is here, where docs/observability.md shows it."""

from .live import configure_telemetry
from .providers import default_providers, set_default_providers

__all__ = ["configure_telemetry", "default_providers", "set_default_providers"]
