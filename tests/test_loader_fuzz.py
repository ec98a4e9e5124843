"""Fuzzing the loaders (issue 18): whatever a user feeds the scenario loader and the dump loader, bytes or
structures, they answer with a value or a clean error (ScenarioError / ManifestError, which the CLI turns
into exit 2 with the file and the field), never with another exception (a traceback).

Inputs: arbitrary bytes written to a file; arbitrary YAML-like structures (nested maps and lists of random
scalars); and mutations of the real files (every scenario in scenarios/, the manifests of tests/dra_cases
and tests/fixtures): a value somewhere replaced, a key removed, a list item doubled, a map turned into a
list. The budgets are small (a few seconds a test); a crash found is shrunk by hypothesis to its core.
"""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dralab.core.dra.api import ManifestError, parse_documents
from dralab.core.kube.yaml_files import load_yaml_all
from dralab.core.scenario.load import Scenario, ScenarioError, load_scenario, parse_scenario
from dralab.inputs import InputError, load_inventory

ROOT = Path(__file__).resolve().parents[1]
SCENARIO_FILES = sorted((ROOT / "scenarios").rglob("*.yaml"))
MANIFEST_FILES = sorted((ROOT / "tests" / "dra_cases").glob("*.yaml"))[:60] + sorted(
    p for p in (ROOT / "tests" / "fixtures").rglob("*.yaml")
    if "scheduler_perf" not in p.parts)  # upstream's Go templates, rendered by tests/test_public_manifests.py
FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                       HealthCheck.function_scoped_fixture])

# --- strategies -----------------------------------------------------------------------------------------

_WORDS = st.sampled_from(["", "0", "1", "-1", "10m", "1h", "876000h", "null", "true", "a", "gpu", "8", "nvidia.com/gpu",
                          "default", "Pod", "v1", "resource.k8s.io/v1", "1e309", "NaN", ".inf", "1Gi", "x" * 300])
SCALARS = st.one_of(
    st.none(), st.booleans(),
    st.integers(min_value=-(1 << 70), max_value=1 << 70),
    st.floats(allow_nan=True, allow_infinity=True),
    _WORDS, st.text(max_size=20),
)
KEYS = st.one_of(st.sampled_from(["apiVersion", "kind", "metadata", "name", "spec", "count", "at", "pod", "max",
                                  "min", "template", "duration", "seed", "nodeGroups", "workload", "devices",
                                  "requests", "exactly", "allocationMode", "selectors", "status", "allocatable"]),
                 st.text(max_size=8))
STRUCTURES = st.recursive(SCALARS, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                           st.dictionaries(KEYS, inner, max_size=5)),
                          max_leaves=30)


def _paths(node: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix]
    if isinstance(node, dict):
        for k, v in node.items():
            out += _paths(v, (*prefix, k))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            out += _paths(v, (*prefix, i))
    return out


@st.composite
def mutated(draw: st.DrawFn, docs: list[Any]) -> Any:
    """`docs` (deep-copied) with one to three random edits."""
    out = copy.deepcopy(docs)
    for _ in range(draw(st.integers(1, 3))):
        paths = [p for p in _paths(out) if len(p) > 1]  # inside a document, never a whole one
        if not paths:
            break
        path = draw(st.sampled_from(paths))
        parent: Any = out
        for key in path[:-1]:
            parent = parent[key]
        last = path[-1]
        how = draw(st.sampled_from(["replace", "delete", "double", "wrap", "unwrap"]))
        value = parent[last]
        if how == "replace":
            parent[last] = draw(STRUCTURES)
        elif how == "delete":
            del parent[last]
        elif how == "double" and isinstance(parent, list):
            parent.insert(last, copy.deepcopy(value))
        elif how == "wrap":
            parent[last] = [value] if isinstance(value, dict) else {"x": value}
        elif how == "unwrap" and isinstance(value, dict | list) and value:
            parent[last] = next(iter(value.values())) if isinstance(value, dict) else value[0]
    return out


def _yaml_docs(path: Path) -> list[Any]:
    return [d for d in load_yaml_all(path.read_bytes()) if d is not None]


