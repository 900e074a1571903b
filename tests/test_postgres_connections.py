"""A PostgreSQL store at open: what it creates, how many server connections it holds,
whether its appends NOTIFY, and which schema names it accepts (issue 28 items 2, 3 and
5, issue 30's quoting)."""

from __future__ import annotations

import dataclasses
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from conftest import _admin_dsn
from helpers.server_connections import server_connections, server_ports

from tasktrail.domain import Registry, Scheduler, StoreError, open_store
from tasktrail.domain.store import store as store_module

pytestmark = pytest.mark.postgres

OPENERS = 16
MAX_CONNECTIONS = 2
"""Per scheduler: the store's pool (one by default) and a worker's liveness lock."""


@contextmanager
def _connections_opened() -> Iterator[list[int]]:
    """The server connections this process opened inside the block (still open at its end)."""
    before = server_ports()
    counted: list[int] = []
    yield counted
    counted.append(server_connections(_admin_dsn(), server_ports() - before))


def test_an_open_scheduler_holds_at_most_two_server_connections(
    postgres_url: str, registry: Registry
) -> None:
    with _connections_opened() as counted:
        scheduler = Scheduler.open(postgres_url, worker="w", registry=registry)
        for n in range(20):
            scheduler.submit("job", id=f"t{n}")
            scheduler.reserve(f"t{n}")
        scheduler.run_until_idle()
        scheduler.snapshot()
    assert 1 <= counted[0] <= MAX_CONNECTIONS, counted
    # The liveness lock's connection (issue 27) is one of them: the pool keeps one.
    assert scheduler._liveness is not None and scheduler._liveness_key is not None
    scheduler.close()


def test_a_scheduler_takes_the_pool_size_as_an_argument(postgres_url: str) -> None:
    """Its store's pool, plus the writer's liveness connection."""
    with _connections_opened() as counted:
        scheduler = Scheduler.open(postgres_url, worker="w", pool_size=3)
    assert counted == [4]
    scheduler.close()


def test_the_pool_size_is_set_in_the_url_or_as_an_argument(postgres_url: str) -> None:
    with _connections_opened() as counted:
        store = open_store(f"{postgres_url}&pool_size=3")
    assert counted == [3]
    store.close()
    with _connections_opened() as counted:
        store = open_store(f"{postgres_url}&pool_size=3", pool_size=2)
    assert counted == [2]
    store.close()


@pytest.mark.parametrize("size", ["0", "many", "101", "-1"])
def test_a_pool_size_out_of_range_is_refused(postgres_url: str, size: str) -> None:
    with pytest.raises(StoreError, match="pool_size"):
        open_store(f"{postgres_url}&pool_size={size}")


