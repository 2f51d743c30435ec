"""The package's module-level imports form no cycle, so data flows one way (a late import inside a function,
kept for optional dependencies and heavy modules, is not counted)."""
from __future__ import annotations

import ast
from pathlib import Path

import gencoord_env

ROOT = Path(gencoord_env.__file__).parent


def _modules() -> dict[str, Path]:
    out = {}
    for path in ROOT.rglob("*.py"):
        parts = path.relative_to(ROOT.parent).with_suffix("").parts
        out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return out


def import_graph() -> dict[str, set[str]]:
    """module -> the package modules it imports at module level (imports under an ``if``, such as
    ``TYPE_CHECKING``, left out)."""
    modules = _modules()

    def owner(name: str) -> str | None:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        deps: set[str | None] = set()
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            statements = node.body if isinstance(node, ast.Try) else [node]
            for s in statements:
                if isinstance(s, ast.Import):
                    deps |= {owner(a.name) for a in s.names if a.name.startswith("gencoord_env")}
                elif isinstance(s, ast.ImportFrom) and s.level == 0 and (s.module or "").startswith("gencoord_env"):
                    deps |= {owner(f"{s.module}.{a.name}") for a in s.names}
        graph[name] = {d for d in deps if d is not None and d != name}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_the_package_imports_form_no_cycle() -> None:
    graph = import_graph()
    assert len(graph) > 80 and "gencoord_env.tasks.pools" in graph["gencoord_env.tasks.pool_value"]
    assert cycles(graph) == []


def test_a_cycle_is_found() -> None:
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
