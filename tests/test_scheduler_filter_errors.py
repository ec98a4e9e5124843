"""A DRA selector that fails at runtime is a scheduling error, as upstream (core/scheduler/filter_errors.py).

NVIDIA's gpu-test6 (tests/fixtures/explain/, origins in its README) reads `device.attributes["gpu.nvidia.com"].index`,
which current drivers no longer publish: CEL says "no such key: index". Upstream, DynamicResources' Filter returns
the allocator's error as an Error status, findNodesThatPassFilters aborts the attempt, and the pod's PodScheduled
condition is written with reason SchedulerError: the pod is not placed even on a node whose (older) driver still
publishes `index`, and cluster-autoscaler, which lists only Unschedulable pods, adds no node. Legacy logs keep
dralab's earlier model (that node counted as unable to take the claims, the pod placed elsewhere).
"""

from __future__ import annotations

import copy
import re
from typing import Any

import pytest
from builders import simulated_scenario
from test_explain_causes import GPU_TEST6, _gpu_test6_scenario, docs, verdict

from dralab.core.analysis.audit import audit
from dralab.core.dra.api import parse_documents
from dralab.core.kube.versions import LEGACY_PROFILE
from dralab.core.scenario.load import parse_scenario
from dralab.core.scheduler.reactor import Scheduler
from dralab.replay.simulation.sim import Simulator

MESSAGE = re.compile(r'running "DynamicResources" filter plugin: claim gpu-test6/[a-z0-9-]+: selector #0: '
                     r"CEL runtime error: no such key: index")


def both_nodes(version: str | None, today: int = 1, older: int = 1) -> dict[str, Any]:
    """gpu-test6 with `today` nodes of today's driver (no `index`) and `older` nodes of the older one, from the
    start; either node group may still grow."""
    doc = _gpu_test6_scenario(version)
    spec = doc["spec"]
    for group in spec["nodeGroups"]:
        group["min"] = 0
    spec["nodes"] = [n for n in ({"group": "a100", "count": today}, {"group": "a100-older-driver", "count": older})
                     if n["count"]]
    return doc


def run(doc: dict[str, Any], legacy: bool = False) -> Any:
    kw = {"profile": LEGACY_PROFILE} if legacy else {}
    return simulated_scenario(parse_scenario(copy.deepcopy(doc), "gpu-test6.yaml", **kw), 1)


@pytest.mark.parametrize("version", ["1.34", "1.35", "1.37"])
def test_a_selector_error_on_one_node_aborts_the_attempt(version: str) -> None:
    """The older driver's node would take all four pods; the other node's devices break the selector: upstream
    aborts every attempt with the Filter's error (SchedulerError), no pod is placed, no node is added."""
    result = run(both_nodes(version))
    assert sorted(result.state.nodes) == ["a100-0", "a100-older-driver-0"]
    assert not any(p.node for p in result.state.pods.values())
    pending = result.state.pending_pods()
    assert len(pending) == 4
    for p in pending:
        assert p.condition is not None
        assert (p.condition.reason, p.condition.cause) == ("SchedulerError", "selector-error")
        assert MESSAGE.fullmatch(p.condition.message), p.condition.message
        assert "on device" in p.condition.detail  # dralab's detail names request, claim and device


def test_the_legacy_profile_places_the_pods_where_the_selector_works() -> None:
    """Legacy logs do not change: the failing node is one that cannot take the claims, the others are tried."""
    result = run(both_nodes(None), legacy=True)
    assert result.state.pending_pods() == []
    assert {p.node for p in result.state.pods.values()} == {"a100-older-driver-0"}


def test_without_a_node_that_breaks_the_selector_the_pods_run() -> None:
    """The error needs a node whose devices the Filter reaches: on older drivers only, the selector works."""
    result = run(both_nodes("1.37", today=0, older=1))
    assert result.state.pending_pods() == []
    assert {p.node for p in result.state.pods.values()} == {"a100-older-driver-0"}


def test_the_only_node_breaking_the_selector_is_still_a_scheduler_error() -> None:
    """One node of today's driver only: SchedulerError (not Unschedulable), and no scale-up of the older group."""
    result = run(both_nodes("1.35", today=1, older=0))
    assert sorted(result.state.nodes) == ["a100-0"]
    assert {(p.condition.reason, p.condition.cause) for p in result.state.pending_pods() if p.condition} == {
        ("SchedulerError", "selector-error")}


@pytest.mark.parametrize("version", ["1.35", "1.37"])
def test_the_plain_framework_writes_the_same_log(version: str) -> None:
    """The fast path (node_search.py) and the plain loop (plain.py) agree, byte for byte."""
    def log(fast: bool) -> list[tuple[int, bytes]]:
        sim = Simulator(parse_scenario(both_nodes(version), "gpu-test6.yaml"), 1)
        for reactor in sim.reactors:
            if isinstance(reactor, Scheduler):
                reactor.fast_paths = fast
        entries: list[tuple[int, bytes]] = sim.run().entries
        return entries
    fast = log(True)
    assert fast == log(False)
    assert b"SchedulerError" in b"".join(e for _, e in fast)


def test_the_audit_still_explains_a_selector_error() -> None:
    """`dralab audit` names the cause whatever reason the pod's condition carries: SchedulerError pods included."""
    pods = [d for d in docs("gpu-test6-pods.yaml") if d["kind"] == "Pod"]
    for p in pods:
        p.setdefault("status", {})["conditions"] = [{
            "type": "PodScheduled", "status": "False", "reason": "SchedulerError",
            "message": 'running "DynamicResources" filter plugin: claim gpu-test6/x: selector #0: CEL runtime error: '
                       "no such key: index"}]
    others = docs(*GPU_TEST6[:2])
    report = audit(parse_documents(others + pods, "gpu-test6"))
    assert {verdict(report, p["metadata"]["name"])["reason"] for p in pods} == {"selector-error"}
