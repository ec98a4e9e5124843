"""Fragmentation in the scheduler reactor: the fragmentation-aware score keeps room for the workload's
big pods, and a pod whose devices are free in total but split over nodes is pending for
`fragmentation`, not `capacity` (extended resources and DRA claims alike)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from builders import GPU_TOLERATION, arrival, group, key, node_template, pod, scenario_doc

from dralab.core.scenario.load import parse_scenario
from dralab.core.scheduler.plugins.fragmentation import expected_fragmentation, fragmentation_score
from dralab.replay.logs.logfile import LogFile
from dralab.replay.simulation.sim import simulate
from dralab.replay.simulation.verify import verify

ROOT = Path(__file__).resolve().parents[1]


def run(d: dict[str, Any], seed: int = 1):  # type: ignore[no-untyped-def]
    result = simulate(parse_scenario(d, "frag.yaml"), seed)
    assert result.violations == [], result.violations
    assert verify(LogFile("x", {}, result.entries)).ok
    return result


def pinned(name: str, gpu: int, pool: str) -> dict[str, Any]:
    return pod(name, gpu=gpu, node_selector={"pool": pool}, tolerations=[GPU_TOLERATION])


def two_nodes(score: str) -> dict[str, Any]:
    """Nodes a (3 of 8 GPUs busy) and b (4 of 8 busy); a 1-GPU pod, then two 4-GPU pods."""
    groups = [group(g, max=1, template=node_template(gpu=8, labels={"pool": g})) for g in ("a", "b")]
    workload = [
        arrival(0, pinned("busy-a", 3, "a")),
        arrival(0, pinned("busy-b", 4, "b")),
        arrival("10s", pod("small", gpu=1, tolerations=[GPU_TOLERATION])),
        arrival("20s", pod("big", gpu=4, tolerations=[GPU_TOLERATION]), count=2),
    ]
    return scenario_doc(groups, nodes={"a": 1, "b": 1}, workload=workload, score=score, duration="1m")


def test_the_fragmentation_score_keeps_room_that_binpacking_splits() -> None:
    packed = run(two_nodes("most-allocated"))
    assert packed.state.pods[key("small")].node == "b-0"  # the fuller node: leaves 5 and 3 free
    (stuck,) = packed.state.pending_pods()
    assert stuck.condition is not None and stuck.condition.cause == "fragmentation"  # 1 + 3 free, split

    aware = run(two_nodes("fragmentation"))
    assert aware.state.pods[key("small")].node == "a-0"  # leaves 4 and 4: both big pods fit
    assert aware.state.pending_pods() == []


def test_the_score_prefers_filling_a_leftover_and_ties_go_to_the_fuller_node() -> None:
    histogram = {1: 0.5, 4: 0.5}
    assert expected_fragmentation(3, histogram) == 1.5 and expected_fragmentation(4, histogram) == 0
    # a 1-device pod: a node with 1 free (fragment used up) beats a node with 4 free (would break a 4)
    assert fragmentation_score(1, 1, histogram, 0.9) > fragmentation_score(1, 4, histogram, 0.5)
    assert fragmentation_score(1, 8, histogram, 0.2) > fragmentation_score(1, 8, histogram, 0.1)
    assert fragmentation_score(0, 8, histogram, 0.5) > fragmentation_score(0, 8, histogram, 0.4)


def dra_doc(busy: int, ask: int) -> dict[str, Any]:
    """Two dra-quickstart nodes, `busy` one-GPU pods on each, then a pod asking for `ask` GPUs (no
    topology constraint)."""
    d = yaml.safe_load((ROOT / "scenarios" / "dra-quickstart.yaml").read_text())
    spec = d["spec"]
    spec["policy"] = {"autoscaler": "count"}
    spec["nodes"] = [{"group": "h100-8x", "count": 2}]
    spec["nodeGroups"][0]["max"] = 2
    spec["objects"].append({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
                            "metadata": {"name": "many"},
                            "spec": {"spec": {"devices": {"requests": [
                                {"name": "gpus", "exactly": {"deviceClassName": "gpu.example.com", "count": ask}}]}}}})
    one = next(a for a in spec["workload"] if a["pod"]["metadata"]["name"] == "long-a")["pod"]
    fill = []
    for node in ("h100-8x-0", "h100-8x-1"):
        filler = yaml.safe_load(yaml.safe_dump(one))
        filler["metadata"] = {"name": f"fill-{node}"}
        filler["spec"]["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}]}}}
        fill.append({"at": 0, "count": busy, "pod": filler})
    big = yaml.safe_load(yaml.safe_dump(one))
    big["metadata"] = {"name": "big"}
    big["spec"]["resourceClaims"] = [{"name": "gpus", "resourceClaimTemplateName": "many"}]
    big["spec"]["containers"][0]["resources"]["claims"] = [{"name": "gpus"}]
    spec["workload"] = [*fill, {"at": "10s", "pod": big}]
    return d


@pytest.mark.parametrize(("busy", "ask", "cause"), [(4, 5, "fragmentation"), (5, 7, "capacity")])
def test_dra_devices_split_over_nodes_are_fragmentation_not_capacity(busy: int, ask: int, cause: str) -> None:
    result = run(dra_doc(busy, ask))
    big = result.state.pods[key("big")]
    assert big.node is None and big.condition is not None
    assert big.condition.cause == cause
    if cause == "fragmentation":
        assert re.fullmatch(r"request gpus of claim default/big-gpus-\w{5} needs 5 devices: 8 free matching "
                            r"devices across 2 nodes, at most 4 on one node", big.condition.detail)
