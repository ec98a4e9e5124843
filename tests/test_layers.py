"""The layers of core/ as folders, and no import circle anywhere (issue 19).

core/ is a stack of folders, each importing only the folders below it (the order is LAYERS: the design of
the house, docs/architecture.md draws it); nothing but `__init__.py` lives at core/'s top. Every import
counts: at module level, inside functions, and under `TYPE_CHECKING` (a circle hidden there is still one a
reader has to hold in their head). And no package of dralab (core, actors, replay, the CLI) has an import
circle between its modules, within a layer or across.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable
from pathlib import Path

import pytest
from test_layering import module_name  # one reading of a file's module name for both tests

ROOT = Path(__file__).resolve().parents[1]
LAYERS = ("kube", "dra", "log", "state", "scenario", "engine", "cluster", "scheduler", "autoscaler", "controllers",
          "run", "checks", "analysis")


def imported(path: Path, modules: set[str], name: str | None = None) -> list[tuple[int, str]]:
    """(line, module) of every dralab module `path` (module `name`) imports, wherever the statement stands."""
    name = name or module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names if a.name in modules]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            for alias in node.names:
                sub = f"{target}.{alias.name}"
                if sub in modules:
                    out.append((node.lineno, sub))
                elif target in modules:
                    out.append((node.lineno, target))
    return [(line, m) for line, m in out if m != name]


def py_files(*folders: str) -> list[Path]:
    return sorted(p for f in folders for p in (ROOT / f).rglob("*.py"))


def graph(folders: Iterable[str]) -> dict[str, set[str]]:
    paths = py_files(*folders)
    modules = {module_name(p) for p in paths}
    return {module_name(p): {m for _, m in imported(p, modules)} for p in paths}


def circles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    for root in sorted(edges):
        if root in index:
            continue
        work = [(root, iter(sorted(edges[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in edges:
                    continue
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(edges[w]))))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    x = stack.pop()
                    on.discard(x)
                    comp.append(x)
                    if x == v:
                        break
                if len(comp) > 1:
                    found.append(sorted(comp))
    return found


def layer_of(module: str) -> int | None:
    parts = module.split(".")
    if parts[:2] != ["dralab", "core"] or len(parts) < 3:
        return None
    return LAYERS.index(parts[2]) if parts[2] in LAYERS else None


def test_core_is_only_layer_folders() -> None:
    top = sorted(p.name for p in (ROOT / "core").iterdir() if p.name != "__pycache__")
    assert top == sorted([*LAYERS, "__init__.py"]), "core/ holds only the layer folders (see LAYERS)"
    for layer in LAYERS:
        doc = ast.get_docstring(ast.parse((ROOT / "core" / layer / "__init__.py").read_text()))
        assert doc and "Imports" in doc, f"core/{layer}/__init__.py says what lives there and what it may import"


def test_each_layer_imports_only_the_layers_below() -> None:
    paths = py_files("core")
    modules = {module_name(p) for p in paths}
    bad = []
    for path in paths:
        if path == ROOT / "core" / "__init__.py":
            continue
        mine = layer_of(module_name(path))
        assert mine is not None, f"{path.relative_to(ROOT)} is in no layer"
        for line, target in imported(path, modules):
            theirs = layer_of(target)
            if theirs is not None and theirs > mine:
                bad.append(f"{path.relative_to(ROOT)}:{line}: {LAYERS[mine]}/ imports {target} ({LAYERS[theirs]}/ "
                           "is above it)")
    assert bad == []


@pytest.mark.parametrize("folders", [("core",), ("actors",), ("replay",), ("cli",),
                                     ("core", "actors", "replay", "cli")], ids=lambda f: "+".join(f))
def test_no_import_circles(folders: tuple[str, ...]) -> None:
    assert circles(graph(folders)) == []


def test_the_circle_finder_finds_circles() -> None:
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert circles({"a": {"b"}, "b": set()}) == []


def test_imports_under_type_checking_and_in_functions_count(tmp_path: Path) -> None:
    src = ("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .b import X\n"
           "def f():\n    from . import c\n")
    path = tmp_path / "a.py"
    path.write_text(src)
    mods = {"dralab.core.kube.b", "dralab.core.kube.c"}
    found = imported(path, mods, name="dralab.core.kube.a")
    assert sorted(m for _, m in found) == ["dralab.core.kube.b", "dralab.core.kube.c"]


def test_the_layers_picture_in_the_docs_is_up_to_date() -> None:
    import sys

    sys.path.insert(0, str(ROOT / "benchmarks"))
    import layers_doc

    doc = layers_doc.DOC.read_text()
    assert layers_doc.render(doc) == doc, "docs/architecture.md: run python benchmarks/layers_doc.py"


REPLAY_LAYERS = ("logs", "simulation", "report", "traces")


def test_replay_is_grouped_by_concern_in_order() -> None:
    """replay/: the log files, then the simulator and its tools, then the report and the traces (which run
    the simulator); each folder imports only those before it, and nothing sits at replay/'s top."""
    top = sorted(p.name for p in (ROOT / "replay").iterdir() if p.name != "__pycache__")
    assert top == sorted([*REPLAY_LAYERS, "__init__.py"])
    paths = [p for p in py_files("replay") if p != ROOT / "replay" / "__init__.py"]
    modules = {module_name(p) for p in paths}
    bad = []
    for path in paths:
        mine = REPLAY_LAYERS.index(module_name(path).split(".")[2])
        for line, target in imported(path, modules):
            theirs = REPLAY_LAYERS.index(target.split(".")[2])
            if theirs > mine:
                bad.append(f"{path.relative_to(ROOT)}:{line}: imports {target}")
    assert bad == []
