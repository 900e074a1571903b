"""Issue 40, item 6: an export cut short is incomplete, not "ok".

Every export ends with its heads line and its seal (``replay/exporting.py``). One cut
anywhere before its last byte (its last lines gone, a line cut mid-way) or a 0-byte
one lacks them: ``verify`` exits 1 naming what is missing, and ``import`` refuses it
(exit 2) and writes nothing, on either store.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from conftest import examples, finishing, postgres_schema
from helpers.cli import folder_state, run
from hypothesis import given, settings
from hypothesis import strategies as st

from tasktrail.domain import (
    ManualClock,
    Registry,
    Scheduler,
    StoreError,
    TaskDefinition,
    open_store,
)
from tasktrail.replay import export, import_log
from tasktrail.replay.export_end import IncompleteExport, missing_end


def _recorded(location: str | Path, registry: Registry) -> None:
    s = Scheduler.open(location, clock=ManualClock(1_000), registry=registry)
    for n in range(4):
        s.submit("job", id=f"job-{n}", phase="start")
    s.run_until_idle()
    s.close()


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    """The bytes of a whole export: 4 tasks, then its heads line and its seal."""
    folder = tmp_path_factory.mktemp("export")
    registry = Registry([TaskDefinition("job", 1, {"start": lambda i: "end", "end": finishing()})])
    _recorded(folder / "s.db", registry)
    export(folder / "s.db", folder / "whole.jsonl")
    return (folder / "whole.jsonl").read_bytes()


def _missing(data: bytes, cut: int) -> str:
    """What ``verify`` must name for the export cut after ``cut`` bytes."""
    kept = data[:cut]
    if not kept:
        return "it is empty (0 bytes)"
    if not kept.endswith(b"\n"):
        return "cut off mid-way"
    last = kept.splitlines()[-1]
    if last.startswith(b'{"heads"'):
        return "its seal is missing after its heads line"
    return "its heads line and seal are missing"


def test_a_whole_export_is_complete(exported: bytes, tmp_path: Path) -> None:
    (tmp_path / "whole.jsonl").write_bytes(exported)
    assert missing_end(tmp_path / "whole.jsonl") is None


def _refused(exported: bytes, cut: int, capsys: pytest.CaptureFixture[str]) -> None:
    """The export cut after ``cut`` bytes: verify exits 1 naming what is missing; import
    (also with --skip-invalid) exits 2 and leaves the folder as it was."""
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "cut.jsonl"
        path.write_bytes(exported[:cut])
        before = folder_state(Path(folder))
        ran = run(["verify", str(path)], capsys)
        assert ran.code == 1, (cut, ran)
        assert "the export is incomplete" in ran.out and _missing(exported, cut) in ran.out
        target = Path(folder) / "target.db"
        for options in ([], ["--skip-invalid"]):
            ran = run(["import", str(path), str(target), *options], capsys)
            assert ran.code == 2, (cut, options, ran)
            assert "the export is incomplete" in ran.err and _missing(exported, cut) in ran.err
        assert folder_state(Path(folder)) == before  # no store, no temporary file


def test_an_empty_export_or_one_cut_at_a_line_end_is_incomplete(
    exported: bytes, capsys: pytest.CaptureFixture[str]
) -> None:
    line_ends = [i + 1 for i, byte in enumerate(exported) if byte == ord("\n")]
    # 0 bytes; after an event line; after the heads line; inside the seal line.
    for cut in (0, line_ends[-4], line_ends[-3], line_ends[-2], len(exported) - 1):
        _refused(exported, cut, capsys)


@settings(max_examples=examples(20, 200))
@given(data=st.data())
def test_an_export_cut_anywhere_is_incomplete_and_not_imported(
    exported: bytes, data: st.DataObject, capsys: pytest.CaptureFixture[str]
) -> None:
    _refused(exported, data.draw(st.integers(0, len(exported) - 1), label="cut"), capsys)


def test_an_export_without_its_heads_and_seal_imports_nothing_on_either_store(
    store_url: str, registry: Registry, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _recorded(store_url, registry)
    whole = tmp_path / "whole.jsonl"
    export(store_url, whole)
    assert run(["verify", str(whole)], capsys).code == 0
    cut = tmp_path / "cut.jsonl"
    cut.write_bytes(b"".join(whole.read_bytes().splitlines(keepends=True)[:-2]))
    ran = run(["verify", str(cut)], capsys)
    assert ran.code == 1 and "its heads line and seal are missing" in ran.out, ran
    if store_url.startswith("postgresql://"):
        with postgres_schema() as target:
            with pytest.raises(IncompleteExport, match="heads line and seal are missing"):
                import_log(cut, target)
            with pytest.raises(StoreError, match="no tasktrail log"):
                open_store(target, read_only=True)  # nothing made in the schema
    else:
        target = str(tmp_path / "target.db")
        with pytest.raises(IncompleteExport, match="heads line and seal are missing"):
            import_log(cut, target)
        assert sorted(p.name for p in tmp_path.iterdir()) == [
            "cut.jsonl",
            "trail.db",
            "whole.jsonl",
        ]
