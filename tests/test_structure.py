"""The shape of the code, checked: what ARCHITECTURE.md promises about the layout holds for every module.

* **Imports flow one way.** The import graph of ``src/tether`` (every import: at the top of a module, inside a
  function, under ``TYPE_CHECKING``) has no circle between modules, and none between the rooms of any package
  (its modules and sub-packages, each taken whole): a lazy import is allowed only where it points down.
* **Small parts.** No module passes 600 lines; no function of the hot path (``loop/``, ``providers/http/``)
  passes 60.
* **The map is whole.** ARCHITECTURE.md names every module under ``src/tether``.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "src" / "tether"
MAX_MODULE_LINES = 600
MAX_FUNCTION_LINES = 60
HOT_PATH = ("loop", "providers/http")


def modules() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


@cache
def names_to_paths() -> dict[str, Path]:
    return {module_name(path): path for path in modules()}


def imported_modules(path: Path) -> Iterator[str]:
    """Every tether module ``path`` imports, wherever the import stands: ``from P import name`` names the module
    ``P.name`` when there is one (a submodule), else ``P``."""
    known = names_to_paths()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "tether":
                    yield alias.name
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "tether":
            for alias in node.names:
                submodule = f"{node.module}.{alias.name}"
                yield submodule if submodule in known else node.module


@cache
def import_graph() -> dict[str, frozenset[str]]:
    """Module -> the tether modules it imports (itself left out)."""
    known = names_to_paths()
    graph = {}
    for name, path in known.items():
        targets = {target for target in imported_modules(path) if target in known and target != name}
        graph[name] = frozenset(targets)
    return graph


def find_circle(graph: dict[str, frozenset[str]]) -> list[str] | None:
    """One circle of ``graph`` (its nodes in order, the first repeated at the end), or ``None`` when it has none."""
    state: dict[str, int] = {}  # 1: on the path being walked, 2: done
    for start in sorted(graph):
        if state.get(start):
            continue
        path = [start]
        walks = [iter(sorted(graph[start]))]
        state[start] = 1
        while walks:
            target = next(walks[-1], None)
            if target is None:
                state[path.pop()] = 2
                walks.pop()
            elif state.get(target) == 1:
                return [*path[path.index(target) :], target]
            elif not state.get(target):
                state[target] = 1
                path.append(target)
                walks.append(iter(sorted(graph.get(target, ()))))
    return None


def packages() -> list[str]:
    return sorted(name for name, path in names_to_paths().items() if path.name == "__init__.py")


def room_graph(package: str) -> dict[str, frozenset[str]]:
    """The rooms of ``package`` (its modules and sub-packages, each taken whole) -> the rooms they import. An
    import of the package's own face (its ``__init__``) from inside it is an arrow to the room ``__init__``."""

    def room(module: str) -> str | None:
        if module == package:
            return f"{package}.__init__"
        if not module.startswith(package + "."):
            return None
        return f"{package}.{module[len(package) + 1 :].split('.')[0]}"

    graph: dict[str, set[str]] = {}
    for module, targets in import_graph().items():
        source = room(module)
        if source is None:
            continue
        arrows = graph.setdefault(source, set())
        arrows.update(target for target in map(room, targets) if target is not None and target != source)
    return {name: frozenset(targets) for name, targets in graph.items()}


def test_no_module_imports_a_module_that_imports_it_back() -> None:
    circle = find_circle(import_graph())
    assert circle is None, "an import circle: " + " -> ".join(circle or ())


@pytest.mark.parametrize("package", packages())
def test_the_rooms_of_every_package_import_one_way(package: str) -> None:
    circle = find_circle(room_graph(package))
    assert circle is None, f"the rooms of {package} import each other in a circle: " + " -> ".join(circle or ())


def test_no_module_passes_600_lines() -> None:
    long = {
        str(p.relative_to(PACKAGE)): n for p in modules() if (n := len(p.read_text().splitlines())) > MAX_MODULE_LINES
    }
    assert long == {}


def functions(path: Path) -> Iterator[tuple[str, int]]:
    """``(qualified name, lines)`` of every function and method defined in ``path``."""
    tree = ast.parse(path.read_text(), str(path))

    def walk(node: ast.AST, prefix: str) -> Iterator[tuple[str, int]]:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                name = f"{prefix}{child.name}"
                yield name, (child.end_lineno or child.lineno) - child.lineno + 1
                yield from walk(child, name + ".")
            elif isinstance(child, ast.ClassDef):
                yield from walk(child, f"{prefix}{child.name}.")

    yield from walk(tree, "")


def test_no_function_of_the_hot_path_passes_60_lines() -> None:
    long = {
        f"{path.relative_to(PACKAGE)}:{name}": lines
        for folder in HOT_PATH
        for path in sorted((PACKAGE / folder).rglob("*.py"))
        for name, lines in functions(path)
        if lines > MAX_FUNCTION_LINES
    }
    assert long == {}


def test_the_architecture_map_names_every_module() -> None:
    text = (ROOT / "ARCHITECTURE.md").read_text()
    unnamed = [
        str(path.relative_to(PACKAGE))
        for path in modules()
        if path.name != "__init__.py" and str(path.relative_to(PACKAGE)) not in text
    ]
    assert unnamed == [], "ARCHITECTURE.md does not name these modules (by their path under src/tether/)"


# --- the checks check: each finds what it looks for ---------------------------------------------------------


def test_a_circle_is_found_and_a_one_way_graph_has_none() -> None:
    assert find_circle({"a": frozenset({"b"}), "b": frozenset({"c"}), "c": frozenset({"a"})}) == ["a", "b", "c", "a"]
    assert find_circle({"a": frozenset({"b", "c"}), "b": frozenset({"c"}), "c": frozenset()}) is None


def test_an_import_inside_a_function_or_under_type_checking_is_an_arrow(tmp_path: Path) -> None:
    source = tmp_path / "m.py"
    source.write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from tether.errors import TetherError\n"
        "def f():\n    from tether.loop import engine\n    import tether.usage\n"
    )
    assert sorted(imported_modules(source)) == ["tether.errors", "tether.loop.engine", "tether.usage"]
