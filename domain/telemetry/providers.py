"""Which OpenTelemetry providers a scheduler's telemetry uses: its own, else the
process-wide defaults (:func:`set_default_providers`), else OpenTelemetry's globals;
and whether there is any at all, asked cheaply (a hook runs on every commit)."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from opentelemetry import metrics, trace


@dataclass
class Defaults:
    """The providers of every scheduler not given its own (``None``: the globals)."""

    tracer_provider: trace.TracerProvider | None = None
    meter_provider: metrics.MeterProvider | None = None


DEFAULTS = Defaults()


def set_default_providers(
    tracer_provider: trace.TracerProvider | None = None,
    meter_provider: metrics.MeterProvider | None = None,
) -> None:
    """Providers for every scheduler not given its own (``None``: OpenTelemetry's globals).

    Recovery runs inside ``Scheduler.open``, before a scheduler can be
    configured; what it records is seen only through these defaults.
    """
    DEFAULTS.tracer_provider = tracer_provider
    DEFAULTS.meter_provider = meter_provider


@contextlib.contextmanager
def default_providers(
    tracer_provider: trace.TracerProvider | None = None,
    meter_provider: metrics.MeterProvider | None = None,
) -> Iterator[None]:
    """:func:`set_default_providers` for a block, then back to what was there."""
    previous = (DEFAULTS.tracer_provider, DEFAULTS.meter_provider)
    set_default_providers(tracer_provider, meter_provider)
    try:
        yield
    finally:
        set_default_providers(*previous)


def _no_meter_types() -> tuple[type, ...]:
    proxy = getattr(getattr(metrics, "_internal", None), "_ProxyMeterProvider", None)
    return (
        (metrics.NoOpMeterProvider, proxy)
        if isinstance(proxy, type)
        else (metrics.NoOpMeterProvider,)
    )


NO_TRACER = (trace.ProxyTracerProvider, trace.NoOpTracerProvider)
NO_METER = _no_meter_types()
_ENVIRON: Any = getattr(os.environ, "_data", None)
"""CPython's store behind ``os.environ`` (``None``: not this layout, ask the getters)."""


def _environ_key(name: str) -> Any:
    encode = getattr(os.environ, "encodekey", None)
    return encode(name) if encode is not None else None


_GLOBALS = (
    (trace, "_TRACER_PROVIDER", _environ_key("OTEL_PYTHON_TRACER_PROVIDER")),
    (
        getattr(metrics, "_internal", None),
        "_METER_PROVIDER",
        _environ_key("OTEL_PYTHON_METER_PROVIDER"),
    ),
)


def no_global(which: int) -> bool:
    """Whether OpenTelemetry holds no global tracer (0) or meter (1) provider and its
    environment names none: what its getter checks before it hands out a proxy, read
    without ``os.environ``'s lookup (which raises a KeyError inside on every miss; a
    hook runs on every commit). ``False`` when unsure: then the getter is asked."""
    module, attribute, key = _GLOBALS[which]
    return (
        getattr(module, attribute, False) is None
        and _ENVIRON is not None
        and key is not None
        and key not in _ENVIRON
    )
