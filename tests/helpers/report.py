"""The report tests' demo store (tests/test_report.py, tests/test_report_output.py): a
fixture each module that uses it builds once."""

from __future__ import annotations

from pathlib import Path

import pytest

from helpers.report_stores import demo_store


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return demo_store(tmp_path_factory.mktemp("report-demo"))
