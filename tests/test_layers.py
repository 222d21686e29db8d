"""The package's floors (docs/design.md, "Which way the imports run"), checked on every import
read from the source: module-level, inside functions and under ``TYPE_CHECKING`` alike.

The floors are read from the design document's table, so the document and the check cannot
drift apart: a module missing from the table, an upward import or an import circle fails."""

from __future__ import annotations

import ast
import re
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "grpo_core"
DESIGN = ROOT / "docs" / "design.md"


def module_name(path: Path) -> str:
    """``grpo_core/widgets/group.py`` -> ``widgets.group``; a package's ``__init__`` is its
    own name (``grpo_core/__init__.py`` -> ``""``)."""
    parts = list(path.relative_to(PACKAGE).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def package_modules() -> dict[str, Path]:
    return {module_name(path): path for path in sorted(PACKAGE.rglob("*.py"))}


def imported_names(path: Path) -> Iterator[tuple[str, int]]:
    """Every absolute module name an import in ``path`` reaches, with its line: ``import a.b``
    gives ``a.b``; ``from a import b`` gives ``a`` and ``a.b`` (``b`` may be a module); a
    relative import is resolved against ``path``'s package."""
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, node.lineno
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                own = module_name(path).split(".")
                package = own if path.name == "__init__.py" else own[:-1]
                base = package[:len(package) - node.level + 1] if node.level > 1 else package
                source = ".".join(["grpo_core", *[p for p in base if p],
                                   *([node.module] if node.module else [])])
            else:
                source = node.module or ""
            yield source, node.lineno
            for alias in node.names:
                yield f"{source}.{alias.name}", node.lineno


def package_imports(path: Path, modules: dict[str, Path]) -> set[tuple[str, int]]:
    """The package modules ``path`` imports (the longest module each import names)."""
    found = set()
    for name, line in imported_names(path):
        if name != "grpo_core" and not name.startswith("grpo_core."):
            continue
        target = name.removeprefix("grpo_core").removeprefix(".")
        while target and target not in modules:
            target = target.rpartition(".")[0]
        if target and target != module_name(path):
            found.add((target, line))
    return found


def external_imports(path: Path) -> set[str]:
    """The top-level names of what ``path`` imports from outside the package."""
    return {name.split(".")[0] for name, _ in imported_names(path)
            if name.split(".")[0] not in ("grpo_core", "")}


def design_floors() -> dict[str, int]:
    """``{module pattern: floor number}`` from docs/design.md's floor table."""
    text = DESIGN.read_text()
    section = text[text.index("## Which way the imports run"):]
    floors: dict[str, int] = {}
    for number, cell in re.findall(r"^\| (\d+)\. [^|]+\| ([^|]+) \|", section, re.MULTILINE):
        for pattern in re.findall(r"`([\w.*]+)`", cell):
            floors[pattern] = int(number)
    return floors


def floor_of(module: str, floors: dict[str, int]) -> int | None:
    if module in floors:
        return floors[module]
    package = module.rpartition(".")[0]
    return floors.get(f"{package}.*") if package else None


MODULES = package_modules()
FLOORS = design_floors()
EDGES = {name: package_imports(path, MODULES) for name, path in MODULES.items()}


def test_the_design_table_names_every_module_once():
    assert len(FLOORS) >= 25
    placed = {name: floor_of(name, FLOORS) for name in MODULES if name}
    missing = sorted(name for name, floor in placed.items() if floor is None)
    assert not missing, f"modules missing from docs/design.md's floor table: {missing}"
    stale = sorted(p for p in FLOORS if p.removesuffix(".*") not in MODULES)
    assert not stale, f"docs/design.md's floor table names modules that do not exist: {stale}"


def test_no_module_imports_a_higher_floor():
    upward = [f"grpo_core/{MODULES[name].relative_to(PACKAGE)}:{line} imports {target} "
              f"(floor {floor_of(target, FLOORS)} above {floor_of(name, FLOORS)})"
              for name, targets in EDGES.items() if name
              for target, line in sorted(targets)
              if floor_of(target, FLOORS) > floor_of(name, FLOORS)]
    assert not upward, "upward imports:\n" + "\n".join(upward)


def find_cycle(edges: dict[str, set[str]]) -> list[str] | None:
    """One import circle as ``[a, b, ..., a]``, or None (depth-first search)."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for target in sorted(edges.get(node, ())):
            if state.get(target) == 1:
                return path[path.index(target):] + [target]
            if target not in state and (cycle := visit(target)):
                return cycle
        path.pop()
        state[node] = 2
        return None

    for node in sorted(edges):
        if node not in state and (cycle := visit(node)):
            return cycle
    return None


def test_the_import_graph_has_no_circle():
    graph = {name: {target for target, _ in targets} for name, targets in EDGES.items()}
    cycle = find_cycle(graph)
    assert cycle is None, "import circle: " + " -> ".join(cycle or [])


def test_the_cycle_finder_sees_a_circle_through_a_function_level_import(tmp_path):
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set(), "c": {"a", "b"}}) is None
    source = tmp_path / "m.py"
    source.write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                      "    from grpo_core.loop import x\n"
                      "def f():\n    from grpo_core import rewards\n")
    assert {name for name, _ in imported_names(source)} >= {
        "grpo_core.loop", "grpo_core.rewards", "grpo_core"}


MATH = [name for name in MODULES if floor_of(name, FLOORS) == 2]
SANDBOX = [name for name in MODULES if floor_of(name, FLOORS) == 3]


@pytest.mark.parametrize("name", MATH)
def test_the_update_math_imports_only_torch_and_itself(name):
    outside = external_imports(MODULES[name]) - set(sys.stdlib_module_names) - {"torch"}
    assert not outside, f"{name} imports {sorted(outside)}"
    assert all(floor_of(target, FLOORS) == 2 for target, _ in EDGES[name])


@pytest.mark.parametrize("name", SANDBOX)
def test_the_sandbox_imports_only_the_standard_library_and_itself(name):
    outside = external_imports(MODULES[name]) - set(sys.stdlib_module_names)
    assert not outside, f"{name} imports {sorted(outside)}"
    assert all(floor_of(target, FLOORS) == 3 for target, _ in EDGES[name])


@pytest.mark.parametrize("name", ["stats", "findings", "run_files", "rewards"])
def test_the_foundations_and_rewards_import_no_torch(name):
    assert "torch" not in external_imports(MODULES[name])
    if name in ("stats", "findings"):
        assert not EDGES[name], f"{name} imports {EDGES[name]}"


def test_nothing_imports_the_course_content_and_the_package_never_imports_trl():
    content = {name for name in MODULES if floor_of(name, FLOORS) == 9}
    assert content == {"exercises", "gallery"}
    users = sorted(f"{name} -> {target}" for name, targets in EDGES.items()
                   for target, _ in targets if target in content)
    assert not users, f"course content imported by the package: {users}"
    assert not [name for name, path in MODULES.items() if "trl" in external_imports(path)]
