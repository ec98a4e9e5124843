"""The bring-up benchmark (benchmarks/bringup_bench.py) at a small size, and the fast paths it relies on:
the fold's reuse of a slice shape's conversion and the drivers' rendering give exactly what the plain
converter and renderer give."""

from __future__ import annotations

import copy
import sys
from pathlib import Path
from typing import Any

import pytest

from dralab.core.cluster.nodes import copier
from dralab.core.controllers.drivers import driver_slices
from dralab.core.dra.convert import convert_slice
from dralab.core.scenario.dra import render_slice_templates
from dralab.core.scenario.load import parse_scenario
from dralab.core.state.dra import _slice_shapes, convert_published_slice

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

import bringup_bench  # noqa: E402

TEMPLATES: list[dict[str, Any]] = [
    {"spec": {"driver": "gpu.example.com", "devices": [
        {"name": f"gpu-{i}", "attributes": {"index": {"int": i}, "model": {"string": "H100"},
                                            "gpu.example.com/ok": {"bool": True}, "v": {"version": "1.2.3"}},
         "capacity": {"memory": {"value": "80Gi"}},
         **({"taints": [{"key": "k", "value": "v", "effect": "NoSchedule"}]} if i == 1 else {})}
        for i in range(4)]}},
    {"spec": {"driver": "gpu.example.com", "pool": {"generation": 3}, "devices": [{"name": "nic-0"}]}},
    {"metadata": {"labels": {"a": "b"}}, "spec": {"driver": "net.example.com", "sharedCounters": [
        {"name": "set", "counters": {"c": {"value": "4"}}}]}},
]


def _checked_templates() -> list[dict[str, Any]]:
    doc = bringup_bench.scenario(2)
    doc["spec"]["nodeGroups"][0]["resourceSlices"] = copy.deepcopy(TEMPLATES)
    return list(parse_scenario(doc, "t").node_groups[0].resource_slices)


def _same_slice(a: Any, b: Any) -> None:
    # every field (Devices compare by identity: field by field)
    assert {k: v for k, v in vars(a).items() if k != "devices"} == {k: v for k, v in vars(b).items() if k != "devices"}
    assert a.manifest is not None and a.manifest == b.manifest
    assert [vars(d) for d in a.devices] == [vars(d) for d in b.devices]


def test_rendering_is_render_slice_templates() -> None:
    templates = _checked_templates()
    copiers = [copier(t) for t in templates]
    for node in ("gpu-0", "gpu-17", "a.b-c"):
        assert render_slice_templates(templates, node, copiers) == render_slice_templates(templates, node)
        assert [list(m) for m in render_slice_templates(templates, node, copiers)] == \
            [list(m) for m in render_slice_templates(templates, node)]  # same key order: same bytes
    slices = driver_slices(templates, "gpu-3", "gpu.example.com", 1, frozenset({"gpu-2"}))
    assert [s["spec"]["pool"]["generation"] for s in slices] == [2, 4]


def test_a_reused_shape_converts_as_convert_slice() -> None:
    _slice_shapes.clear()
    templates = _checked_templates()
    for node in ("gpu-0", "gpu-1", "node.example.com", "gpu-0"):
        for manifest in render_slice_templates(templates, node):
            _same_slice(convert_published_slice(manifest), convert_slice(manifest, ""))
    assert len(_slice_shapes) == 3  # one shape per template, whatever the node


@pytest.mark.parametrize("field,value", [
    ("name", "Bad_Name"), ("name", ""), ("pool", "x" * 300), ("pool", "a//b"), ("pool", 7), ("node", "Bad_Node"),
    ("node", ""),
])
def test_a_reused_shape_fails_as_convert_slice(field: str, value: Any) -> None:
    _slice_shapes.clear()
    templates = _checked_templates()
    convert_published_slice(render_slice_templates(templates, "gpu-0")[0])  # the shape is known
    bad = render_slice_templates(templates, "gpu-1")[0]
    if field == "name":
        bad["metadata"]["name"] = value
    elif field == "pool":
        bad["spec"]["pool"]["name"] = value
    else:
        bad["spec"]["nodeName"] = value
    with pytest.raises(ValueError) as plain:
        convert_slice(bad, "")
    with pytest.raises(ValueError) as reused:
        convert_published_slice(bad)
    assert str(reused.value) == str(plain.value)


@pytest.mark.live
@pytest.mark.timeout(120)
@pytest.mark.parametrize("mode,shards", [("scale-up", 2), ("start", 1)])
async def test_bringup_benchmark_smoke(redis_url: str, ray_session: None, mode: str, shards: int) -> None:
    sc = parse_scenario(bringup_bench.scenario(50, 8, mode), "bringup")
    row = await bringup_bench.run_once(sc, 50, shards, mode, redis_url)
    assert row["seconds"] is not None and row["completed"] and row["error"] is None
    assert (row["ready"], row["slices"], row["devices"]) == (50, 50, 400)
    assert row["anomalies"] == []
    assert row["stages_s"]["published"] <= row["seconds"]
    if mode == "scale-up":
        assert row["decisions"]["cloud"] == 1 and sum(v for k, v in row["decisions"].items()
                                                     if k.startswith("drivers")) == shards
