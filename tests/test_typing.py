"""Types are part of the contract (issue 12): ``mypy --strict`` over ``tasktrail.domain``,
``tasktrail.projections`` and ``tasktrail.replay`` (pyproject's [tool.mypy]) finds nothing."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


# A cold mypy over the three packages is 46 s of one core (a seventh of the default run's
# CPU on 2 cores): it runs in the long profile, which CI's run (.ci/run) runs too.
@pytest.mark.slow
def test_mypy_strict_is_clean_over_the_three_packages(tmp_path: Path) -> None:
    if shutil.which("mypy", path=str(Path(sys.executable).parent)) is None:
        pytest.skip("mypy is not installed here: pip install -e '.[test]'")
    result = subprocess.run(
        [sys.executable, "-m", "mypy", "--cache-dir", str(tmp_path / "mypy-cache")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    assert "Success" in result.stdout
