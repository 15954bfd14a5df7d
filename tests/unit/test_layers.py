"""The import graph flows one way (ARCHITECTURE.md, "Layers").

Read from the source, not by importing: every ``import`` of an Engram module
counts, a lazy one inside a function too, except under ``if TYPE_CHECKING:``
(annotations only). A module may import its own layer and the layers below it.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import engram

ROOT = Path(engram.__file__).parent

#: Each layer's prefixes, lowest first; a module may import its own and lower layers.
LAYERS = [
    ("model", ["engram.model", "engram.errors", "engram.validate"]),
    ("policies", ["engram.policies"]),
    ("providers", ["engram.config", "engram.embed", "engram.llm", "engram.prompts"]),
    ("roles", ["engram.roles"]),
    ("store", ["engram.store"]),
    ("pipelines", ["engram.pipelines"]),
]


def _name(path: Path) -> str:
    parts = path.relative_to(ROOT.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _is_module(name: str) -> bool:
    where = ROOT.parent.joinpath(*name.split("."))
    return where.with_suffix(".py").exists() or (where / "__init__.py").exists()


def _imports(path: Path) -> set[str]:
    """The Engram modules ``path`` imports (``from pkg import sub`` names ``pkg.sub``)."""
    name = _name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()

    def visit(nodes: list[ast.stmt]) -> None:
        for node in nodes:
            if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
                visit(node.orelse)
                continue
            if isinstance(node, ast.Import):
                found.update(a.name for a in node.names if a.name.startswith("engram"))
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parts = package.split(".")
                    up = parts[: len(parts) - (node.level - 1)]
                    base = ".".join(up + ([node.module] if node.module else []))
                if base.startswith("engram"):
                    for alias in node.names:
                        sub = f"{base}.{alias.name}"
                        found.add(sub if _is_module(sub) else base)
            for child in ("body", "orelse", "finalbody", "handlers"):
                inner = getattr(node, child, None)
                if isinstance(inner, list):
                    visit(inner)

    visit(ast.parse(path.read_text(encoding="utf-8")).body)
    found.discard(name)
    return found


GRAPH = {_name(p): _imports(p) for p in sorted(ROOT.rglob("*.py"))}


def _layer(module: str) -> int | None:
    for rank, (_, prefixes) in enumerate(LAYERS):
        if any(module == p or module.startswith(p + ".") for p in prefixes):
            return rank
    return None  # the facade and the interfaces: anything below them


@pytest.mark.parametrize("module", sorted(m for m in GRAPH if _layer(m) is not None))
def test_a_module_imports_only_its_layer_and_the_layers_below(module: str) -> None:
    rank = _layer(module)
    assert rank is not None
    top = len(LAYERS)  # the facade and the interfaces
    above = sorted(d for d in GRAPH[module] if d != "engram" and (top if _layer(d) is None else _layer(d)) > rank)
    assert not above, f"{module} ({LAYERS[rank][0]}) imports {above}"


def test_no_import_cycles() -> None:
    """No module reaches itself (the root package aside: it only re-exports)."""
    graph = {m: {d for d in deps if d in GRAPH and d != "engram"} for m, deps in GRAPH.items()}
    done: set[str] = set()
    path: list[str] = []

    def walk(module: str) -> None:
        if module in path:
            cycle = path[path.index(module):] + [module]
            pytest.fail("import cycle: " + " -> ".join(cycle))
        if module in done:
            return
        path.append(module)
        for dep in sorted(graph[module]):
            walk(dep)
        path.pop()
        done.add(module)

    for module in sorted(graph):
        walk(module)