SCENARIO_DOCS = [_yaml_docs(p)[0] for p in SCENARIO_FILES]
MANIFEST_DOCS = [[d for d in _yaml_docs(p) if isinstance(d, dict) and d.get("kind") != "AllocationTest"]
                 for p in MANIFEST_FILES]


def _scenario_or_error(data: object) -> None:
    try:
        assert isinstance(parse_scenario(data, "fuzz.yaml"), Scenario)
    except ScenarioError as e:
        assert str(e).startswith("fuzz.yaml")


def _inventory_or_error(docs: list[object]) -> None:
    try:
        parse_documents(docs, "fuzz.yaml")
    except ManifestError as e:
        assert str(e).startswith("fuzz.yaml") or str(e).startswith("<")


# --- both loaders, on bytes ----------------------------------------------------------------------------

LOADERS: dict[str, tuple[Callable[[Path], object], type[Exception]]] = {
    "scenario": (load_scenario, ScenarioError),
    "dump": (lambda path: load_inventory([str(path)]), InputError),
}


@pytest.mark.parametrize("loader", sorted(LOADERS))
@FUZZ
@given(raw=st.one_of(st.binary(max_size=400), st.text(max_size=400).map(str.encode)))
def test_loaders_on_arbitrary_bytes(loader: str, raw: bytes, tmp_path_factory: pytest.TempPathFactory) -> None:
    load, clean_error = LOADERS[loader]
    path = tmp_path_factory.getbasetemp() / f"fuzz-{loader}.yaml"
    path.write_bytes(raw)
    with contextlib.suppress(clean_error):
        load(path)


# --- the scenario loader --------------------------------------------------------------------------------


def test_the_real_files_load() -> None:
    assert len(SCENARIO_DOCS) >= 10 and len(MANIFEST_DOCS) >= 20
    for data in SCENARIO_DOCS:
        parse_scenario(data)


@FUZZ
@given(data=STRUCTURES)
def test_scenario_loader_on_arbitrary_structures(data: object) -> None:
    _scenario_or_error(data)
    _scenario_or_error({"apiVersion": "dralab.io/v1alpha1", "kind": "Scenario", "metadata": {"name": "f"},
                        "spec": data})


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_scenario_loader_on_mutated_scenarios(data: st.DataObject) -> None:
    doc = data.draw(st.sampled_from(SCENARIO_DOCS))
    _scenario_or_error(data.draw(mutated([doc]))[0])


# --- the dump loader ------------------------------------------------------------------------------------


@FUZZ
@given(docs=st.lists(STRUCTURES, max_size=3))
def test_dump_loader_on_arbitrary_structures(docs: list[object]) -> None:
    _inventory_or_error(docs)


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_dump_loader_on_mutated_manifests(data: st.DataObject) -> None:
    docs = data.draw(st.sampled_from([d for d in MANIFEST_DOCS if d]))
    _inventory_or_error(data.draw(mutated(docs)))


# --- the crashes the fuzzing found (each a traceback before its fix) -----------------------------------


@pytest.mark.parametrize("text", ["._", "a: ._", "0x_", "0b_", "-0b_", "+0x_"])
def test_yaml_numbers_without_digits_are_strings(text: str, tmp_path: Path) -> None:
    # PyYAML resolves these as numbers, then float('.') / int('', 16) raised ValueError (a traceback).
    path = tmp_path / "s.yaml"
    path.write_text(text)
    with pytest.raises(ScenarioError, match="expected a Scenario document|unknown field `a`"):
        load_scenario(path)
    with pytest.raises(InputError):
        load_inventory([str(path)])


def test_a_64_bit_overflow_in_a_pod_is_an_error_not_a_crash() -> None:
    # An int beyond 64 bits in a container field the request memo encodes: msgspec's OverflowError escaped.
    doc = copy.deepcopy(next(d for d in SCENARIO_DOCS if d["metadata"]["name"] == "quickstart"))
    doc["spec"]["workload"][0]["pod"]["spec"]["containers"][0]["restartPolicy"] = 1 << 70
    _scenario_or_error(doc)
    pod = copy.deepcopy(doc["spec"]["workload"][0]["pod"])
    pod["metadata"]["namespace"] = "default"
    _inventory_or_error([pod])
