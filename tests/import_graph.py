"""Ember's import graph, read from the source with `ast` (nothing is imported or run).

Every `import` counts wherever it is written (module top, function body, try block), except the
ones under `if TYPE_CHECKING:`, which never run. `python -m tests.import_graph` prints the layer
violations and the cycles, the same report the structure test fails with.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
# source folder -> the package it installs as (pyproject's [tool.setuptools.package-dir])
FOLDERS = {"ember": "ember", "app": "ember.app", "engine": "ember.engine",
           "models": "ember.models", "tui": "ember.tui"}


@dataclass(frozen=True)
class Edge:
    """`source` imports `target`, written at `path`:`line`."""

    source: str
    target: str
    path: str
    line: int

    def __str__(self) -> str:
        return f"{self.source} -> {self.target}  ({self.path}:{self.line})"


def module_files(repo: Path = REPO) -> dict[str, Path]:
    """Module name -> file, for every .py under the source folders."""
    found: dict[str, Path] = {}
    for folder, package in FOLDERS.items():
        for path in sorted((repo / folder).rglob("*.py")):
            parts = list(path.relative_to(repo / folder).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join([package, *parts])] = path
    return found


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(tree: ast.AST) -> Iterator[ast.Import | ast.ImportFrom]:
    """Every import statement that can run: `if TYPE_CHECKING:` bodies skipped (not their else)."""
    stack: list[ast.AST] = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node
            continue
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            stack.extend(node.orelse)
            continue
        stack.extend(ast.iter_child_nodes(node))


def _package_of(module: str, path: Path) -> str:
    return module if path.name == "__init__.py" else module.rpartition(".")[0]


def _targets(node: ast.Import | ast.ImportFrom, module: str, path: Path) -> Iterator[str]:
    """The ember modules an import statement names (`from pkg import name` names pkg.name when
    that is a module, else pkg)."""
    if isinstance(node, ast.Import):
        yield from (alias.name for alias in node.names)
        return
    base = node.module or ""
    if node.level:
        package = _package_of(module, path)
        for _ in range(node.level - 1):
            package = package.rpartition(".")[0]
        base = f"{package}.{base}" if base else package
    yield base
    yield from (f"{base}.{alias.name}" for alias in node.names)


def edges(repo: Path = REPO) -> list[Edge]:
    """Every import from one Ember module to another."""
    files = module_files(repo)
    found: list[Edge] = []
    for module, path in files.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        for node in _imports(tree):
            names = [t for t in _targets(node, module, path) if t in files]
            # `from pkg import mod` names pkg too; count the most specific module only
            for target in {n for n in names if not any(o.startswith(n + ".") for o in names)}:
                if target != module:
                    rel = str(path.relative_to(repo))
                    found.append(Edge(module, target, rel, node.lineno))
    return sorted(found, key=lambda e: (e.source, e.target, e.line))


def cycles(found: list[Edge]) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan), each as a list of names."""
    graph: dict[str, set[str]] = {}
    for edge in found:
        graph.setdefault(edge.source, set()).add(edge.target)
        graph.setdefault(edge.target, set())
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[list[str]] = []

    def visit(start: str) -> None:  # iterative: the graph is deep enough to worry recursion
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                group: list[str] = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    group.append(member)
                    if member == node:
                        break
                if len(group) > 1:
                    groups.append(sorted(group))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return groups


def cycle_path(group: list[str], found: list[Edge]) -> list[Edge]:
    """One concrete loop through a strongly connected group, as the edges that close it."""
    members = set(group)
    out: dict[str, list[Edge]] = {}
    for edge in found:
        if edge.source in members and edge.target in members:
            out.setdefault(edge.source, []).append(edge)
    start = group[0]
    # breadth-first from start back to start
    previous: dict[str, Edge] = {}
    frontier = [start]
    while frontier:
        following: list[str] = []
        for node in frontier:
            for edge in out.get(node, []):
                if edge.target == start:
                    path = [edge]
                    while path[0].source != start:
                        path.insert(0, previous[path[0].source])
                    return path
                if edge.target not in previous:
                    previous[edge.target] = edge
                    following.append(edge.target)
        frontier = following
    return []


# --- the layers -------------------------------------------------------------------------------

BASE = {"ember", "ember.errors", "ember.paths", "ember.text", "ember.user_files"}  # for everybody
ENTRY = {"ember.__main__", "ember.cli", "ember.cli_reference"}  # the composition root: sees all


def layer(module: str) -> str:
    if module in BASE:
        return "base"
    if module in ENTRY:
        return "entry"
    return module.split(".")[1]


# who may import whom; the TUI is narrower still (see `tui_may_import`)
ALLOWED = {
    "base": {"base"},
    "models": {"base", "models"},
    "engine": {"base", "engine", "models"},
    "app": {"base", "app", "engine", "models"},
    "tui": {"base", "tui", "app", "engine"},
    "entry": {"base", "entry", "app", "engine", "models", "tui"},
}


def tui_may_import(target: str) -> bool:
    """The TUI reaches the engine through app's API: ember.engine.api, app but not app/server."""
    if layer(target) == "engine":
        return target == "ember.engine.api"
    if layer(target) == "app":
        return not target.startswith("ember.app.server")
    return True


def upward(found: list[Edge]) -> list[Edge]:
    """Edges that point against the layers."""
    bad = []
    for edge in found:
        source, target = layer(edge.source), layer(edge.target)
        if target not in ALLOWED[source] or (source == "tui" and not tui_may_import(edge.target)):
            bad.append(edge)
    return bad


def report(repo: Path = REPO) -> str:
    """The violations and cycles in words; empty when the structure holds."""
    found = edges(repo)
    lines = [f"upward import: {edge}" for edge in upward(found)]
    for group in cycles(found):
        lines.append(f"cycle among {len(group)} modules: {', '.join(group)}")
        lines += [f"    {edge}" for edge in cycle_path(group, found)]
    return "\n".join(lines)


if __name__ == "__main__":
    print(report() or "the import graph is one-way and acyclic")
