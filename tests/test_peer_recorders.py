"""eventsourcing's own recorder test cases, run against tasktrail's recorder subclasses.

``domain/store`` overrides private eventsourcing internals (``_create_connection``,
``_insert_events``, ``select_max_notification_id_statement``,
``_fetch_ids_after_insert_events``). ``pyproject.toml`` bounds eventsourcing below its
next major, and these cases (``eventsourcing.tests.persistence``, shipped in the
eventsourcing wheel) hold the recorders to the library's own contract, so an upgrade
that breaks appends, positions or the read guards fails here, not for a user.

Each recorder is built the way a tasktrail store builds it, from the settings
:func:`parse_location` gives (text originator ids, the guarded PostgreSQL recorder by
topic, the tuned SQLite factory), on a fresh SQLite file or PostgreSQL schema a test.
The PostgreSQL cases skip, saying why, without a server, and fail under ``CI=true``.
"""

from __future__ import annotations

import shutil
import tempfile
import uuid
from typing import Any
from uuid import UUID, uuid4

import psycopg
import pytest
from conftest import _admin_dsn, require_postgres
from eventsourcing.persistence import (
    ApplicationRecorder,
    InfrastructureFactory,
    IntegrityError,
    StoredEvent,
)
from eventsourcing.tests.persistence import (
    ApplicationRecorderTestCase,
    NonInterleavingNotificationIDsBaseCase,
)
from eventsourcing.utils import Environment

from tasktrail.domain.store.location import NOTIFY_KEY, parse_location
from tasktrail.domain.store.postgres import GuardedPostgresRecorder
from tasktrail.domain.store.sqlite import TunedSQLiteFactory, _BulkSQLiteApplicationRecorder

APPLICATION = "tasktrail"  # TaskApplication.name: the prefix of the events table's name


class _TasktrailRecorders:
    """Builds recorders as a tasktrail store does; closes them after the test."""

    factories: list[InfrastructureFactory[Any]]

    def setUp(self) -> None:
        self.factories = []
        super().setUp()  # type: ignore[misc]

    def tearDown(self) -> None:
        for factory in self.factories:
            factory.close()
        super().tearDown()  # type: ignore[misc]

    def new_originator_id(self) -> UUID | str:
        # tasktrail stores text ids (task ids, "run:task|day|attempt"), as
        # eventsourcing's own WithTextOriginatorID variants do.
        return "test-" + str(uuid4())


class _ReadGuardCases:
    """tasktrail's addition to the recorder contract: a read guard refuses a stale append."""

    create_recorder: Any
    new_originator_id: Any

    def _event(self, stream: UUID | str, version: int) -> StoredEvent:
        return StoredEvent(stream, version, "tasktrail.Test", b"{}")

    def test_read_guard_refuses_a_stale_append(self) -> None:
        recorder: ApplicationRecorder = self.create_recorder()
        read, written = self.new_originator_id(), self.new_originator_id()
        recorder.insert_events([self._event(read, 1)])
        # A decision read `read` at version 1; another writer moves it on to 2.
        recorder.insert_events([self._event(read, 2)])
        with pytest.raises(IntegrityError):
            recorder.insert_events([self._event(written, 1)], guards={read: 1})
        assert recorder.select_events(written) == []  # the whole append rolled back
        assert [e.originator_version for e in recorder.select_events(read)] == [1, 2]
        assert recorder.max_notification_id() == 2

    def test_read_guard_passes_a_fresh_append(self) -> None:
        recorder: ApplicationRecorder = self.create_recorder()
        read, written = self.new_originator_id(), self.new_originator_id()
        recorder.insert_events([self._event(read, 1), self._event(read, 2)])
        ids = recorder.insert_events(
            [self._event(written, 1), self._event(written, 2)], guards={read: 2}
        )
        assert ids == [3, 4]
        assert [e.originator_version for e in recorder.select_events(written)] == [1, 2]
        assert [e.originator_version for e in recorder.select_events(read)] == [1, 2]


class _SQLiteRecorders(_TasktrailRecorders):
    def setUp(self) -> None:
        self.directory = tempfile.mkdtemp(prefix="tasktrail-es-")
        super().setUp()

    def tearDown(self) -> None:
        super().tearDown()
        shutil.rmtree(self.directory, ignore_errors=True)

    def create_recorder(self) -> _BulkSQLiteApplicationRecorder:
        # A new file each call: a store is a file in WAL mode, never ":memory:".
        path = f"{self.directory}/{uuid.uuid4().hex}.db"
        env = Environment(APPLICATION, parse_location(path).env)
        factory = TunedSQLiteFactory(env, "FULL")
        self.factories.append(factory)
        recorder = factory.application_recorder()
        assert type(recorder) is _BulkSQLiteApplicationRecorder
        return recorder


class TestTunedSQLiteApplicationRecorder(
    _SQLiteRecorders,
    _ReadGuardCases,
    ApplicationRecorderTestCase[_BulkSQLiteApplicationRecorder],
):
    """eventsourcing's ApplicationRecorderTestCase on tasktrail's SQLite recorder:
    insert/select, notification ids and paging, conflicts, concurrent writers."""


class TestTunedSQLiteNonInterleavingIDs(_SQLiteRecorders, NonInterleavingNotificationIDsBaseCase):
    """Two racing multi-event appends take contiguous, non-interleaved positions: the
    premise of reading one ``executemany``'s positions back from ``max(rowid)``."""


@pytest.mark.postgres
class _PostgresRecorders(_TasktrailRecorders):
    def setUp(self) -> None:
        require_postgres()  # skips, saying why (fails under CI=true), without a server
        self.schema = f"tt_es_{uuid.uuid4().hex[:12]}"
        with psycopg.connect(_admin_dsn(), autocommit=True) as conn:
            conn.execute(f'CREATE SCHEMA "{self.schema}"')
        super().setUp()

    def tearDown(self) -> None:
        super().tearDown()
        with psycopg.connect(_admin_dsn(), autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{self.schema}" CASCADE')

    def create_recorder(self) -> GuardedPostgresRecorder:
        # eventsourcing's cases hold a LISTEN connection while they append: two at least,
        # and a subscriber needs the appends to NOTIFY.
        url = f"{_admin_dsn()}?schema={self.schema}&notify=on"
        location = parse_location(url, pool_size=3)
        env = Environment(APPLICATION, location.env)
        factory = InfrastructureFactory.construct(env)
        self.factories.append(factory)
        recorder = factory.application_recorder()
        assert type(recorder) is GuardedPostgresRecorder
        recorder.notify = bool(location.env[NOTIFY_KEY])  # as Store does
        return recorder


class TestGuardedPostgresApplicationRecorder(
    _PostgresRecorders,
    _ReadGuardCases,
    ApplicationRecorderTestCase[GuardedPostgresRecorder],
):
    """eventsourcing's ApplicationRecorderTestCase on tasktrail's PostgreSQL recorder."""

    def test_insert_subscribe(self) -> None:
        # eventsourcing runs its optional subscription case for PostgreSQL; tasktrail's
        # recorder keeps LISTEN/NOTIFY working.
        self.optional_test_insert_subscribe()


@pytest.mark.postgres
class TestGuardedPostgresNonInterleavingIDs(
    _PostgresRecorders, NonInterleavingNotificationIDsBaseCase
):
    """Two racing multi-event appends take non-interleaved positions on PostgreSQL."""
