"""No import cycles between modules of the root packages (pyproject's [tool.importlinter]).

lint-imports' acyclic_siblings contract sees cycles between the children of a package; it does
not see a package that imports a submodule which imports the package back (a registry in
`kinds/__init__.py`), so this test looks at the module graph itself: its strongly connected
components, with grimp (import-linter's graph), counting `if TYPE_CHECKING:` imports as the
contracts do (docs/decisions.md P2).

There are none: the test fails naming every cycle it finds.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

import grimp

ROOT = Path(__file__).resolve().parents[2]
CONFIG = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]


def import_cycles(graph: grimp.ImportGraph, roots: list[str]) -> list[frozenset[str]]:
    """The graph's strongly connected components of more than one module (or a module that
    imports itself), among the root packages' modules (Tarjan, without recursion)."""
    modules = sorted(m for m in graph.modules if m.split(".")[0] in roots)
    inside = set(modules)
    edges = {
        m: sorted(graph.find_modules_directly_imported_by(m) & inside, reverse=True)
        for m in modules
    }
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[frozenset[str]] = []
    for start in modules:
        if start in index:
            continue
        work = [(start, list(edges[start]))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, todo = work[-1]
            if todo:
                nxt = todo.pop()
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, list(edges[nxt])))
                elif nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.add(member)
                    if member == node:
                        break
                if len(component) > 1 or node in edges[node]:
                    cycles.append(frozenset(component))
    return sorted(cycles, key=sorted)


def _graph(*modules: str) -> grimp.ImportGraph:
    graph = grimp.ImportGraph()
    for module in modules:
        graph.add_module(module)
    return graph


def test_import_cycles_finds_components_not_pairs() -> None:
    graph = _graph("p", "p.a", "p.b", "p.c", "p.d", "p.e")
    for importer, imported in [
        ("p.a", "p.b"),
        ("p.b", "p.c"),
        ("p.c", "p.a"),  # a three-module cycle
        ("p.c", "p.d"),  # d is reached from the cycle, not in it
        ("p.e", "p.e"),  # a module that imports itself
    ]:
        graph.add_import(importer=importer, imported=imported)
    assert import_cycles(graph, ["p"]) == [frozenset({"p.a", "p.b", "p.c"}), frozenset({"p.e"})]
    assert import_cycles(graph, ["q"]) == []


def test_no_import_cycles() -> None:
    roots = list(CONFIG["root_packages"])
    graph = grimp.build_graph(
        *roots,
        cache_dir=None,
        exclude_type_checking_imports=bool(CONFIG.get("exclude_type_checking_imports", False)),
    )
    found = import_cycles(graph, roots)
    assert found == [], f"import cycles: {[sorted(cycle) for cycle in found]}"
