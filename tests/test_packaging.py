"""``tasktrail`` is a package of its own (``tasktrail/``: ``__version__`` and
``__main__``) above the three folders that install as its subpackages through
pyproject's ``package-dir``. ``python -m tasktrail`` and ``tasktrail.__version__``
work in the editable install the tests run in and in the layout a normal install
(a wheel) lays down, built here by setuptools itself from pyproject."""

from __future__ import annotations

import os
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PROBE = (
    "import tasktrail, tasktrail.domain, tasktrail.replay.cli\n"
    "print(tasktrail.__version__)\n"
    "print(tasktrail.__file__)\n"
    "print(tasktrail.domain.__file__)\n"
)


def python(args: list[str], cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *args],
        cwd=cwd,
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_python_m_tasktrail_runs_the_command_line(tmp_path: Path) -> None:
    """From a folder that is not the source tree: the installed package, not the cwd."""
    shown = python(["-m", "tasktrail", "--version"], tmp_path)
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout == f"tasktrail {version('tasktrail')}\n"
    missing = python(["-m", "tasktrail", "tasks", str(tmp_path / "nope.db")], tmp_path)
    assert missing.returncode == 2 and "no store at" in missing.stderr
    assert list(tmp_path.iterdir()) == []


def test_the_editable_install_imports_the_source_tree(tmp_path: Path) -> None:
    probe = python(["-c", PROBE], tmp_path)
    assert probe.returncode == 0, probe.stderr
    shown, package, domain = probe.stdout.splitlines()
    assert shown == version("tasktrail")
    assert Path(package) == ROOT / "tasktrail" / "__init__.py"
    assert Path(domain) == ROOT / "domain" / "__init__.py"


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """What a wheel holds: setuptools' build of the packages pyproject lists."""
    out = tmp_path_factory.mktemp("build")
    made = python(
        ["-c", "from setuptools import setup; setup()", "-q", "build", "--build-base", str(out)],
        ROOT,
    )
    assert made.returncode == 0, made.stderr
    return out / "lib"


def test_a_normal_install_holds_the_package_and_its_subpackages(built: Path) -> None:
    assert (built / "tasktrail" / "__init__.py").is_file()
    assert (built / "tasktrail" / "__main__.py").is_file()
    assert (built / "tasktrail" / "domain" / "app" / "worker_setup.py").is_file()
    assert (built / "tasktrail" / "replay" / "cli" / "runs_command.py").is_file()


def test_a_normal_install_imports_and_runs_as_a_module(built: Path, tmp_path: Path) -> None:
    probe = python(["-c", PROBE], tmp_path, PYTHONPATH=str(built))
    assert probe.returncode == 0, probe.stderr
    shown, package, domain = probe.stdout.splitlines()
    assert shown == version("tasktrail")
    assert Path(package) == built / "tasktrail" / "__init__.py"  # the built copy, not the tree
    assert Path(domain) == built / "tasktrail" / "domain" / "__init__.py"
    ran = python(["-m", "tasktrail", "--version"], tmp_path, PYTHONPATH=str(built))
    assert ran.returncode == 0 and ran.stdout == f"tasktrail {version('tasktrail')}\n"


def test_an_install_made_before_the_top_package_still_runs(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """An editable install made before ``tasktrail/`` existed imports ``tasktrail`` as a
    bare namespace: the command line still runs, and --version says to install again."""
    import types

    from tasktrail.replay.cli import main

    monkeypatch.setitem(sys.modules, "tasktrail", types.ModuleType("tasktrail"))
    with pytest.raises(SystemExit) as exited:
        main(["--version"])
    assert exited.value.code == 0
    assert "install again: pip install -e ." in capsys.readouterr().out
