"""cluster-autoscaler's scale-down and PodDisruptionBudgets, and expendable pods
(core/autoscaler/disruption/pdb.py, drain.py, scale_down.py): a budget that allows no disruption makes its pods'
node unremovable (NotEnoughPdb); a drain already chosen evicts what the budgets allow and retries the rest until
--max-pod-eviction-time, then gives the node up; expendable pods (priority < -10) neither count in utilization nor
block, in release profiles only."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from builders import GPU_TOLERATION, arrival, group, key, node_template, pod, scenario_doc, simulated, sourced_events

from dralab.core.analysis.whatif import _base, parse_node_groups
from dralab.core.autoscaler.disruption.drain import pods_to_move
from dralab.core.autoscaler.disruption.pdb import RemainingPdbs
from dralab.core.autoscaler.disruption.scale_down import utilization
from dralab.core.dra.api import load_objects
from dralab.core.kube.errors import ScenarioError
from dralab.core.kube.versions import make_profile, profile_config
from dralab.core.log.events import NodeDeleted, NodeTaintsChanged, PodEvicted, PodFinished, PodTerminating
from dralab.core.run.config import run_config
from dralab.core.scenario.load import parse_scenario
from dralab.core.scheduler.plugins.default_preemption import Budget
from dralab.core.state.objects import PodState
from dralab.replay.simulation.sim import SimResult


def owned(manifest: dict[str, Any], name: str) -> dict[str, Any]:
    manifest["metadata"]["ownerReferences"] = [
        {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": name, "uid": f"uid-{name}", "controller": True}]
    return manifest


def web(name: str, app: str = "web", gpus: int = 1) -> dict[str, Any]:
    manifest = owned(pod(name, gpu=gpus, tolerations=[GPU_TOLERATION]), f"{app}-5d8f")
    manifest["metadata"]["labels"] = {"app": app}
    return manifest


def pdb(name: str, app: str = "web", **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": name},
            "spec": {"selector": {"matchLabels": {"app": app}}, **spec}}


def doc(workload: list[Any], objects: list[dict[str, Any]] | None = None, *, duration: str = "15m"
        ) -> dict[str, Any]:
    """Two 8-GPU nodes; `big` (a bare 4-GPU pod, which blocks its node's drain) arrives first on one of them."""
    d = scenario_doc([group("gpu", min=0, max=4, delay="1m", template=node_template(gpu=8))], nodes={"gpu": 2},
                     workload=[arrival(0, pod("big", gpu=4, tolerations=[GPU_TOLERATION])), *workload],
                     duration=duration, score="least-allocated")
    if objects:
        d["spec"]["objects"] = list(objects)
    return d


def run(d: dict[str, Any]) -> SimResult:
    result: SimResult = simulated(d, 1, "pdb.yaml")
    return result


def times(result: SimResult, kind: type) -> list[tuple[int, Any]]:
    return [(t, e) for t, _, e in sourced_events(result.entries, kind)]


def evicted(result: SimResult) -> list[tuple[int, str]]:
    return [(t, e.pod) for t, e in times(result, PodEvicted)]


# ---------------------------------------------------------------- planning: NotEnoughPdb


def test_a_budget_that_allows_no_disruption_keeps_its_node() -> None:
    """Without the budget web's node is drained at 10 min (test_drain.py); with maxUnavailable 0 it stays."""
    work = [arrival("1s", web("web"))]
    assert evicted(run(doc(work))) == [(620_000, key("web"))]
    result = run(doc(work, [pdb("web-pdb", maxUnavailable=0)]))
    assert evicted(result) == [] and times(result, NodeDeleted) == [] and times(result, NodeTaintsChanged) == []


def test_a_budget_of_another_app_or_namespace_does_not_block() -> None:
    other_ns = pdb("web-pdb", maxUnavailable=0)
    other_ns["metadata"]["namespace"] = "prod"
    result = run(doc([arrival("1s", web("web"))], [pdb("db-pdb", app="db", maxUnavailable=0), other_ns]))
    assert evicted(result) == [(620_000, key("web"))]


def test_a_safe_to_evict_pod_is_not_held_by_its_budget() -> None:
    """The PDB rule is the last of rules.Default: safe-to-evict pods were let go before it (and the Eviction API
    still refuses them: the drain retries until the budget allows it, which it never does here, then gives up)."""
    manifest = web("web")
    manifest["metadata"]["annotations"] = {"cluster-autoscaler.kubernetes.io/safe-to-evict": "true"}
    result = run(doc([arrival("1s", manifest)], [pdb("web-pdb", maxUnavailable=0)]))
    taints = [(t, bool(e.taints)) for t, e in times(result, NodeTaintsChanged)]
    assert taints[:2] == [(610_000, True), (740_000, False)]  # 610 s + 5 s + 2 min: the first loop after it
    assert evicted(result) == []


def test_the_autoscaler_gets_the_budgets_only_when_the_scenario_has_some() -> None:
    plain = run_config(parse_scenario(doc([arrival("1s", web("web"))]), "pdb.yaml"))
    assert "pdbs" not in plain["autoscaler"] and "pdbs" not in plain["scheduler"]
    config = run_config(parse_scenario(doc([], [pdb("web-pdb", maxUnavailable=0)]), "pdb.yaml"))
    assert [p["metadata"]["name"] for p in config["autoscaler"]["pdbs"]] == ["web-pdb"]


# ---------------------------------------------------------------- actuation: eviction retries


def test_a_chosen_node_is_drained_one_budgeted_eviction_at_a_time() -> None:
    """Two web pods on one node, maxUnavailable 1: the node is removable (each pod alone is allowed: upstream marks
    it risky), the first eviction goes at 620 s, the second is refused until the first one's replacement runs
    elsewhere, and goes with the node at the next loop."""
    work = [arrival("1s", web("web-a")), arrival("2s", web("web-b"))]
    result = run(doc(work, [pdb("web-pdb", maxUnavailable=1)]))
    assert evicted(result) == [(620_000, key("web-a")), (630_000, key("web-b"))]
    assert [t for t, _ in times(result, NodeDeleted)] == [630_000]
    no_budget = run(doc(work))
    assert evicted(no_budget) == [(620_000, key("web-a")), (620_000, key("web-b"))]


def test_a_drain_under_way_is_not_rechecked() -> None:
    """Once its first eviction went, the drain goes on as upstream's actuator does: at 625 s a late pod takes the
    last free GPU where web-b would have moved, and web-b is still evicted (its replacement waits for a new node)
    instead of the node being given back by the re-check before delete."""
    work = [arrival("1s", web("web-a")), arrival("2s", web("web-b")),
            arrival("625s", pod("late", gpu=1, tolerations=[GPU_TOLERATION]))]
    d = doc(work, [pdb("web-pdb", maxUnavailable=1)])
    d["spec"]["workload"][0]["pod"] = pod("big", gpu=6, tolerations=[GPU_TOLERATION])
    result = run(d)
    assert evicted(result) == [(620_000, key("web-a")), (630_000, key("web-b"))]
    assert [(t, e.name) for t, e in times(result, NodeDeleted)] == [(630_000, "gpu-1")]


def test_evictions_refused_past_max_pod_eviction_time_give_the_node_up() -> None:
    """A pod under two budgets: each allows one disruption (the drainability rule lets it through), but the Eviction
    API refuses a pod with more than one budget. Retried every loop until 2 min after the drain began, then the
    taint is removed and nothing was evicted."""
    result = run(doc([arrival("1s", web("web"))], [pdb("a", maxUnavailable=1), pdb("b", maxUnavailable=1)],
                     duration="12m30s"))
    taints = [(t, bool(e.taints)) for t, e in times(result, NodeTaintsChanged)]
    assert taints[:2] == [(610_000, True), (740_000, False)]
    assert evicted(result) == [] and times(result, NodeDeleted) == []


def test_remaining_budgets_are_shared_by_the_candidates_of_a_loop() -> None:
    """basicRemainingPdbTracker: RemovePods takes from what the next candidate sees; the Eviction API's side."""
    budgets = RemainingPdbs([Budget("default", lambda labels: labels.get("app") == "web", 1)])

    def p(name: str, app: str) -> PodState:
        return PodState(key=f"default/{name}", manifest={"metadata": {"name": name, "labels": {"app": app}}},
                        requests={}, priority=0, created_t=0, created_offset=0, run_for_ms=-1)
    a, b, db = p("a", "web"), p("b", "web"), p("db", "db")
    assert not budgets.blocks(a) and not budgets.blocks(db)
    budgets.remove([a])
    assert budgets.blocks(b) and not budgets.blocks(db)
    fresh = RemainingPdbs([Budget("default", lambda labels: labels.get("app") == "web", 1)])
    assert fresh.evict(a) and not fresh.evict(b) and fresh.evict(db)


# ---------------------------------------------------------------- expendable pods


def test_an_expendable_pod_neither_counts_nor_blocks_in_release_profiles() -> None:
    """A bare 5-GPU pod of priority -20: as cluster-autoscaler leaves expendable pods out of its snapshot, its node
    is empty: deleted at 10 min, the pod ending with it (not evicted). The legacy model (a log without a
    `kubernetes` entry: release=False) still counts it: 5/8 used, and it blocks the drain (NotReplicated)."""
    filler = pod("filler", gpu=5, priority=-20, tolerations=[GPU_TOLERATION])
    result = run(doc([arrival("1s", filler)]))
    assert [(t, e.name) for t, e in times(result, NodeDeleted)] == [(620_000, "gpu-1")]
    assert evicted(result) == []
    assert (620_000, key("filler")) in [(t, e.pod) for t, e in times(result, PodFinished)]
    before = run(doc([arrival("1s", filler)], duration="5m")).state
    node = before.nodes["gpu-1"]
    assert utilization(before, node) == 5 / 8 and utilization(before, node, release=True) == 0
    assert pods_to_move(before, node) == ("NotReplicated", key("filler"))
    assert pods_to_move(before, node, skip_expendable=True) == []


def test_a_pod_at_the_cutoff_is_not_expendable() -> None:
    filler = pod("filler", gpu=5, priority=-10, tolerations=[GPU_TOLERATION])
    assert times(run(doc([arrival("1s", filler)])), NodeDeleted) == []


# ---------------------------------------------------------------- dralab whatif on a dump


def _dump_pod(name: str, priority: int, node: str | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"priority": priority,
                            "containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": "4"}}}]}
    status: dict[str, Any] = {"phase": "Pending"}
    if node is not None:
        spec["nodeName"], status["phase"] = node, "Running"
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "default", "labels": {"app": name},
                         "creationTimestamp": "2025-11-03T08:00:00Z"},
            "spec": spec, "status": status}


