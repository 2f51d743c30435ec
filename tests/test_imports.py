"""Data flows one way through the installed package: its module-level imports form no cycle, and no import,
a late one inside a function included, runs from a lower layer to a higher one.

The consumers of the library keep folders of their own in the repository (``agents/``, ``train/``) and install
under the package's namespace through ``setup.cfg``'s ``package_dir``; the graph reads that table, so
``gencoord_env.agents.rules`` is ``agents/rules.py`` here as it is in the wheel.
"""
from __future__ import annotations

import ast
import configparser
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

#: (layer, module prefixes), lowest first: a module imports only from its own layer or below. The library
#: (the env, its pipeline, tasks, worlds, wrappers) knows no policy; agents know no command or training;
#: the commands and harnesses that play policies (the package's face hands out the single-agent view)
#: know no training; training sits on everything. A module is in the layer of its longest matching prefix.
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("library", ("gencoord_env.",)),
    ("agents", ("gencoord_env.agents",)),
    ("commands", ("gencoord_env", "gencoord_env.commands")),
    ("training", ("gencoord_env.train",)),
)


def source_roots() -> dict[str, Path]:
    """Package name -> its folder: ``gencoord_env`` and every folder ``package_dir`` grafts into it."""
    cfg = configparser.ConfigParser()
    cfg.read(REPO / "setup.cfg", encoding="utf-8")
    roots = {"gencoord_env": REPO / "gencoord_env"}
    for line in cfg["options"]["package_dir"].strip().splitlines():
        package, _, folder = (part.strip() for part in line.partition("="))
        roots[package] = REPO / folder
    return roots


def _modules() -> dict[str, Path]:
    out = {}
    for package, root in source_roots().items():
        for path in root.rglob("*.py"):
            if "node_modules" in path.parts:
                continue
            parts = path.relative_to(root).with_suffix("").parts
            out[".".join((package, *(parts[:-1] if parts[-1] == "__init__" else parts)))] = path
    return out


def import_graph(late: bool = False) -> dict[str, set[str]]:
    """module -> the package modules it imports at module level (imports under an ``if``, such as
    ``TYPE_CHECKING``, left out); with ``late``, also those imported inside functions and branches."""
    modules = _modules()

    def owner(name: str) -> str | None:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        statements = (ast.walk(tree) if late else
                      [s for node in tree.body for s in (node.body if isinstance(node, ast.Try) else [node])])
        deps: set[str | None] = set()
        for s in statements:
            if isinstance(s, ast.Import):
                deps |= {owner(a.name) for a in s.names if a.name.startswith("gencoord_env")}
            elif isinstance(s, ast.ImportFrom) and s.level == 0 and (s.module or "").startswith("gencoord_env"):
                deps |= {owner(f"{s.module}.{a.name}") for a in s.names}
        graph[name] = {d for d in deps if d is not None and d != name}
    return graph


def layer_of(module: str) -> int:
    best, rank = -1, 0
    for index, (_, prefixes) in enumerate(LAYERS):
        for prefix in prefixes:
            matches = module == prefix or module.startswith(prefix if prefix.endswith(".") else prefix + ".")
            if matches and len(prefix) > best:
                best, rank = len(prefix), index
    return rank


def upward(graph: dict[str, set[str]]) -> list[str]:
    """Every import from a lower layer to a higher one, as 'a (layer) -> b (layer)'."""
    return sorted(f"{a} ({LAYERS[layer_of(a)][0]}) -> {b} ({LAYERS[layer_of(b)][0]})"
                  for a, deps in graph.items() for b in deps if layer_of(b) > layer_of(a))


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


def test_the_graph_reads_the_grafted_folders() -> None:
    graph = import_graph()
    assert "gencoord_env.tasks.pools" in graph["gencoord_env.tasks.pool_value"]
    # imports that name a grafted package resolve to its folder's files
    assert {"gencoord_env.agents.lm.loading", "gencoord_env.train.data"} <= graph["gencoord_env.train.sft"]
    assert {"gencoord_env.agents.rules", "gencoord_env.agents.lm.generate", "gencoord_env.train.sft"} <= set(graph)
    assert len(graph) > 120


def test_the_package_imports_form_no_cycle() -> None:
    assert cycles(import_graph()) == []


def test_late_imports_form_no_cycle_either() -> None:
    """A function-level import hides a cycle from the module-level graph: the training modules had two that way
    (``train.fit`` and ``train.sft`` imported each other, as did ``train.tables`` and ``train.table_report``)."""
    assert cycles(import_graph(late=True)) == []


def test_no_import_runs_up_a_layer() -> None:
    """Late imports count too: a function-level import is how a library module would quietly reach a policy."""
    graph = import_graph(late=True)
    assert upward(graph) == []
    # the table is not vacuous: every layer has modules, and the layers above import those below
    ranks = {layer_of(m) for m in graph}
    assert ranks == set(range(len(LAYERS)))
    assert any(layer_of(b) == 0 for b in graph["gencoord_env.agents.rules"])
    assert any(layer_of(b) == 1 for b in graph["gencoord_env.commands.experiments.runner"])


def test_an_upward_import_is_named() -> None:
    graph = {"gencoord_env.envs.gencoord.menu": {"gencoord_env.agents.rules"},
             "gencoord_env.agents.rules": {"gencoord_env.tasks.pools"}}
    assert upward(graph) == ["gencoord_env.envs.gencoord.menu (library) -> gencoord_env.agents.rules (agents)"]
    assert layer_of("gencoord_env") == layer_of("gencoord_env.commands.experiments.stats") == 2
    assert layer_of("gencoord_env.train.cli") == 3 and layer_of("gencoord_env.tasks") == 0


def test_a_cycle_is_found() -> None:
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
