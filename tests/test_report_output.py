"""``tasktrail report``: what it writes and how it draws. It writes only ``--out``, never
over the store, nothing on bad input, and leaves the old file whole when it fails; every
string a task recorded reaches the page as text, control characters and huge values are
shown safely, and the clock axis folds idle stretches with labels that never pile up.
What the page holds is in test_report.py; the browser tests in test_report_browser.py."""

from __future__ import annotations

import hashlib
import itertools
import os
from html.parser import HTMLParser
from pathlib import Path

import pytest
from helpers.report import demo as demo
from helpers.report_stores import CHILD, HOSTILE, ROOT, demo_store, hostile_store

from tasktrail.domain import UnknownTask
from tasktrail.replay.cli import main
from tasktrail.replay.report import gather, render, write_report
from tasktrail.replay.report.scale import Scale, label_extent, tick_label


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


class Tags(HTMLParser):
    """Every element and attribute a page opens with, as a browser's parser sees them."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []
        self.attributes: list[tuple[str, str | None]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        self.attributes += attrs


def test_every_string_a_task_recorded_is_escaped(tmp_path: Path) -> None:
    store = hostile_store(tmp_path / "hostile.db")
    for task_id in (ROOT, CHILD, None):
        page = render(gather(store, task_id))
        parser = Tags()
        parser.feed(page)
        assert parser.tags.count("script") == 1  # the page's own, and no other
        assert not {"img", "b", "iframe", "object"} & set(parser.tags)
        assert not [name for name, _ in parser.attributes if name.startswith("on")]
        assert HOSTILE not in page and "<script>document" not in page
        assert "&lt;script&gt;document.title=&quot;pwned&quot;&lt;/script&gt;" in page
        assert "&lt;b onmouseover" in page and "&amp;amp;" in page  # kind, memo, reason ...


def test_control_characters_and_huge_values_are_shown_safely() -> None:
    from tasktrail.replay.report.draw import text

    assert text("a\x1b[31mred\x00\r\nline") == "a\u241b[31mred\u2400\u240d\nline"
    shown = text("x" * 5000)
    assert len(shown) < 500 and "4600 more characters" in shown


def test_cli_report_writes_only_out(demo: Path, tmp_path: Path) -> None:
    out = tmp_path / "out" / "batch.html"
    out.parent.mkdir()
    before = sorted(os.listdir(demo.parent)), digest(demo)
    assert main(["report", str(demo), "batch-0002", "--out", str(out)]) == 0
    assert sorted(os.listdir(demo.parent)) == before[0] and digest(demo) == before[1]
    assert os.listdir(out.parent) == ["batch.html"]  # no temporary file left behind
    assert out.read_text().startswith("<!doctype html>")


@pytest.mark.parametrize("spelling", ["same", "dot", "symlink", "hardlink", "wal", "folder"])
def test_cli_report_refuses_an_out_that_is_the_store(
    tmp_path: Path, spelling: str, capsys: pytest.CaptureFixture[str]
) -> None:
    store = demo_store(tmp_path, tasks=30)
    os.chdir(tmp_path)
    wal = Path(f"{store}-wal")
    wal.write_bytes(b"")  # as SQLite may leave it beside a store
    out = {
        "same": str(store),
        "dot": f"./{store.name}",
        "symlink": str(tmp_path / "link.html"),
        "hardlink": str(tmp_path / "hard.html"),
        "wal": str(wal),
        "folder": str(tmp_path),
    }[spelling]
    if spelling == "symlink":
        Path(out).symlink_to(store)
    if spelling == "hardlink":
        os.link(store, out)
    before = digest(store), digest(wal)
    assert main(["report", str(store), "fragile-0001", "--out", out]) == 2
    error = capsys.readouterr().err
    assert "--out" in error and ("refusing to write over it" in error or "is a folder" in error)
    assert (digest(store), digest(wal)) == before


def test_cli_report_bad_input_is_exit_2_and_writes_nothing(
    demo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "r.html"
    assert main(["report", str(demo), "no-such-task", "--out", str(out)]) == 2
    assert "no-such-task" in capsys.readouterr().err
    assert main(["report", str(tmp_path / "absent.db"), "--out", str(out)]) == 2
    assert main(["report", str(demo), "--out", str(tmp_path / "nowhere" / "r.html")]) == 2
    assert not out.exists() and not (tmp_path / "absent.db").exists()
    with pytest.raises(UnknownTask):
        gather(demo, "no-such-task")


def test_a_failed_report_leaves_the_old_file_whole(
    demo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "r.html"
    out.write_text("the old report")
    out.chmod(0o640)
    import tasktrail.replay.report as report

    def broken(data: object) -> str:
        raise RuntimeError("the page could not be drawn")

    monkeypatch.setattr(report, "render", broken)
    with pytest.raises(RuntimeError):
        write_report(demo, out, "fragile-0001")
    assert out.read_text() == "the old report" and os.listdir(tmp_path) == ["r.html"]
    monkeypatch.undo()
    write_report(demo, out, "fragile-0001")
    assert "fragile-0001" in out.read_text() and (out.stat().st_mode & 0o777) == 0o640


def test_the_clock_axis_folds_long_idle_stretches_only() -> None:
    burst = [0.0, 10, 20, 30, 40, 50]
    later = [3_600_000 + t for t in burst]
    scale = Scale(0, later[-1], burst + later)
    assert scale.folds == [(50, 3_600_000)]
    xs = [scale.x(t) for t in burst + later]
    assert xs == sorted(xs) and xs[0] == 0 and xs[-1] == 100
    assert scale.x(3_600_000) - scale.x(50) <= 3.0  # an hour idle takes a narrow band
    assert scale.x(50) > 40  # ... and the bursts get the width
    steady = [i * 1000.0 for i in range(20)]
    assert Scale(0, steady[-1], steady).folds == []  # evenly spaced events never fold


def _overlaps(boxes: list[tuple[float, float]]) -> list[tuple[float, float]]:
    ordered = sorted(boxes)
    return [(a, b) for a, b in itertools.pairwise(ordered) if b[0] < a[1]]


@pytest.mark.parametrize("width", [600, 900, 1400])
def test_axis_labels_never_pile_up_where_folds_and_bursts_alternate(width: int) -> None:
    moments: list[float] = []
    for burst in range(14):  # short bursts between idle stretches of minutes to a day
        base = burst * 3_600_000 * (1 + burst % 3) + burst * 86_400_000 * (burst % 2)
        moments += [base + t for t in (0, 40, 90, 130)]
    scale = Scale(moments[0], moments[-1], moments)
    assert len(scale.folds) >= 10
    ticks, folds = scale.axis(width)
    boxes = [label_extent(tick_label(at - scale.start), x, width) for at, x in ticks]
    boxes += [
        (scale.x(a) / 100 * width, scale.x(b) / 100 * width) for a, b, shown in folds if shown
    ]
    assert _overlaps(boxes) == []
    assert len(ticks) >= 2 and len(folds) == len(scale.folds)  # every band is still drawn
