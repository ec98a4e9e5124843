"""The upstream bugs of the `su` slice of issue 22 (core/kube/bugs.py), each scenario of scenarios/upstream/ with
the bug and without it: autoscaler#7780 (DRA node readiness), autoscaler#10199 (cluster-api scale-from-zero
template), autoscaler#9150 (spread limits a scale-up to one node per loop)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from builders import simulated

from dralab.core.kube.bugs import BUGS
from dralab.core.log.events import AutoscalerEvent, ScaleUpRequested, decode_record

UPSTREAM = Path(__file__).resolve().parents[1] / "scenarios" / "upstream"


def load(name: str, **kubernetes: Any) -> dict[str, Any]:
    d = yaml.safe_load((UPSTREAM / name).read_text())
    d["spec"]["kubernetes"] = {**d["spec"]["kubernetes"], **kubernetes}
    return d


def scale_ups(result: Any) -> list[tuple[int, str, int]]:
    out = []
    for o, p in result.entries:
        rec = decode_record(p, o)
        out += [(rec.t, e.group, e.delta) for e in rec.events if isinstance(e, ScaleUpRequested)]
    return out


def test_the_bugs_are_registered_with_their_versions() -> None:
    assert BUGS["autoscaler#7780"].present == () and BUGS["autoscaler#7780"].fixed_in == "1.33"
    assert BUGS["autoscaler#9150"].present == ("1.34", "1.35", "1.36", "1.37") and not BUGS["autoscaler#9150"].fixed_in
    assert BUGS["autoscaler#10199"].present == ("1.35", "1.36")


def test_7780_a_ready_node_without_slices_is_scaled_up_for_again() -> None:
    bug = simulated(load("dra-node-readiness.yaml"), 3)
    assert [(t, n) for t, _, n in scale_ups(bug)] == [(10_000, 2), (140_000, 2), (270_000, 2)]
    fixed = simulated(load("dra-node-readiness.yaml", bugs={"autoscaler#7780": False}), 3)
    assert [(t, n) for t, _, n in scale_ups(fixed)] == [(10_000, 2)]
    for result in (bug, fixed):
        assert all(p.bound_t == 310_000 for p in result.state.pods.values())


def test_10199_clusterapi_groups_never_scale_from_zero_for_dra_pods() -> None:
    bug = simulated(load("clusterapi-dra-scale-from-zero.yaml"), 1)  # 1.36: the bug is on
    assert scale_ups(bug) == []
    said = {e.message for o, p in bug.entries for e in decode_record(p, o).events if isinstance(e, AutoscalerEvent)}
    assert said == {"pod didn't trigger scale-up: 1 cannot allocate all claims"}
    for fixed in (load("clusterapi-dra-scale-from-zero.yaml", version="1.37"),
                  load("clusterapi-dra-scale-from-zero.yaml", bugs={"autoscaler#10199": False})):
        assert [(g, n) for _, g, n in scale_ups(simulated(fixed, 1))] == [("a100", 1)]
    with_a_node = load("clusterapi-dra-scale-from-zero.yaml")
    with_a_node["spec"]["nodes"] = [{"group": "a100", "count": 1}]
    result = simulated(with_a_node, 1)  # the template is the node's own slices: no scale-up needed, it runs
    assert all(p.bound_t >= 0 for p in result.state.pods.values())
    plain = load("clusterapi-dra-scale-from-zero.yaml")
    del plain["spec"]["nodeGroups"][0]["template"]["metadata"]["annotations"]  # not a cluster-api group
    assert [(g, n) for _, g, n in scale_ups(simulated(plain, 1))] == [("a100", 1)]


def test_9150_spread_scales_up_one_group_at_a_time() -> None:
    bug = simulated(load("spread-one-node-per-loop.yaml"), 1)
    assert scale_ups(bug) == [(10_000, "zone-b", 1), (20_000, "zone-a", 2), (30_000, "zone-b", 1)]
    assert max(p.bound_t for p in bug.state.pods.values()) == 90_000
    fixed = simulated(load("spread-one-node-per-loop.yaml", bugs={"autoscaler#9150": False}), 1)
    assert sorted(scale_ups(fixed)) == [(10_000, "zone-a", 2), (10_000, "zone-b", 2)]
    assert max(p.bound_t for p in fixed.state.pods.values()) == 70_000
