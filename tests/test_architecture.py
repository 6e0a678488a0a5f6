"""The house rules of the package layout (README's architecture map, docs/architecture.md).

- No import circle between modules, at module level or inside functions.
- No module imports another module's underscore name: seams between modules are public.
- Imports run down the stages, never back up (a reader never imports the analysis, a rule never
  a renderer): each package may import only itself and the packages below it in ``LAYERS``.
- Commands never import the CLI app.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "ncu_advisor"
# Lowest first. A module may import from its own layer's packages and from any layer below.
LAYERS: list[set[str]] = [
    {"_version", "errors", "checklist", "units", "report", "json_text", "processes"},
    {"readers", "demos"},
    {"derive"},
    {"rules_engine"},
    {"analysis"},
    {"render", "diff", "store"},
    {"profiling"},
    {"cli", "__init__", "__main__"},
]
LAYER_OF = {name: i for i, names in enumerate(LAYERS) for name in names}


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULES = {_module_name(p): p for p in PACKAGE.rglob("*.py")}


def _imports(name: str, path: Path):
    """(imported module, imported names, at module level?) for each ncu_advisor import."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    top = set(map(id, tree.body))
    # Imports for type checkers only never run: they make no circle.
    typing_only = {id(sub) for node in tree.body if isinstance(node, ast.If)
                   and getattr(node.test, "id", None) == "TYPE_CHECKING"
                   for sub in ast.walk(node)}
    for node in ast.walk(tree):
        if id(node) in typing_only:
            continue
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target.split(".")[0] != "ncu_advisor":
                continue
            for alias in node.names:
                full = f"{target}.{alias.name}"
                yield (full if full in MODULES else target), alias.name, id(node) in top
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "ncu_advisor":
                    yield alias.name, None, id(node) in top


EDGES = {name: list(_imports(name, path)) for name, path in MODULES.items()}


def _cycles(module_level_only: bool) -> list[list[str]]:
    graph = {m: {t for t, _, top in edges if t in MODULES and t != m
                 and (top or not module_level_only)} for m, edges in EDGES.items()}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in graph:
        if v not in index:
            visit(v)
    return found


def test_the_import_graph_was_read():
    assert len(MODULES) > 60 and sum(map(len, EDGES.values())) > 200


@pytest.mark.parametrize("module_level_only", [True, False], ids=["module", "function"])
def test_no_import_circle(module_level_only):
    assert _cycles(module_level_only) == []


def test_no_module_imports_another_modules_private_name():
    grabs = [(m, t, n) for m, edges in EDGES.items() for t, n, _ in edges
             if n and n.startswith("_") and not n.startswith("__") and t != m]
    assert grabs == []


def _layer(module: str) -> int:
    top = module.split(".")[1] if "." in module else "__init__"
    return LAYER_OF[top]


def test_every_package_has_a_layer():
    assert {m.split(".")[1] for m in MODULES if "." in m} <= set(LAYER_OF)


def test_imports_never_run_back_up_a_stage():
    upward = [(m, t) for m, edges in EDGES.items() for t, _, _ in edges
              if t in MODULES and _layer(t) > _layer(m)]
    assert upward == []


def test_commands_never_import_the_app():
    offenders = [m for m, edges in EDGES.items()
                 if m.startswith("ncu_advisor.cli.") and m != "ncu_advisor.cli.app"
                 and m != "ncu_advisor.cli.__main__"
                 and any(t == "ncu_advisor.cli.app" for t, _, _ in edges)]
    assert offenders == []


def test_the_lean_metric_set_names_modules_that_exist():
    """metric_use reads the modules it lists: one that moved must fail here, not shrink it."""
    import importlib.util

    from ncu_advisor.analysis import metric_use

    assert all(importlib.util.find_spec(name) for name in metric_use._SOURCE_ONLY)
    assert {m.__name__ for m in metric_use._modules()} <= set(MODULES)
    lean = metric_use.analysis_metrics()
    assert {"gpu__time_duration.sum", "launch__grid_size",
            "smsp__sass_average_data_bytes_per_sector_mem_global_op_ld.ratio"} <= lean
