"""The notebooks run top to bottom on a store they make themselves (SPEC.md layout: CI runs them).

Each notebook is executed with nbclient in a fresh kernel; any cell that
raises (each notebook ends with ``assert``s on the story it tells) or writes an
error output fails the test. The packages come with the ``notebook`` extra,
which the ``test`` extra includes; without them the tests skip, saying so,
except under ``CI=true``, where they fail.
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import pytest

NOTEBOOKS = Path(__file__).resolve().parent.parent / "notebooks"
NEEDED = ("nbclient", "nbformat", "ipykernel", "pandas", "matplotlib")


def _missing() -> list[str]:
    return [name for name in NEEDED if importlib.util.find_spec(name) is None]


@pytest.fixture(autouse=True)
def _notebook_packages() -> None:
    missing = _missing()
    if not missing:
        return
    reason = f"the notebook extra is not installed (missing {', '.join(missing)})"
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"CI=true runs the notebooks: {reason}; pip install -e '.[test]'")
    pytest.skip(f"{reason}: pip install -e '.[notebook]'")


def test_there_are_the_three_notebooks() -> None:
    names = sorted(path.name for path in NOTEBOOKS.glob("*.ipynb"))
    assert names == [
        "01_audit_one_task.ipynb",
        "02_replay_an_incident.ipynb",
        "03_throughput_and_latency.ipynb",
    ]


@pytest.mark.slow  # a Jupyter kernel each, 7-16 s: the long profile's (CI runs it)
@pytest.mark.parametrize("name", sorted(path.name for path in NOTEBOOKS.glob("*.ipynb")))
def test_notebook_runs_without_errors(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import nbformat
    from nbclient import NotebookClient

    monkeypatch.setenv("TASKTRAIL_FIGURES", str(tmp_path / "figures"))  # not into the repo
    monkeypatch.setenv("MPLBACKEND", "Agg")
    notebook = nbformat.read(NOTEBOOKS / name, as_version=4)
    assert not any(cell.get("outputs") for cell in notebook.cells if cell.cell_type == "code"), (
        f"{name} is stored with outputs; clear them before committing"
    )
    client = NotebookClient(
        notebook,
        timeout=600,
        kernel_name="python3",
        resources={"metadata": {"path": str(tmp_path)}},
    )
    client.execute()  # raises CellExecutionError on the first cell that fails
    errors = [
        output
        for cell in notebook.cells
        if cell.cell_type == "code"
        for output in cell.get("outputs", [])
        if output.get("output_type") == "error"
    ]
    assert errors == []
    assert any(
        "image/png" in output.get("data", {})
        for cell in notebook.cells
        for output in cell.get("outputs", [])
    ) or name.startswith("01"), f"{name} drew no plot"
    if name.startswith("02"):
        assert (tmp_path / "figures" / "incident_timeline.png").stat().st_size > 10_000


# ─── what the notebooks rely on ─────────────────────────────────────────────


@pytest.fixture(scope="module")
def demo_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The demo workload, recorded once for these tests."""
    from tasktrail.domain.demo.workload import run_demo

    store = tmp_path_factory.mktemp("demo") / "demo.db"
    run_demo(store, 200, log=lambda line: None)
    return store


def test_frames_of_a_log(demo_store: Path) -> None:
    from tasktrail.replay import frames, replay

    state = replay(demo_store)
    events = frames.events(demo_store)
    assert len(events) == state.events and list(events.position) == sorted(events.position)
    at_time = events["at_time"]
    assert str(at_time.dtype).startswith("datetime64") and at_time.dt.tz is not None
    audit = frames.audit(state, "fragile-0001")
    assert list(audit.event_type).count("TaskRecovered") == 2
    assert frames.live(state).empty  # the demo ends with every task terminal
    assert len(frames.ledger(state)) == len(state.ledger)
    tasks = frames.tasks(state)
    assert len(tasks) == len(state.tasks) and set(tasks.status) == {"terminal"}
    spans = frames.phase_durations(demo_store)
    assert {"task_id", "kind", "phase", "outcome", "duration_ms", "start_time"} <= set(spans)
    assert (spans.outcome == "interrupted").sum() == 2


def test_frames_of_an_empty_selection_keep_their_columns(demo_store: Path) -> None:
    from tasktrail.replay import frames

    assert list(frames.events(demo_store, task="no-such-task").columns)[:3] == [
        "position",
        "task_id",
        "stream_id",
    ]


def test_states_render_as_html_tables(demo_store: Path) -> None:
    from tasktrail.replay import replay

    halfway = replay(demo_store, until=400)
    page = halfway._repr_html_()
    assert page.startswith("<div>") and "<table>" in page and "live tasks" in page
    assert f"as of position {halfway.position}" in page
    some_live = next(iter(halfway.live))
    assert some_live in page
    task = halfway.tasks[some_live]._repr_html_()
    assert task.startswith("<table>") and f"task {some_live}" in task
    crafted = halfway.tasks[some_live].__class__(
        id="<script>", kind="k", version=1, status="pending", checkpoint=None
    )
    assert "<script>" not in crafted._repr_html_()
