"""Fixtures shared by the suite: a clock, stores on SQLite and PostgreSQL, a scheduler.

PostgreSQL tests use the server at 127.0.0.1:5432 (database ``test``, trust
auth; override with ``TASKTRAIL_TEST_POSTGRES``). Each test gets a schema of
its own, dropped afterwards. Without a server they skip, saying why, except
under ``CI=true``, where a missing server fails them.
"""

from __future__ import annotations

import contextlib
import os
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from tasktrail.domain import ManualClock, Registry, Scheduler, Store, TaskDefinition, open_store
from tasktrail.domain.runs.gate import SwitchedGate
from tasktrail.domain.runs.memory_executor import InMemoryExecutor
from tasktrail.replay import harness

LONG = os.environ.get("TASKTRAIL_LONG") == "1"
"""The long profile (README, "Tests"): ``TASKTRAIL_LONG=1`` runs the ``slow`` tests, which
the default profile skips, and runs every property and scale test again at its long
size; the rest ran in the default profile and is deselected."""


def examples(default: int, long: int) -> int:
    """A property test's example count: ``default`` in the default profile, ``long`` in the
    long one (``TASKTRAIL_LONG=1``)."""
    return long if LONG else default


settings.register_profile(
    "default",
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
settings.register_profile("long", parent=settings.get_profile("default"), max_examples=200)
# CI draws the same examples on every run (derandomized), so a red CI is the change's
# doing and reproduces; local runs draw new ones and go on finding what CI cannot.
for _name in ("default", "long"):
    settings.register_profile(f"{_name}-ci", parent=settings.get_profile(_name), derandomize=True)
settings.load_profile(
    os.environ.get("HYPOTHESIS_PROFILE")
    or ("long" if LONG else "default") + ("-ci" if os.environ.get("CI") == "true" else "")
)
# The suite's subprocesses (CLI runs, workers, probes: some thousands) start faster from
# bytecode caches; an environment that turns them off would have each compile tasktrail.
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Default profile: skip ``slow`` tests, saying how to run them. Long profile: keep only
    the ``slow`` tests and those whose size grows with it (property tests, ``grows``)."""
    if not LONG:
        skip = pytest.mark.skip(reason="long profile: run with TASKTRAIL_LONG=1 (README, Tests)")
        for item in items:
            if "slow" in item.keywords:
                item.add_marker(skip)
        return
    kept, dropped = [], []
    for item in items:
        grows = getattr(getattr(item, "obj", None), "is_hypothesis_test", False)
        if grows or "slow" in item.keywords or "grows" in item.keywords:
            kept.append(item)
        else:
            dropped.append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = kept


POSTGRES_URL = os.environ.get(
    "TASKTRAIL_TEST_POSTGRES", "postgresql://postgres@127.0.0.1:5432/test"
)
_postgres_problem: str | bool | None = False  # False: not checked yet


def postgres_problem() -> str | None:
    """Why PostgreSQL cannot be used here, or ``None`` when it answers."""
    global _postgres_problem
    if _postgres_problem is False:
        try:
            import psycopg

            with psycopg.connect(_admin_dsn(), connect_timeout=3) as conn:
                conn.execute("SELECT 1")
            _postgres_problem = None
        except Exception as error:  # any failure to connect means: no server here
            _postgres_problem = f"no PostgreSQL server answers at {POSTGRES_URL}: {error}"
    assert _postgres_problem is not False
    return _postgres_problem  # type: ignore[return-value]


def _admin_dsn() -> str:
    return POSTGRES_URL.split("?", 1)[0]


def require_postgres() -> None:
    """Skip (or, under CI=true, fail) when PostgreSQL is not there."""
    problem = postgres_problem()
    if problem is None:
        return
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"CI=true requires PostgreSQL: {problem}")
    pytest.skip(problem)


@pytest.fixture
def postgres_url() -> Iterator[str]:
    """A ``postgresql://`` URL with a fresh schema of its own."""
    with postgres_schema() as url:
        yield url


@contextlib.contextmanager
def postgres_schema() -> Iterator[str]:
    """A ``postgresql://`` URL with a fresh schema of its own, dropped afterwards (for
    tests that need one per hypothesis example)."""
    require_postgres()
    import psycopg

    schema = f"tt_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(_admin_dsn(), autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{schema}"')
    try:
        yield f"{_admin_dsn()}?schema={schema}"
    finally:
        with psycopg.connect(_admin_dsn(), autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


@pytest.fixture
def clock() -> ManualClock:
    """A scheduler clock at 1,000,000 ms that moves only when told."""
    return ManualClock(1_000_000)


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A location for a new, empty store: a SQLite file, then a PostgreSQL schema."""
    if request.param == "sqlite":
        return str(tmp_path / "trail.db")
    return str(request.getfixturevalue("postgres_url"))


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    """A location for a new SQLite store."""
    return str(tmp_path / "trail.db")


def finishing(status: str = "completed") -> Callable[[Any], None]:
    """A phase that finishes the task with ``status``."""

    def phase(invocation: Any) -> None:
        invocation.finish(status)

    return phase


def crash(scheduler: Scheduler) -> None:
    """Drop a scheduler without close(), as a crash would (:func:`harness.crash`)."""
    harness.crash(scheduler)


def reopen(url: str, clock: ManualClock, registry: Registry, limit: int) -> Scheduler:
    """Open ``url`` as worker ``w`` (so it recovers what a crashed ``w`` left running)."""
    return Scheduler.open(url, clock=clock, registry=registry, worker="w", restart_limit=limit)


@pytest.fixture
def registry() -> Registry:
    """Definitions used across the suite: ``job`` (two phases), ``leaf`` (one)."""
    return Registry(
        [
            TaskDefinition("job", 1, {"start": lambda inv: "end", "end": finishing()}),
            TaskDefinition("leaf", 1, {"go": finishing()}),
        ]
    )


@pytest.fixture
def fleet(store_url: str, clock: ManualClock, registry: Registry) -> Iterator[Any]:
    """``fleet("a", **options)`` opens a scheduler named ``a`` on one shared store (each
    store of :func:`store_url`); all close after. A module may hold its own (a lease)."""
    opened: list[Scheduler] = []

    def open_worker(name: str = "a", **options: Any) -> Scheduler:
        s = Scheduler.open(store_url, clock=clock, registry=registry, worker=name, **options)
        opened.append(s)
        return s

    yield open_worker
    for s in opened:
        s.close()


@pytest.fixture
def scheduler(sqlite_url: str, clock: ManualClock, registry: Registry) -> Iterator[Scheduler]:
    """An open scheduler on a fresh SQLite store."""
    opened = Scheduler.open(sqlite_url, clock=clock, registry=registry)
    yield opened
    opened.close()


def event_count(location: str | Store) -> int:
    """How many events a store holds (opened separately, so it sees what was committed)."""
    if isinstance(location, Store):
        return location.head()
    with open_store(location) as store:
        return sum(1 for _ in store.read())


# ─── dispatch runs (seed 003): a scheduler at T0 handing runs to an executor ──

DISPATCH_T0 = 1_767_254_400_000
"""2026-01-01 08:00 UTC: when the dispatcher tests' clock starts."""


@pytest.fixture
def executor() -> InMemoryExecutor:
    """An in-memory executor that can fail in each of the dispatcher's ways."""
    return InMemoryExecutor()


@pytest.fixture
def gate() -> SwitchedGate:
    """The host's dispatch gate, switched by the test."""
    return SwitchedGate()


@pytest.fixture
def runs(
    scheduler: Scheduler, clock: ManualClock, executor: InMemoryExecutor, gate: SwitchedGate
) -> Scheduler:
    """A scheduler at 2026-01-01 08:00 UTC handing runs to ``executor`` behind ``gate``."""
    clock.set(DISPATCH_T0)
    scheduler.configure_runs(executor=executor, gate=gate)
    return scheduler


# ─── telemetry: OpenTelemetry SDK providers that keep what they get ──────────


@pytest.fixture
def exporter() -> InMemorySpanExporter:
    """Where live spans land."""
    return InMemorySpanExporter()


@pytest.fixture
def tracer_provider(exporter: InMemorySpanExporter) -> TracerProvider:
    """An SDK tracer provider exporting to ``exporter``."""
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider


@pytest.fixture
def reader() -> InMemoryMetricReader:
    """Where live metrics are read."""
    return InMemoryMetricReader()


@pytest.fixture
def meter_provider(reader: InMemoryMetricReader) -> MeterProvider:
    """An SDK meter provider read by ``reader``."""
    return MeterProvider(metric_readers=[reader])
