"""The README's tour runs as written."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parent.parent / "README.md"


def test_readme_python_blocks_run_in_order(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)
    assert len(blocks) >= 3
    monkeypatch.chdir(tmp_path)
    namespace: dict[str, object] = {}
    for block in blocks:
        exec(compile(block, str(README), "exec"), namespace)
    scheduler = namespace["s"]
    assert scheduler.task(namespace["tid"]).outcome.status == "failed"  # type: ignore[attr-defined]


def test_readme_opens_with_the_two_set_up_commands() -> None:
    text = README.read_text()
    commands = re.search(r"```sh\n(.*?)```", text, flags=re.S)
    assert commands is not None
    lines = commands.group(1).strip().splitlines()
    assert len(lines) == 2
    assert lines[0].endswith("tasktrail demo")
    ci = (README.parent / ".ci" / "run").read_text()
    assert lines[1] in ci  # CI runs the README's test command, copied
