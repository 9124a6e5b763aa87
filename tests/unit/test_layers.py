"""The import graph of the package: no cycles, and every import points down the layers.

Layers (DESIGN §1), top to bottom; a module may import its own layer or any below it:

    cli, dashboards → agent → llm, plan, tools, codegen, execution → ml, datasets
    → tracking, adapters → config, errors

Rules of the walk (an AST walk, nothing is imported): imports inside functions count;
imports under ``if TYPE_CHECKING:`` count for the layer order but not as cycles;
``from pkg import sub`` depends on ``pkg/sub.py``, and on ``pkg/__init__.py`` only for
names defined there.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

from helpers import REPO

FOLDERS = {
    "platform": "mlpilot.platform",
    "tracking": "mlpilot.tracking",
    "adapters": "mlpilot.adapters",
    "dashboards": "mlpilot.dashboards",
}
LAYERS = (
    ("cli", "dashboards"),
    ("agent",),
    ("llm", "plan", "tools", "codegen", "execution"),
    ("ml", "datasets"),
    ("tracking", "adapters"),
    ("config", "errors"),
)


@dataclass
class Module:
    name: str
    path: Path
    is_package: bool
    imports: set[str] = field(default_factory=set)  # counted as cycles and for layers
    typing_imports: set[str] = field(default_factory=set)  # layers only


def component(module: str) -> str:
    """``mlpilot.platform.ml.steps._data`` → ``ml``; ``mlpilot.tracking.vocab`` → ``tracking``."""
    parts = module.split(".")
    return parts[2] if parts[1] == "platform" else parts[1]


def layer(module: str) -> int:
    name = component(module)
    return next(i for i, names in enumerate(LAYERS) if name in names)


@cache
def modules() -> dict[str, Module]:
    found: dict[str, Module] = {}
    for folder, package in FOLDERS.items():
        for path in sorted((REPO / folder).rglob("*.py")):
            parts = list(path.relative_to(REPO / folder).with_suffix("").parts)
            is_package = parts[-1] == "__init__"
            if is_package:
                parts = parts[:-1]
            name = ".".join([package, *parts])
            found[name] = Module(name, path, is_package)
    for module in found.values():
        _collect(module, found)
    return found


def _defined_names(module: Module) -> set[str]:
    tree = ast.parse(module.path.read_text(encoding="utf-8"))
    names = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names |= {t.id for t in targets if isinstance(t, ast.Name)}
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names}
    return names


def _targets(
    node: ast.Import | ast.ImportFrom, module: Module, known: dict[str, Module]
) -> set[str]:
    def nearest(name: str) -> str | None:
        while name and name not in known:
            name = name.rpartition(".")[0]
        return name or None

    out: set[str] = set()
    if isinstance(node, ast.Import):
        for alias in node.names:
            if alias.name.startswith("mlpilot.") and (target := nearest(alias.name)):
                out.add(target)
        return out
    base = node.module or ""
    if node.level:
        package = module.name if module.is_package else module.name.rpartition(".")[0]
        for _ in range(node.level - 1):
            package = package.rpartition(".")[0]
        base = f"{package}.{base}" if base else package
    if not base.startswith("mlpilot."):
        return out
    for alias in node.names:
        submodule = f"{base}.{alias.name}"
        if submodule in known:
            out.add(submodule)
            if base in known and alias.name in _defined_names(known[base]):
                out.add(base)
        elif target := nearest(base):
            out.add(target)
    return out


def _collect(module: Module, known: dict[str, Module]) -> None:
    tree = ast.parse(module.path.read_text(encoding="utf-8"))
    typing_blocks = [
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)
    ]
    typing_nodes = {id(n) for block in typing_blocks for part in block.body for n in ast.walk(part)}
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            targets = _targets(node, module, known) - {module.name}
            (module.typing_imports if id(node) in typing_nodes else module.imports).update(targets)


def cycles() -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    graph = {name: sorted(m.imports) for name, m in modules().items()}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in graph[node]:
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            members = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                members.append(member)
                if member == node:
                    break
            if len(members) > 1:
                found.append(sorted(members))

    for name in graph:
        if name not in index:
            visit(name)
    return found


def test_the_walk_sees_the_package() -> None:
    found = modules()
    assert "mlpilot.platform.agent.orchestrator" in found and "mlpilot.tracking" in found
    assert len(found) > 80
    # the walk notices function-level imports (checked on a module that has them)
    assert any(m.imports for m in found.values() if component(m.name) == "cli")


def test_no_import_cycles() -> None:
    assert cycles() == []


def test_imports_point_down_the_layers() -> None:
    upward = []
    for module in modules().values():
        for target in module.imports | module.typing_imports:
            if layer(target) < layer(module.name):
                upward.append(f"{module.name} → {target}")
    assert sorted(upward) == []


def test_every_component_has_a_layer() -> None:
    for name in modules():
        layer(name)  # raises StopIteration for a folder missing from LAYERS