def test_concurrent_opens_of_a_fresh_schema_all_succeed(
    postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Sixteen writers open a new schema at once: creation is serialized, so none meets
    another's half-made catalog entries (and none needs the open's retry)."""
    races: list[BaseException] = []

    def no_race_expected(error: BaseException) -> bool:
        races.append(error)
        return False

    monkeypatch.setattr(store_module, "creation_race", no_race_expected)
    barrier = threading.Barrier(OPENERS)
    outcomes: list[str] = []

    def open_one(n: int) -> None:
        barrier.wait()
        try:
            Scheduler.open(postgres_url, worker=f"w{n}").close()
            outcomes.append("opened")
        except Exception as error:  # the outcome under test: any error is a failure
            outcomes.append(f"{type(error).__name__}: {error}")

    threads = [threading.Thread(target=open_one, args=(n,)) for n in range(OPENERS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert outcomes == ["opened"] * OPENERS and not races, (outcomes, races)


def _catalog(schema: str) -> list[tuple[str, str]]:
    """Every object of ``schema`` with its row version (DDL on it changes ``xmin``)."""
    import psycopg

    with psycopg.connect(_admin_dsn(), autocommit=True) as admin:
        rows = admin.execute(
            "SELECT relname, xmin::text FROM pg_class "
            "WHERE relnamespace = to_regnamespace(%s) "
            "UNION ALL SELECT proname, xmin::text FROM pg_proc "
            "WHERE pronamespace = to_regnamespace(%s) ORDER BY 1",
            (schema, schema),
        ).fetchall()
    return [(str(name), str(version)) for name, version in rows]


def test_no_ddl_at_open_when_everything_exists(postgres_url: str) -> None:
    schema = postgres_url.rsplit("schema=", 1)[1]
    first = Scheduler.open(postgres_url, worker="a")
    first.submit("job", phase="a", id="t")
    first.close()  # a snapshot at close: every table a writer makes is there
    made = _catalog(schema)
    Scheduler.open(postgres_url, worker="b").close()
    assert _catalog(schema) == made


HOSTILE_SCHEMAS = [
    'tt"x',
    "tt;x",
    'x"; DROP TABLE public.tasktrail_victim; --',
    "tt x",
    "9tt",
    "t" * 64,
]


@pytest.mark.parametrize("schema", HOSTILE_SCHEMAS)
def test_a_hostile_schema_name_is_refused_before_anything_runs(schema: str) -> None:
    import psycopg
    from conftest import require_postgres

    require_postgres()
    victim = f"tasktrail_victim_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(_admin_dsn(), autocommit=True) as admin:
        admin.execute(f'CREATE TABLE public."{victim}" (x int)')
    try:
        hostile = schema.replace("tasktrail_victim", victim)
        url = f"{_admin_dsn()}?schema={hostile}"
        with pytest.raises(StoreError, match="schema") as caught, _connections_opened() as counted:
            Scheduler.open(url)
        assert "not a plain name" in str(caught.value)
        assert counted in ([], [0])  # refused before connecting
        with psycopg.connect(_admin_dsn(), autocommit=True) as admin:
            found = admin.execute("SELECT to_regclass(%s)", (f'public."{victim}"',)).fetchone()
        assert found is not None and found[0] is not None  # the injected DROP never ran
    finally:
        with psycopg.connect(_admin_dsn(), autocommit=True) as admin:
            admin.execute(f'DROP TABLE IF EXISTS public."{victim}"')


def _notifications(url: str, channel: str) -> int:
    """How many notifications one submit through ``url`` sends on ``channel``."""
    import psycopg

    with psycopg.connect(_admin_dsn(), autocommit=True) as listener:
        listener.execute(f'LISTEN "{channel}"')
        with open_store(url) as store:
            datastore = store.app.recorder.datastore  # type: ignore[attr-defined]
            with datastore.get_connection() as connection:  # the pool's only one
                pid = connection.info.backend_pid
            Scheduler(store, worker="a").submit("job", phase="a")
        # The channel is the table's name, not the schema's: other stores send on it too.
        return sum(1 for sent in listener.notifies(timeout=0.5) if sent.pid == pid)


@pytest.mark.parametrize("notify", ["", "&notify=on", "&notify=off"])
def test_appends_notify_unless_turned_off(postgres_url: str, notify: str) -> None:
    """On by default since the store's news listens (issue 42); ``notify=off`` trades the
    news for appends that do not take the server's one notify lock through the commit
    (every store on the server queues behind it), and waiters then poll."""
    with open_store(postgres_url) as store:
        channel = store.app.recorder.channel_name  # type: ignore[attr-defined]
    assert _notifications(postgres_url + notify, channel) == (0 if "off" in notify else 1)


def test_a_caller_waiting_for_a_result_holds_three_server_connections(
    postgres_url: str,
) -> None:
    """The pool's one, the liveness lock's, and the news listener's (docs/fleet.md)."""
    with _connections_opened() as counted:
        scheduler = Scheduler.open(postgres_url)
        task_id = scheduler.submit("job", phase="a")
        with pytest.raises(TimeoutError):
            scheduler.result(task_id, timeout=0.3)
    try:
        assert counted[0] == MAX_CONNECTIONS + 1, counted
    finally:
        scheduler.close()


def test_a_hostile_schema_in_a_location_built_by_hand_is_refused_by_the_recorder() -> None:
    """The recorder checks the name too: every PostgreSQL store is made through it."""
    from conftest import require_postgres

    from tasktrail.domain.store.location import parse_location
    from tasktrail.domain.store.store import Store

    require_postgres()
    location = parse_location(_admin_dsn())
    env = {**location.env, "POSTGRES_SCHEMA": 'x"; DROP TABLE public.anything; --'}
    with pytest.raises(StoreError, match="not a plain name"):
        Store(dataclasses.replace(location, env=env))


@pytest.mark.parametrize("option", ['schema=x";DROP TABLE y;--', "pool_size=0", "notify=maybe"])
def test_the_cli_refuses_a_bad_url_option_with_exit_2(
    option: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from helpers.cli import run

    ran = run(["verify", f"{_admin_dsn()}?{option}"], capsys)
    assert ran.code == 2 and option.split("=")[0] in ran.err, ran
