"""Issue 45: an export of an archived store imports into a new store that verifies; made
with --archive it holds the whole log (its replay is the original's read across the
archive), made without it only what is still in place; on both stores."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import event_count, postgres_schema
from helpers.cli import run
from helpers.retention_world import opened, record

from tasktrail.domain import ManualClock
from tasktrail.replay import replay


@contextlib.contextmanager
def new_store(store_url: str, tmp_path: Path, name: str) -> Iterator[str]:
    """A location for another new store of the same kind as ``store_url``."""
    if store_url.startswith("postgresql"):
        with postgres_schema() as url:
            yield url
    else:
        yield str(tmp_path / f"{name}.db")


def test_an_export_of_an_archived_store_imports_and_verifies(
    store_url: str, clock: ManualClock, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    s = opened(store_url, clock)
    trees = record(s, clock)
    s.close()
    folder = tmp_path / "archive"
    before = str(clock())
    archived = run(
        ["archive", store_url, "--before", before, "--to", str(folder), "--actor", "ops"],
        capsys,
    )
    assert archived.code == 0, archived.err
    across = replay(store_url, archive=folder)
    whole, in_place = tmp_path / "whole.jsonl", tmp_path / "in_place.jsonl"
    exported = run(["export", store_url, str(whole), "--archive", str(folder)], capsys)
    assert exported.code == 0, exported.err
    exported = run(["export", store_url, str(in_place)], capsys)
    assert exported.code == 0, exported.err
    with (
        new_store(store_url, tmp_path, "whole") as whole_url,
        new_store(store_url, tmp_path, "in_place") as in_place_url,
    ):
        for export, url in ((whole, whole_url), (in_place, in_place_url)):
            imported = run(["import", str(export), url], capsys)
            assert imported.code == 0, f"{export.name}: {imported.err}"
            verified = run(["verify", url], capsys)
            assert verified.code == 0, f"{export.name}: {verified.out}{verified.err}"
        assert replay(whole_url).tasks == across.tasks
        finished = trees.finished[0]
        assert finished in across.tasks and finished not in replay(in_place_url).tasks
        assert event_count(in_place_url) < event_count(whole_url)
