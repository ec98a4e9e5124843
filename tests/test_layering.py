"""Import rules, checked on the source (as import-linter would) and at run time.

- core/ imports only core/ (absolute `dralab.core...` or relative imports that stay inside core/), the
  standard library, and an explicit list of third-party packages;
- core/ never imports clocks, sockets or process machinery, never reads the environment, and never calls
  the module-level (global, unseeded) random functions: `random.Random` is the only name it may use;
- actors/ never imports dralab.replay or the CLI; replay/ never imports dralab.actors or the CLI.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FOLDERS = {"core": "dralab.core", "actors": "dralab.actors", "replay": "dralab.replay", "cli": "dralab"}

CORE_THIRD_PARTY = frozenset({"msgspec", "yaml", "cel", "re2"})  # re2: google-re2, core/dra/cel_regex.py
CORE_FORBIDDEN_STDLIB = frozenset({
    "time", "datetime", "socket", "ssl", "select", "selectors", "asyncio", "threading", "multiprocessing",
    "concurrent", "subprocess", "signal", "secrets", "uuid", "urllib", "http", "socketserver", "sched",
})
# `random` is allowed here only to name `random.Random` (the type of the seeded source reactors are handed).
# (the reactors live in the layers from cluster/ to controllers/: core/ in layers, tests/test_layers.py)
RANDOM_ALLOWED_IN = (
    "core/engine/contract.py", "core/cluster/", "core/scheduler/", "core/autoscaler/", "core/controllers/",
)
RANDOM_ALLOWED_NAMES = frozenset({"Random"})
# What msgspec and yaml themselves load (yaml's C loader is Cython).
# `cel` (common-expression-language) imports its own command-line module, which pulls these in.
CORE_TRANSITIVE = frozenset({
    "typing_extensions", "cython_runtime", "typer", "rich", "prompt_toolkit", "pygments", "wcwidth", "shellingham",
    "annotated_doc", "click", "markdown_it", "mdurl",
})
OS_ALLOWED_NAMES = frozenset({"fspath", "PathLike", "fsencode", "fsdecode", "sep", "path"})
# id() is an address: allowed only where the loader uses it to recognise a YAML alias, never in a decision.
ID_ALLOWED_IN = frozenset({"core/kube/fields.py", "core/scenario/load.py"})


@dataclass(frozen=True)
class Import:
    file: str  # path relative to the repository
    line: int
    module: str  # absolute module name
    names: tuple[str, ...]  # for `from X import a, b`


def module_name(path: Path) -> str:
    rel = path.relative_to(ROOT)
    parts = [FOLDERS[rel.parts[0]], *rel.parts[1:]]
    parts[-1] = parts[-1].removesuffix(".py")
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(p for p in parts if p)


def package_of(path: Path) -> str:
    name = module_name(path)
    return name if path.name == "__init__.py" else name.rpartition(".")[0]


def imports(path: Path) -> list[Import]:
    tree = ast.parse(path.read_text(), filename=str(path))
    rel = str(path.relative_to(ROOT))
    out: list[Import] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.extend(Import(rel, node.lineno, alias.name, ()) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package_of(path).split(".")
                if node.level - 1 > len(base) - 1:
                    raise AssertionError(f"{rel}:{node.lineno}: relative import beyond the top package")
                base = base[: len(base) - (node.level - 1)]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            out.append(Import(rel, node.lineno, module, tuple(a.name for a in node.names)))
    return out


def targets(imp: Import) -> list[str]:
    """The modules an import may load: `from a import b` may load `a.b` as well as `a`."""
    return [imp.module, *(f"{imp.module}.{n}" for n in imp.names if n != "*")]


def files(folder: str) -> list[Path]:
    found = sorted((ROOT / folder).rglob("*.py"))
    assert found, f"no Python files under {folder}/"
    return found


def top(module: str) -> str:
    return module.split(".")[0]


def within(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


# ---------------------------------------------------------------- the checker checks itself


def test_relative_imports_resolve() -> None:
    reactor = ROOT / "core" / "scheduler" / "reactor.py"
    assert module_name(reactor) == "dralab.core.scheduler.reactor"
    mods = {i.module for i in imports(reactor)}
    assert {"dralab.core.dra.features", "dralab.core.engine.contract", "dralab.core.state.cluster"} <= mods
    assert module_name(ROOT / "cli" / "__init__.py") == "dralab"


# ---------------------------------------------------------------- core


@pytest.mark.parametrize("path", files("core"), ids=lambda p: str(p.relative_to(ROOT)))
def test_core_imports_only_core_stdlib_and_listed_packages(path: Path) -> None:
    bad = []
    for imp in imports(path):
        name = imp.module
        if name == "__future__" or within(name, "dralab.core"):
            continue
        if top(name) == "dralab":
            bad.append(f"{imp.file}:{imp.line}: imports {name} (outside dralab.core)")
        elif top(name) in sys.stdlib_module_names:
            if top(name) in CORE_FORBIDDEN_STDLIB:
                bad.append(f"{imp.file}:{imp.line}: imports {name} (clocks, sockets, processes: not in core)")
        elif top(name) not in CORE_THIRD_PARTY:
            bad.append(f"{imp.file}:{imp.line}: imports third-party {name} (allowed: {sorted(CORE_THIRD_PARTY)})")
    assert bad == []


def _random_uses(tree: ast.AST) -> list[tuple[int, str]]:
    """Every use of the random module other than `random.Random`, by line."""
    out: list[tuple[int, str]] = []
    aliases: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            aliases |= {a.asname or a.name for a in node.names if a.name == "random"}
        elif isinstance(node, ast.ImportFrom) and node.module == "random" and not node.level:
            out.extend((node.lineno, f"from random import {a.name}") for a in node.names
                       if a.name not in RANDOM_ALLOWED_NAMES)
    for node in ast.walk(tree):
        if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in aliases
                and node.attr not in RANDOM_ALLOWED_NAMES):
            out.append((node.lineno, f"random.{node.attr}"))
    return out


@pytest.mark.parametrize("path", files("core"), ids=lambda p: str(p.relative_to(ROOT)))
def test_core_uses_no_global_random_environment_or_clock(path: Path) -> None:
    rel = str(path.relative_to(ROOT))
    tree = ast.parse(path.read_text(), filename=rel)
    bad = [f"{rel}:{line}: {what}" for line, what in _random_uses(tree)]
    imported = {imp.module for imp in imports(path)}
    if "random" in imported and not rel.startswith(RANDOM_ALLOWED_IN):
        bad.append(f"{rel}: imports random (only the contract and the reactors' layers may, for random.Random)")
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "os":
            if node.attr not in OS_ALLOWED_NAMES:
                bad.append(f"{rel}:{node.lineno}: os.{node.attr}")
        elif isinstance(node, ast.ImportFrom) and node.module == "os" and not node.level:
            bad.extend(f"{rel}:{node.lineno}: from os import {a.name}" for a in node.names
                       if a.name not in OS_ALLOWED_NAMES)
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
              and (node.func.id == "hash" or (node.func.id == "id" and rel not in ID_ALLOWED_IN))):
            # string hashes are salted per process and id() is an address: neither may reach a decision
            bad.append(f"{rel}:{node.lineno}: {node.func.id}()")
    assert bad == []


def test_random_checker_catches_module_level_calls() -> None:
    tree = ast.parse("import random\nimport random as r\nfrom random import choice\n"
                     "x: random.Random = random.Random(1)\nrandom.shuffle([])\nr.randint(1, 2)\n")
    assert sorted(_random_uses(tree)) == [(3, "from random import choice"), (5, "random.shuffle"),
                                          (6, "random.randint")]


# Process-wide switches pure code must leave alone: the collector (the runners in actors/ and replay/ set
# its policy: actors/gc_tuning.py, replay/logs/gc_policy.py) and the interpreter's limits and hooks.
PROCESS_SWITCHES = {
    "gc": frozenset({"disable", "enable", "freeze", "unfreeze", "set_threshold", "set_debug", "collect"}),
    "sys": frozenset({"setrecursionlimit", "setswitchinterval", "settrace", "setprofile", "set_int_max_str_digits"}),
}


def _process_switches(tree: ast.AST) -> list[tuple[int, str]]:
    """Every call of (or import of) a function that flips a process-wide switch, by line."""
    out: list[tuple[int, str]] = []
    aliases: dict[str, str] = {}  # local name -> module
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            aliases |= {a.asname or a.name: a.name for a in node.names if a.name in PROCESS_SWITCHES}
        elif isinstance(node, ast.ImportFrom) and node.module in PROCESS_SWITCHES and not node.level:
            out.extend((node.lineno, f"from {node.module} import {a.name}") for a in node.names
                       if a.name in PROCESS_SWITCHES[node.module] or a.name == "*")
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in aliases:
            module = aliases[node.value.id]
            if node.attr in PROCESS_SWITCHES[module]:
                out.append((node.lineno, f"{module}.{node.attr}"))
    return out


@pytest.mark.parametrize("path", files("core"), ids=lambda p: str(p.relative_to(ROOT)))
def test_core_flips_no_process_wide_switch(path: Path) -> None:
    rel = str(path.relative_to(ROOT))
    assert [f"{rel}:{line}: {what}" for line, what in _process_switches(ast.parse(path.read_text()))] == []


def test_switch_checker_catches_every_form() -> None:
    tree = ast.parse("import gc\nimport sys as s\nfrom gc import freeze\ngc.disable()\nx = gc.isenabled()\n"
                     "s.setrecursionlimit(5000)\ns.getrecursionlimit()\nimport os\nos.sys.setrecursionlimit\n")
    assert sorted(_process_switches(tree)) == [(3, "from gc import freeze"), (4, "gc.disable"),
                                               (6, "sys.setrecursionlimit")]


def test_importing_core_loads_nothing_outside_it() -> None:
    """At run time: importing every core module pulls in neither the other folders nor their engines."""
    modules = sorted(module_name(p) for p in files("core"))
    code = (
        "import sys\n"
        f"for m in {modules!r}: __import__(m)\n"
        "print('\\n'.join(sorted(sys.modules)))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 0, proc.stderr
    loaded = set(proc.stdout.split())
    assert {m for m in loaded if top(m) == "dralab" and not within(m, "dralab.core")} == {"dralab"}
    assert set(modules) <= loaded
    third_party = {top(m) for m in loaded} - set(sys.stdlib_module_names) - {"dralab", "_distutils_hack"}
    third_party = {m for m in third_party if not m.startswith("_")}
    assert third_party <= CORE_THIRD_PARTY | CORE_TRANSITIVE, third_party
    assert not {"ray", "redis", "structlog"} & {top(m) for m in loaded}


# ---------------------------------------------------------------- actors and replay


@pytest.mark.parametrize(
    "folder, forbidden",
    [
        ("actors", ("dralab.replay", "dralab.cli")),
        ("replay", ("dralab.actors", "dralab.cli")),
    ],
)
def test_folder_does_not_import_its_peers(folder: str, forbidden: tuple[str, ...]) -> None:
    bad = []
    for path in files(folder):
        for imp in imports(path):
            for target in targets(imp):
                if any(within(target, f) for f in forbidden):
                    bad.append(f"{imp.file}:{imp.line}: imports {target}")
    assert bad == []


@pytest.mark.parametrize("folder", ["actors", "replay"])
def test_folder_reaches_dralab_only_through_core_or_itself(folder: str) -> None:
    """Besides dralab.core and itself, only the root package (its `__version__`) is allowed."""
    own = FOLDERS[folder]
    bad = []
    for path in files(folder):
        for imp in imports(path):
            if top(imp.module) != "dralab" or within(imp.module, "dralab.core") or within(imp.module, own):
                continue
            if imp.module == "dralab" and set(imp.names) <= {"__version__"}:
                continue
            bad.append(f"{imp.file}:{imp.line}: imports {imp.module} {imp.names}")
    assert bad == []
