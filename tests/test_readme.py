"""The README's tour and every docs/*.md page's code run as written, and README's
command list is the parser's own."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tasktrail.domain.demo.workload import MIN_TASKS
from tasktrail.replay.cli.synopsis import synopsis

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
DOCS = sorted((ROOT / "docs").glob("*.md"))


def python_blocks(page: Path) -> list[str]:
    """The page's ```python blocks, in order."""
    return re.findall(r"```python\n(.*?)```", page.read_text(), flags=re.S)


def run_blocks(page: Path) -> dict[str, object]:
    """Run a page's python blocks in order, in one namespace, as a reader pastes them."""
    namespace: dict[str, object] = {"__name__": "__main__"}
    for number, block in enumerate(python_blocks(page), start=1):
        try:
            exec(compile(block, f"{page.name} (python block {number})", "exec"), namespace)
        except Exception as error:
            pytest.fail(f"{page.name}: python block {number} fails as written: {error!r}")
    return namespace


def test_readme_python_blocks_run_in_order(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert len(python_blocks(README)) >= 3
    monkeypatch.chdir(tmp_path)
    namespace = run_blocks(README)
    scheduler = namespace["s"]
    assert scheduler.task(namespace["tid"]).outcome.status == "failed"  # type: ignore[attr-defined]


@pytest.mark.parametrize("page", [p for p in DOCS if python_blocks(p)], ids=lambda p: p.name)
def test_docs_python_blocks_run_in_order(
    page: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    run_blocks(page)


def test_observability_blocks_do_what_they_say(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    namespace = run_blocks(ROOT / "docs" / "observability.md")
    assert namespace["s"].task(namespace["tid"]).status == "terminal"  # type: ignore[attr-defined]
    exported = namespace["exporter"].get_finished_spans()  # type: ignore[attr-defined]
    assert len(exported) == len(namespace["phase_spans"]("tasktrail-demo.db"))  # type: ignore[operator]
    assert (tmp_path / "fragile.json").stat().st_size > 0
    assert namespace["document"]["resourceSpans"]  # type: ignore[index]


def test_readme_command_list_is_the_parsers() -> None:
    text = README.read_text()
    block = re.search(r"## Command line\n\n```\n(.*?)```", text, flags=re.S)
    assert block is not None
    expected = "\n".join(synopsis())
    assert block.group(1).strip() == expected, (
        "README's command list differs from the parser; paste this "
        f"(python -m tasktrail.replay.cli.synopsis):\n{expected}"
    )
    # The demo's lower bound, said the same way in README and --help.
    assert f"needs at least {MIN_TASKS} tasks" in " ".join(text.split())


def test_readme_opens_with_the_two_set_up_commands() -> None:
    text = README.read_text()
    commands = re.search(r"```sh\n(.*?)```", text, flags=re.S)
    assert commands is not None
    lines = commands.group(1).strip().splitlines()
    assert len(lines) == 2
    assert lines[0].endswith("tasktrail demo")
    ci = (README.parent / ".ci" / "run").read_text()
    assert lines[1] in ci  # CI runs the README's test command, copied
