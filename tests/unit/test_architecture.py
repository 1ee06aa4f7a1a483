"""The package's shape, kept true: no import circle (type-checking imports included), no
module over 450 lines, and every module says what it is for in its docstring."""

from __future__ import annotations

import ast
from pathlib import Path

import grimp
import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "samzapy"
MAX_LINES = 450
MODULES = sorted(p for p in PACKAGE.rglob("*.py"))


def strongly_connected(edges: dict[str, set[str]]) -> list[list[str]]:
    """The groups of modules that import each other, directly or not (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[list[str]] = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        on_stack.add(module)
        for imported in sorted(edges[module]):
            if imported not in index:
                visit(imported)
                low[module] = min(low[module], low[imported])
            elif imported in on_stack:
                low[module] = min(low[module], index[imported])
        if low[module] == index[module]:
            group = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.append(member)
                if member == module:
                    break
            if len(group) > 1:
                groups.append(sorted(group))

    for module in sorted(edges):
        if module not in index:
            visit(module)
    return groups


def test_strongly_connected_finds_a_circle_and_ignores_a_line() -> None:
    circle = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert strongly_connected(circle) == [["a", "b", "c"]]
    assert strongly_connected({"a": {"b"}, "b": {"c"}, "c": set()}) == []


def test_no_import_circle_in_the_package() -> None:
    graph = grimp.build_graph("samzapy", exclude_type_checking_imports=False)
    edges = {m: set(graph.find_modules_directly_imported_by(m)) for m in graph.modules}
    assert strongly_connected(edges) == []


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_modules_are_short_and_say_what_they_are_for(path: Path) -> None:
    source = path.read_text()
    lines = source.count("\n")
    assert lines <= MAX_LINES, f"{path.name} has {lines} lines; split it (at most {MAX_LINES})"
    docstring = ast.get_docstring(ast.parse(source))
    assert docstring, f"{path} has no module docstring naming its responsibility"
