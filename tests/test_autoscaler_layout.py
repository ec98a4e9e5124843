"""core/autoscaler/ split as the real autoscalers split it (issue 19): simulation/, provisioning/, disruption/,
with the loop (reactor.py) on top.

Sub-folders of a layer follow the rule of the layers (tests/test_layers.py): each imports only what sits
below it. simulation/ (the snapshot) is the bottom; provisioning/ (scale-up) and disruption/ (scale-down)
build on it and not on each other, as Karpenter's provisioner and disruption controllers share only the
cluster state and the scheduling simulation; reactor.py, the loop, is the only module that sees them all
and nothing imports it from inside the layer. Every import counts (inside functions, under TYPE_CHECKING).
"""

from __future__ import annotations

import ast
from pathlib import Path

from test_layers import ROOT, graph, imported

LAYER = "dralab.core.autoscaler"
PARTS = ("simulation", "provisioning", "disruption")
# what each part may import inside the layer (besides itself)
MAY_IMPORT = {"simulation": set(), "provisioning": {"simulation"}, "disruption": {"simulation"},
              "reactor": {"simulation", "provisioning", "disruption"}}


def part_of(module: str) -> str | None:
    """Which part of core/autoscaler/ a module is in (None: outside the layer, or the layer's __init__)."""
    if not module.startswith(LAYER + "."):
        return None
    return module.removeprefix(LAYER + ".").split(".")[0]


def test_the_layer_holds_the_reactor_and_the_three_parts() -> None:
    top = sorted(p.name for p in (ROOT / "core" / "autoscaler").iterdir() if p.name != "__pycache__")
    assert top == sorted(["__init__.py", "reactor.py", *PARTS])


def test_each_part_says_what_lives_there_and_what_it_may_import() -> None:
    for part in PARTS:
        doc = ast.get_docstring(ast.parse((ROOT / "core" / "autoscaler" / part / "__init__.py").read_text()))
        assert doc and "Imports" in doc, f"core/autoscaler/{part}/__init__.py"


def test_each_part_imports_only_the_parts_below_it() -> None:
    bad = sorted(f"{module} ({mine}) imports {target}"
                 for module, targets in graph(("core",)).items() if (mine := part_of(module)) is not None
                 for target in targets
                 if (theirs := part_of(target)) is not None and theirs != mine and theirs not in MAY_IMPORT[mine])
    assert bad == []


def test_the_rule_catches_a_part_importing_across(tmp_path: Path) -> None:
    src = "from ..provisioning.backoff import backed_off\n"
    path = tmp_path / "drain.py"
    path.write_text(src)
    target = f"{LAYER}.provisioning.backoff"
    found = imported(path, {target}, name=f"{LAYER}.disruption.drain")
    assert [m for _, m in found] == [target]
    assert part_of(target) not in MAY_IMPORT["disruption"]