def _victims(tmp_path: Path, budgets: list[dict[str, Any]]) -> list[str]:
    """The pods `high` preempts in whatif's first settle of a dump: two 4-CPU nodes, each full with one pod."""
    nodes = [{"apiVersion": "v1", "kind": "Node", "metadata": {"name": n, "labels": {"kubernetes.io/hostname": n}},
              "spec": {}, "status": {"allocatable": {"cpu": "4", "memory": "16Gi", "pods": "110"},
                                     "conditions": [{"type": "Ready", "status": "True"}]}}
             for n in ("node-a", "node-b")]
    items = [*nodes, _dump_pod("cheap", -5, "node-a"), _dump_pod("dear", 0, "node-b"), _dump_pod("high", 1000),
             *budgets]
    path = tmp_path / f"dump-{len(budgets)}.yaml"
    path.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": items}))
    template = {"status": {"allocatable": {"cpu": "4", "pods": "110"}}}
    groups = parse_node_groups([{"name": "cpu", "max": 1, "template": template}])
    base = _base(load_objects([path]), groups, 0, profile_config(make_profile("1.37")))
    return [e.pod for r in base.records for e in r.events if isinstance(e, PodTerminating)]


def test_whatif_passes_the_dumps_budgets_to_preemption(tmp_path: Path) -> None:
    """pickOneNodeForPreemption prefers the node whose victims violate no budget: `cheap` (priority -5) is the
    cheaper victim, but its budget, as the dump's disruption controller wrote it, allows no disruption."""
    assert _victims(tmp_path, []) == ["pod/default/cheap"]
    guard = pdb("cheap-pdb", app="cheap", maxUnavailable=0)
    guard["status"] = {"disruptionsAllowed": 0, "currentHealthy": 1, "desiredHealthy": 1, "expectedPods": 1}
    assert _victims(tmp_path, [guard]) == ["pod/default/dear"]


def test_a_dumps_budget_is_checked(tmp_path: Path) -> None:
    bad = pdb("x", minAvailable=1, maxUnavailable=1)
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(bad))
    with pytest.raises(ScenarioError, match="minAvailable and maxUnavailable cannot be both set"):
        load_objects([path])
