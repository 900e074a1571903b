"""A writer's first look at a location (issue 29, item 5): a SQLite file of another
application is refused and left byte for byte as it was (no ``-wal``/``-shm``), the
CLI exiting 2; a PostgreSQL ``?schema=`` that does not exist is created by a writer,
and a reader is told the ``CREATE SCHEMA`` statement."""

from __future__ import annotations

import sqlite3
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tasktrail.domain import Registry, Scheduler, StoreError, open_store
from tasktrail.domain.store.files import sqlite_tables
from tasktrail.replay.cli import main
from tests.conftest import _admin_dsn, require_postgres
from tests.helpers.cli import folder_state, run


def other_application(path: Path) -> Path:
    connection = sqlite3.connect(path)
    connection.execute("CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT)")
    connection.execute("INSERT INTO users (name) VALUES ('ada')")
    connection.commit()
    connection.close()
    return path


def test_a_writer_refuses_another_applications_sqlite_file_and_changes_nothing(
    tmp_path: Path, registry: Registry
) -> None:
    path = other_application(tmp_path / "app.db")
    before = folder_state(tmp_path)
    with pytest.raises(StoreError, match=r"another application \(tables: users\)"):
        Scheduler.open(path, registry=registry)
    with pytest.raises(StoreError, match="not a tasktrail store"):
        open_store(path)
    assert folder_state(tmp_path) == before  # byte for byte; no -wal, no -shm


def test_the_cli_writers_exit_2_on_another_applications_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    path = other_application(tmp_path / "app.db")
    module = tmp_path / "hostmod.py"
    module.write_text("from tasktrail.domain import Registry\nregistry = Registry([])\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(sys, "dont_write_bytecode", True)  # the host module's import: no cache
    log = tmp_path / "log.jsonl"
    with open_store(tmp_path / "source.db") as source:
        source.close()
    assert main(["export", str(tmp_path / "source.db"), str(log)]) == 0
    before = folder_state(tmp_path)
    assert main(["worker", "hostmod:registry", "--store", str(path), "--quiet"]) == 2
    ran = run(["import", str(log), str(path)], capsys)
    assert ran.code == 2
    assert folder_state(tmp_path) == before


def test_a_store_with_tables_of_its_own_beside_it_still_opens(
    tmp_path: Path, registry: Registry
) -> None:
    path = tmp_path / "trail.db"
    with Scheduler.open(path, registry=registry) as s:
        s.submit("leaf", id="t")
    connection = sqlite3.connect(path)
    connection.execute("CREATE TABLE host_notes (note TEXT)")  # a host's own table beside it
    connection.commit()
    connection.close()
    with Scheduler.open(path, registry=registry) as s:
        assert s.task("t").status == "pending"


def test_an_empty_sqlite_database_becomes_a_store(tmp_path: Path, registry: Registry) -> None:
    path = tmp_path / "empty.db"
    sqlite3.connect(path).close()  # a database with no table yet (0 bytes, or a header)
    connection = sqlite3.connect(path)
    connection.execute("PRAGMA user_version = 1")  # now it has a header
    connection.close()
    with Scheduler.open(path, registry=registry) as s:
        s.submit("leaf", id="t")
    assert "stored_events" in sqlite_tables(path)


@pytest.fixture
def missing_schema() -> Iterator[tuple[str, str]]:
    """A PostgreSQL URL whose schema does not exist (dropped afterwards), and the name."""
    require_postgres()
    import psycopg

    schema = f"tt_missing_{uuid.uuid4().hex[:8]}"
    yield f"{_admin_dsn()}?schema={schema}", schema
    with psycopg.connect(_admin_dsn(), autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def schema_exists(schema: str) -> bool:
    import psycopg

    with psycopg.connect(_admin_dsn()) as conn:
        found = conn.execute("SELECT 1 FROM pg_namespace WHERE nspname = %s", (schema,))
        return found.fetchone() is not None


@pytest.mark.postgres
def test_a_reader_of_a_missing_schema_names_it_and_the_statement(
    missing_schema: tuple[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    url, schema = missing_schema
    for command in ("tasks", "runs", "workers", "verify"):
        ran = run([command, url], capsys)
        assert ran.code == 2, command
        assert f"the schema '{schema}' does not exist" in ran.err
        assert f'CREATE SCHEMA "{schema}"' in ran.err
    assert not schema_exists(schema)  # a reader creates nothing


@pytest.mark.postgres
def test_a_writer_creates_the_missing_schema_then_the_store(
    missing_schema: tuple[str, str], registry: Registry, capsys: pytest.CaptureFixture[str]
) -> None:
    url, schema = missing_schema
    with Scheduler.open(url, registry=registry) as s:
        s.submit("leaf", id="t")
    assert schema_exists(schema)
    ran = run(["tasks", url], capsys)
    assert ran.code == 0 and ran.out.splitlines()[1].split()[:3] == ["t", "leaf", "pending"]


@pytest.mark.postgres
def test_a_writer_who_may_not_create_the_schema_is_told_the_statement(
    missing_schema: tuple[str, str], registry: Registry
) -> None:
    import psycopg

    url, schema = missing_schema
    role = f"tt_nocreate_{uuid.uuid4().hex[:8]}"  # may log in, may not create a schema
    with psycopg.connect(_admin_dsn(), autocommit=True) as conn:
        conn.execute(f'CREATE ROLE "{role}" LOGIN')
    try:
        as_role = url.replace("postgresql://postgres@", f"postgresql://{role}@")
        assert as_role != url
        with pytest.raises(StoreError) as refused:
            Scheduler.open(as_role, registry=registry)
        text = str(refused.value)
        assert f"the schema {schema!r} does not exist and could not be created" in text
        assert f'create it as a user who may: CREATE SCHEMA "{schema}"' in text
        assert not schema_exists(schema)
    finally:
        with psycopg.connect(_admin_dsn(), autocommit=True) as conn:
            conn.execute(f'DROP ROLE IF EXISTS "{role}"')
