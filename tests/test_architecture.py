"""The layout's promises (issue 12, docs/architecture.md): rooms by concept, modules of
a few hundred lines, and imports that run one way."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
CODE = ("domain", "projections", "replay")
SUBDOMAINS = ("tasks", "turns", "runs", "schedules")
# What store/ and telemetry/ may read of a subdomain: its facts, never its rules.
FACT_MODULES = ("events", "state", "evolve")
MAX_LINES = 400
# The application's rooms (issue 41), each importing only those after it: the Scheduler
# and what runs phases use the service's commands and the commands; none uses the application.
# What runs an invocation's phases (issue 43) sits between the application and the service.
APPLICATION = ("app", "invoking", "service", "dispatch", "commands")
MAX_ROOM_LINES = 2_500
ROOMS_KEPT_WHOLE = {"domain/tasks", "domain/turns", "domain/store", "replay", "replay/cli"}
"""Rooms over MAX_ROOM_LINES, each with its reason in docs/architecture.md ("Rooms kept
whole")."""


def modules() -> list[Path]:
    return sorted(p for folder in CODE for p in (ROOT / folder).rglob("*.py"))


def dotted(path: Path) -> str:
    """``domain/turns/rules.py`` -> ``domain.turns.rules``."""
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imported(path: Path) -> set[str]:
    """Every module a file imports, TYPE_CHECKING blocks included, as dotted names under
    ``domain``/``projections``/``replay`` (absolute ``tasktrail.`` imports are mapped)."""
    tree = ast.parse(path.read_text(), str(path))
    package = dotted(path).split(".")
    if path.name != "__init__.py":
        package = package[:-1]
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - node.level + 1]
                target = ".".join([*base, node.module] if node.module else base)
                names = [target] + [f"{target}.{alias.name}" for alias in node.names]
            else:
                names = [node.module or ""]
                names += [f"{node.module}.{alias.name}" for alias in node.names]
            found.update(n.removeprefix("tasktrail.") for n in names)
        elif isinstance(node, ast.Import):
            found.update(alias.name.removeprefix("tasktrail.") for alias in node.names)
    return {n for n in found if n.split(".")[0] in CODE}


def room(name: str) -> str:
    """The room a dotted module name lives in: ``domain.turns.rules`` -> ``turns``."""
    parts = name.split(".")
    return parts[1] if parts[0] == "domain" and len(parts) > 1 else parts[0]


