"""The README is a way in: its two set-up commands, its quickstart run as written (a
module, a worker process, a submit, a report), at most 250 lines. Every docs/*.md page's
code runs as written, docs/commands.md's command list is the parser's own, docs/rules.md
numbers every rule the code cites, and the pages' links lead somewhere."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tasktrail.domain.demo.workload import MIN_TASKS
from tasktrail.replay import explain, replay
from tasktrail.replay.cli.synopsis import synopsis

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
DOCS = sorted((ROOT / "docs").glob("*.md"))
TIMEOUT_S = 60.0
"""How long the quickstart's worker may take to end its task (a bound, not a measure)."""


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
    monkeypatch.chdir(tmp_path)
    namespace = run_blocks(README)
    assert "registry" in namespace
    (task,) = replay(tmp_path / "trail.db").world.tasks.values()  # submit.py's, no worker
    assert (task.kind, task.status) == ("digest", "pending")


@pytest.mark.parametrize("page", [p for p in DOCS if python_blocks(p)], ids=lambda p: p.name)
def test_docs_python_blocks_run_in_order(
    page: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    run_blocks(page)


def test_concepts_blocks_do_what_they_say(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    namespace = run_blocks(ROOT / "docs" / "concepts.md")
    state = replay(tmp_path / "trail.db")
    outcome = state.world.tasks[namespace["tid"]].outcome  # type: ignore[index]
    assert outcome is not None and (outcome.status, outcome.message) == ("failed", "503")
    kinds = {t.kind for t in state.world.tasks.values()}
    assert kinds == {
        "research",
        "search",
        "approval",
        "survey",
        "answer",
        "shout",
        "refund",
        "summary",
        "chat",
    }
    talk = state.world.tasks[namespace["talk"]]  # type: ignore[index]
    assert (talk.streams["out"].chunks, talk.streams["out"].closed) == (6, True)
    assert list(namespace["s"].read_stream(talk.id, after=2)) == [  # type: ignore[attr-defined]
        (3, "FROM"),
        (4, "AN"),
        (5, "OFFSET"),
    ]
    summary = state.world.tasks[namespace["sid"]].outcome  # type: ignore[index]
    assert summary is not None and summary.result == "three searches, one answer"
    calls = namespace["calls"]  # flow control (rules 33-35): held back, then run
    assert all(state.world.tasks[t].status == "terminal" for t in calls)  # type: ignore[attr-defined]
    debounced = state.world.tasks[namespace["first"]]  # type: ignore[index]
    assert debounced.status == "sleeping" and debounced.memos["rev"] == 2
    approval = state.world.tasks[namespace["pr"]].outcome  # type: ignore[index]
    assert approval is not None and approval.status == "completed"  # its message came
    assert namespace["outcome"].result == {"answers": ["completed", "completed"]}  # type: ignore[attr-defined]
    answer = state.world.tasks[namespace["answer"]]  # type: ignore[index]
    assert answer.outcome is not None and answer.outcome.status == "completed"


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


def test_the_command_list_is_the_parsers() -> None:
    text = (ROOT / "docs" / "commands.md").read_text()
    block = re.search(r"## Every command\n\n```\n(.*?)```", text, flags=re.S)
    assert block is not None
    expected = "\n".join(synopsis())
    assert block.group(1).strip() == expected, (
        "docs/commands.md's command list differs from the parser; paste this "
        f"(python -m tasktrail.replay.cli.synopsis):\n{expected}"
    )
    # The demo's lower bound, said the same way in the docs and --help.
    assert f"needs at least {MIN_TASKS} tasks" in " ".join(text.split())


def test_the_readmes_everyday_commands_are_commands() -> None:
    block = re.search(r"## Everyday commands\n\n```sh\n(.*?)```", README.read_text(), flags=re.S)
    assert block is not None
    known = {line.split()[1] for line in synopsis()}
    used = [line.split()[1] for line in block.group(1).strip().splitlines()]
    assert used and set(used) <= known


def test_readme_opens_with_the_two_set_up_commands() -> None:
    text = README.read_text()
    commands = re.search(r"```sh\n(.*?)```", text, flags=re.S)
    assert commands is not None
    assert text.index("```") == commands.start()  # the first block of the page
    lines = commands.group(1).strip().splitlines()
    assert len(lines) == 2
    assert lines[0].endswith("tasktrail demo")
    ci = (README.parent / ".ci" / "run").read_text()
    assert lines[1] in ci  # CI runs the README's test command, copied


def test_readme_is_a_way_in() -> None:
    lines = README.read_text().splitlines()
    assert len(lines) <= 250
    shot = next(n for n, line in enumerate(lines) if line.startswith("![") and "report.png" in line)
    assert shot < 30 and (ROOT / "docs" / "report.png").read_bytes().startswith(b"\x89PNG")
    headings = [line for line in lines if line.startswith("## ")]
    for needed in ("## Install", "## Quickstart", "## Everyday commands", "## Learn more"):
        assert needed in headings
    # The seed schedulers are named only where the project says what they are.
    for page in [README, *DOCS]:
        text = page.read_text()
        if page.name not in ("rules.md", "seed-fidelity.md") and re.search(
            r"\b(yui|pi-durable)\b", text
        ):
            assert "rules.md" in text, f"{page.name} names a seed scheduler without rules.md"


def test_the_license_is_the_one_pyproject_names() -> None:
    license_text = (ROOT / "LICENSE").read_text()
    assert license_text.startswith("MIT License\n")
    assert "Copyright (c) 2026 the tasktrail authors" in license_text
    assert 'license = { text = "MIT" }' in (ROOT / "pyproject.toml").read_text()


def cited_rule_numbers() -> set[int]:
    """Every numbered rule the code raises or records, and the tests name."""
    numbers: set[int] = set()
    for folder in ("domain", "projections", "replay"):
        for source in (ROOT / folder).rglob("*.py"):
            text = source.read_text()
            numbers |= {int(n) for n in re.findall(r"RuleViolation\(\s*(\d+)\s*,", text)}
            numbers |= {int(n) for n in re.findall(r"\brule=(\d+)\b", text)}
    for test in (ROOT / "tests").glob("test_*.py"):
        numbers |= {int(n) for n in re.findall(r"def test_rule_(\d+)_", test.read_text())}
    return numbers


def test_rules_page_states_every_rule_the_code_cites() -> None:
    text = (ROOT / "docs" / "rules.md").read_text()
    stated = [int(n) for n in re.findall(r"^### Rule (\d+): ", text, flags=re.M)]
    assert stated[:15] == list(range(1, 16))  # SPEC section 1's rules, in order
    assert stated == sorted(set(stated))  # then those of later issues, in order, each once
    cited = cited_rule_numbers()
    assert {1, 2, 3, 4, 5, 6, 7, 8, 9, 12, 13} <= cited  # the scan finds what it should
    assert cited <= set(stated)
    named = set()
    for source in (ROOT / "domain" / "turns").glob("*.py"):
        named |= set(
            re.findall(r'TurnRuleViolation\(\s*"([a-z_]+\.[a-z_]+)"', source.read_text(), re.S)
        )
    assert len(named) >= 7
    missing = sorted(name for name in named if f"`{name}`" not in text)
    assert missing == [], f"docs/rules.md does not state {missing}"
    for scheduler in ("pi-durable", "yui", "dispatcher"):
        assert f"**{scheduler}** is a" in text  # said what it is, where it is named


def test_links_between_pages_lead_somewhere() -> None:
    broken = []
    for page in [README, *DOCS, ROOT / "notebooks" / "README.md"]:
        for target in re.findall(r"\]\(([^)\s]+)\)", page.read_text()):
            if "://" in target or target.startswith("#"):
                continue
            path = (page.parent / target.split("#", 1)[0]).resolve()
            if not path.exists():
                broken.append(f"{page.relative_to(ROOT)} -> {target}")
    assert broken == []


# ─── the quickstart, as written ─────────────────────────────────────────────


def quickstart() -> tuple[dict[str, str], list[str]]:
    """The quickstart's files (a python block whose first line is ``# NAME.py``) and the
    commands of its shell block, comments dropped."""
    text = README.read_text()
    section = text[text.index("## Quickstart") : text.index("## Everyday commands")]
    files = {}
    for block in re.findall(r"```python\n(.*?)```", section, flags=re.S):
        name = re.match(r"# (\w+\.py)\b", block)
        assert name is not None, "a quickstart python block names its file on its first line"
        files[name.group(1)] = block
    (shell,) = re.findall(r"```sh\n(.*?)```", section, flags=re.S)
    commands = [line.split("  #", 1)[0].strip() for line in shell.strip().splitlines()]
    return files, commands


def program(word: str) -> str:
    """The installed program a quickstart command names: this environment's."""
    if word == "python":
        return sys.executable
    found = Path(sys.executable).with_name(word)
    return str(found) if found.exists() else shutil.which(word) or word


def wait_for_the_task_to_end(store: Path, task_id: str) -> None:
    deadline = time.monotonic() + TIMEOUT_S
    while time.monotonic() < deadline:
        task = replay(store).world.tasks.get(task_id)
        if task is not None and task.status == "terminal":
            return
        time.sleep(0.1)
    pytest.fail(f"the quickstart's worker did not end {task_id} in {TIMEOUT_S} s")


def test_the_quickstart_runs_as_written_in_a_fresh_folder(tmp_path: Path) -> None:
    files, commands = quickstart()
    assert set(files) == {"hello.py", "submit.py"}
    for name, body in files.items():
        (tmp_path / name).write_text(body)
    assert [c.split()[-1] if c.endswith("&") else c.split()[0] for c in commands] == [
        "&",
        "python",
        "tasktrail",
        "kill",
        "tasktrail",
    ]
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    worker: subprocess.Popen[str] | None = None
    task_id = ""
    outputs: list[str] = []
    try:
        for command in commands:
            words = shlex.split(command.removesuffix("&"))
            extra = {}
            while "=" in words[0]:  # VAR=value before the program
                name, _, value = words.pop(0).partition("=")
                extra[name] = value
            if words[0] == "kill":
                assert worker is not None and words[1:] == ["%1"]
                worker.send_signal(signal.SIGTERM)
                log, _ = worker.communicate(timeout=TIMEOUT_S)
                assert worker.returncode == 0, log
                assert "signal SIGTERM: closing" in log
                continue
            words[0] = program(words[0])
            if command.endswith("&"):
                worker = subprocess.Popen(
                    words,
                    cwd=tmp_path,
                    env={**env, **extra},
                    stdout=subprocess.PIPE,
                    stderr=subprocess.STDOUT,
                    text=True,
                )
                continue
            if "tasks" in words:  # the worker ends the task in its own time: wait for it
                wait_for_the_task_to_end(tmp_path / "trail.db", task_id)
            done = subprocess.run(
                words, cwd=tmp_path, env={**env, **extra}, capture_output=True, text=True
            )
            assert done.returncode == 0, f"{command}: {done.stderr}"
            outputs.append(done.stdout)
            if words[-1] == "submit.py":
                task_id = done.stdout.strip()
    finally:
        if worker is not None and worker.poll() is None:
            worker.kill()
            worker.wait()
    assert task_id and task_id.split() == [task_id]
    listed = outputs[1].split()
    assert listed[listed.index(task_id) + 1 :][:3] == ["digest", "terminal", "completed"]
    page = (tmp_path / "report.html").read_text()
    assert task_id in page and "all 1 task drawn" in page
    steps = [step.event_type for step in explain(tmp_path / "trail.db", task_id)]
    assert steps[0] == "TaskSubmitted" and steps[-1] == "TaskEnded"
    assert "MemoRecorded" in steps  # the phases ran in the worker process, as written