@pytest.mark.parametrize("path", modules(), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_module_is_at_most_400_lines(path: Path) -> None:
    lines = len(path.read_text().splitlines())
    assert lines <= MAX_LINES, f"{path.relative_to(ROOT)} has {lines} lines; split it by concept"


def test_domain_top_holds_at_most_eight_modules_and_the_rooms() -> None:
    top = sorted(p.name for p in (ROOT / "domain").glob("*.py"))
    assert len(top) <= 8, top
    rooms = {p.name for p in (ROOT / "domain").iterdir() if (p / "__init__.py").exists()}
    assert {"tasks", "turns", "runs", "app", "store", "telemetry", "demo"} <= rooms


@pytest.mark.parametrize("path", modules(), ids=lambda p: str(p.relative_to(ROOT)))
def test_imports_run_one_way(path: Path) -> None:
    """Subdomains never import the application, storage, telemetry or the demo; storage
    and telemetry import a subdomain's facts (events, state, evolve) but no rules; the
    domain imports neither projections nor replay."""
    here = dotted(path)
    mine = room(here)
    wrong = []
    for target in imported(path):
        theirs = room(target)
        if here.startswith("domain") and theirs in ("projections", "replay"):
            wrong.append(target)
        if mine in SUBDOMAINS and theirs in (*APPLICATION, "store", "telemetry", "demo"):
            wrong.append(target)
        if mine in APPLICATION and theirs in APPLICATION[: APPLICATION.index(mine)]:
            wrong.append(target)
        if mine in ("store", "telemetry") and theirs in SUBDOMAINS:
            module = target.split(".")[2] if target.count(".") >= 2 else ""
            if module not in FACT_MODULES:
                wrong.append(target)
    assert not wrong, f"{here} imports {sorted(set(wrong))} against docs/architecture.md"


def test_the_import_checker_sees_a_wrong_arrow(tmp_path: Path) -> None:
    """The checker itself can fail: a rule module importing the application is caught."""
    bad = ROOT / "domain" / "tasks" / "_probe_wrong_arrow.py"
    bad.write_text("from ..app import scheduler\n")
    try:
        with pytest.raises(AssertionError, match=r"domain\.app"):
            test_imports_run_one_way(bad)
    finally:
        bad.unlink()


def test_every_package_folder_is_installed() -> None:
    """A room missing from pyproject's package list works in an editable install and
    is missing from a wheel (``pip install .``): the README's first command fails."""
    import tomllib

    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    listed = set(config["packages"])
    folders = {
        "tasktrail." + dotted(p.parent / "__init__.py")
        for folder in CODE
        for p in (ROOT / folder).rglob("__init__.py")
    }
    assert folders - listed == set(), "add these to [tool.setuptools] packages"


def test_replay_and_the_cli_load_no_sqlite_utils() -> None:
    """sqlite-utils imports pandas and numpy wherever they are installed (the notebook
    extra): some 45 MB and a third of a second on every tool's start and in every
    replay's peak. Only what writes or queries a read-model file loads it."""
    import subprocess
    import sys

    probe = (
        "import sys, tasktrail.replay, tasktrail.replay.cli, tasktrail.projections\n"
        "from tasktrail.replay import replay\n"
        "loaded = sorted(m for m in ('sqlite_utils', 'pandas', 'numpy') if m in sys.modules)\n"
        "assert not loaded, loaded\n"
    )
    subprocess.run([sys.executable, "-c", probe], check=True, cwd=ROOT)


def test_the_console_is_imported_only_by_the_serve_command_when_it_runs() -> None:
    """Issue 46: the console's web stack (Starlette, uvicorn) is an extra. No module outside
    replay/console/ imports it, and the only module outside that imports the console is
    replay/cli/serve_command.py, inside its handler: every other command, and the serve
    command's parser, start without the extra."""
    console = ROOT / "replay" / "console"
    wrong = []
    for path in modules():
        if console in path.parents:
            continue
        tree = ast.parse(path.read_text(), str(path))
        top = {id(node) for node in tree.body}
        for node in ast.walk(tree):
            names: list[str] = []
            if isinstance(node, ast.ImportFrom):
                names = [node.module or ""]
            elif isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            for name in names:
                if name.split(".")[0] in ("starlette", "uvicorn"):
                    wrong.append(f"{path.relative_to(ROOT)} imports {name}")
                if "console" in name.split(".") and (
                    path != ROOT / "replay" / "cli" / "serve_command.py" or id(node) in top
                ):
                    wrong.append(f"{path.relative_to(ROOT)} imports {name}")
    assert wrong == []


def test_the_cli_loads_no_web_stack() -> None:
    """``tasktrail --help`` and every command but ``serve`` run without the console extra."""
    import subprocess
    import sys

    probe = (
        "import sys, tasktrail.replay.cli\n"
        "tasktrail.replay.cli.build_parser()\n"
        "loaded = sorted(m for m in ('starlette', 'uvicorn') if m in sys.modules)\n"
        "assert not loaded, loaded\n"
    )
    subprocess.run([sys.executable, "-c", probe], check=True, cwd=ROOT)


WORKER_MODULES = {
    "domain.app.worker",
    "domain.app.worker_loop",
    "domain.app.worker_reports",
    "domain.app.invocations",
    "domain.invoking.loop_invocations",
    "domain.invoking.threads",
}


def test_the_worker_drives_the_scheduler_and_the_scheduler_never_imports_the_worker() -> None:
    """Issue 27, item 7: the modules the Scheduler is made of (and what they import,
    all the way down) never import the worker's, not even for type checking."""
    seen: set[str] = set()
    todo = ["domain.app.scheduler"]
    by_name = {dotted(p): p for p in modules()}
    while todo:
        name = todo.pop()
        if name in seen or name not in by_name:
            continue
        seen.add(name)
        todo.extend(n for n in imported(by_name[name]) if n in by_name)
    assert seen & WORKER_MODULES == set(), sorted(seen & WORKER_MODULES)


def import_graph(paths: list[Path]) -> dict[str, set[str]]:
    """Each module's imports of the project's own modules, TYPE_CHECKING blocks and imports
    inside functions included (a circle is a knot whichever way it is tied). A name is
    resolved to the module that holds it: ``from .world import World`` -> ``domain.world``,
    ``from . import scenarios`` -> ``domain.demo.scenarios`` (not the package)."""
    by_name = {dotted(p): p for p in paths}
    graph: dict[str, set[str]] = {}
    for name, path in by_name.items():
        package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
        targets: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package[: len(package) - node.level + 1]
                    module = ".".join([*base, node.module] if node.module else base)
                else:
                    module = (node.module or "").removeprefix("tasktrail.")
                for alias in node.names:
                    whole = f"{module}.{alias.name}"
                    targets.add(whole if whole in by_name else module)
            elif isinstance(node, ast.Import):
                targets.update(alias.name.removeprefix("tasktrail.") for alias in node.names)
        graph[name] = {t for t in targets if t in by_name and t != name}
    return graph


def import_circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan's algorithm)."""
    order: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    circles: list[list[str]] = []

    def visit(node: str) -> None:
        order[node] = low[node] = len(order)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph[node]):
            if target not in order:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], order[target])
        if low[node] == order[node]:
            group = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                circles.append(sorted(group))

    for node in sorted(graph):
        if node not in order:
            visit(node)
    return circles


def test_no_module_imports_itself_through_others() -> None:
    """Issue 41: imports point down the layers; a registry several modules fill is filled
    by them, never read back from them (``hooks.py`` names the world, does not import it)."""
    assert import_circles(import_graph(modules())) == []


def test_the_circle_checker_sees_a_circle() -> None:
    """The checker itself can fail: two modules that import each other are one circle."""
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert import_circles(graph) == [["a", "b", "c"]]
    probe = ROOT / "domain" / "_probe_circle.py"
    probe.write_text("from .world import World\n")
    world = ROOT / "domain" / "world.py"
    try:
        graph = import_graph([*modules(), probe])
        graph["domain.world"].add("domain._probe_circle")  # as if world.py imported it back
        assert ["domain._probe_circle", "domain.world"] in import_circles(graph)
    finally:
        probe.unlink()
    assert world.exists()


def rooms() -> dict[str, int]:
    """Each room (a folder of modules) and the lines of its own modules."""
    folders = {p.parent for p in modules()}
    return {
        str(folder.relative_to(ROOT)): sum(
            len(p.read_text().splitlines()) for p in folder.glob("*.py")
        )
        for folder in folders
    }


def test_every_room_is_at_most_2500_lines_or_listed_with_its_reason() -> None:
    """Issue 41: a room over 2,500 lines is split where a concept stands apart, or listed in
    ROOMS_KEPT_WHOLE and in docs/architecture.md with the reason it stays whole."""
    sizes = rooms()
    over = {room: lines for room, lines in sizes.items() if lines > MAX_ROOM_LINES}
    assert set(over) <= ROOMS_KEPT_WHOLE, f"split these rooms by concept: {over}"
    documented = (ROOT / "docs" / "architecture.md").read_text()
    kept = documented.split("## Rooms kept whole", 1)[-1]
    for room in ROOMS_KEPT_WHOLE:
        assert f"`{room}/`" in kept, f"docs/architecture.md gives no reason {room}/ stays whole"


def test_the_room_checker_sees_a_wrong_arrow_between_the_applications_rooms() -> None:
    """A command module importing the application is caught."""
    bad = ROOT / "domain" / "commands" / "_probe_wrong_arrow.py"
    bad.write_text("from ..app import scheduler\n")
    try:
        with pytest.raises(AssertionError, match=r"domain\.app"):
            test_imports_run_one_way(bad)
    finally:
        bad.unlink()
