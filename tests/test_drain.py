"""Scale-down of nodes with pods (core/autoscaler/disruption/drain.py, scale_down.py) and the workload controllers that
replace evicted pods (core/cluster/workload_controllers.py): upstream's drainability rules, the
removal simulation (with DRA claims deallocated and allocated again), one drain at a time, eviction,
replacement, Job backoffLimit."""

from __future__ import annotations

import random
from typing import Any

import pytest
from builders import GPU_TOLERATION, arrival, group, key, node_template, pod, scenario_doc, simulated, sourced_events

from dralab.core.autoscaler.disruption.drain import MOVES, STAYS, drainability
from dralab.core.cluster.workload_controllers import JOB_BACKOFF_LIMIT, replacements
from dralab.core.log.events import (
    ClaimAllocated,
    NodeDeleted,
    NodeTaintsChanged,
    PodBound,
    PodCreated,
    PodEvicted,
    PodFinished,
)
from dralab.core.scenario.load import ScenarioError, parse_scenario
from dralab.core.state.cluster import ClusterState
from dralab.core.state.objects import FAILED, REPLACES_ANNOTATION, PodState
from dralab.replay.simulation.sim import SimResult


def owned(manifest: dict[str, Any], kind: str = "ReplicaSet", name: str = "web-5d8f") -> dict[str, Any]:
    manifest["metadata"]["ownerReferences"] = [
        {"apiVersion": "apps/v1", "kind": kind, "name": name, "uid": f"uid-{name}", "controller": True}]
    return manifest


def run(d: dict[str, Any], seed: int = 1) -> SimResult:
    result: SimResult = simulated(d, seed, "drain.yaml")
    return result


def events_of(result: SimResult, kind: type) -> list[tuple[int, str, Any]]:
    return sourced_events(result.entries, kind)


def gpu_doc(workload: list[Any], nodes: int = 2) -> dict[str, Any]:
    """Two 8-GPU nodes, pods spread by least-allocated scoring."""
    return scenario_doc([group("gpu", min=0, max=4, delay="1m", template=node_template(gpu=8))],
                        nodes={"gpu": nodes}, workload=workload, duration="30m", score="least-allocated")


def gpu_pod(name: str, gpus: int) -> dict[str, Any]:
    return pod(name, gpu=gpus, tolerations=[GPU_TOLERATION])


# ---------------------------------------------------------------- a drain, end to end


def test_an_underused_node_is_drained_its_pod_replaced_and_placed_elsewhere() -> None:
    result = run(gpu_doc([arrival(0, owned(gpu_pod("web", 1))), arrival(0, gpu_pod("big", 4))]))
    bound = {e.pod: e.node for _, _, e in events_of(result, PodBound)}
    web_node = bound[key("web")]
    other = bound[key("big")]
    assert web_node != other
    # 1 of 8 GPUs used: unneeded from t=0, tainted after 10 min, evicted and deleted at the next scan
    assert [(t, e.name) for t, _, e in events_of(result, NodeTaintsChanged)] == [(600_000, web_node)]
    assert [(t, e.pod, e.node) for t, _, e in events_of(result, PodEvicted)] == [(610_000, key("web"), web_node)]
    assert [(t, e.name) for t, _, e in events_of(result, NodeDeleted)] == [(610_000, web_node)]
    # the ReplicaSet's replacement: a generated name, the same spec, placed on the node that is left
    created = [(t, source, e) for t, source, e in events_of(result, PodCreated) if source == "claims"]
    assert len(created) == 1
    t, _, replacement = created[0]
    assert t == 610_000
    meta = replacement.pod["metadata"]
    assert meta["name"].startswith("web-5d8f-") and len(meta["name"]) == len("web-5d8f-") + 5
    assert meta["annotations"][REPLACES_ANNOTATION] == "web"
    assert meta["ownerReferences"][0]["kind"] == "ReplicaSet"
    assert replacement.pod["spec"] == result.state.pods[key("web")].manifest["spec"]
    assert bound[replacement.key] == other
    state = result.state
    assert state.pods[key("web")].phase == FAILED and state.pods[key("web")].replaced_by == replacement.key
    assert list(state.nodes) == [other]


def test_the_same_seed_gives_the_same_replacement_names() -> None:
    d = gpu_doc([arrival(0, owned(gpu_pod("web", 1))), arrival(0, gpu_pod("big", 4))])
    assert run(d, seed=3).entries == run(d, seed=3).entries


def test_a_bare_pod_blocks_the_drain() -> None:
    result = run(gpu_doc([arrival(0, gpu_pod("web", 1)), arrival(0, gpu_pod("big", 4))]))
    assert events_of(result, PodEvicted) == [] and events_of(result, NodeDeleted) == []


def test_no_place_to_move_blocks_the_drain() -> None:
    """web (1 GPU) could go nowhere: the other node is full."""
    result = run(gpu_doc([arrival(0, owned(gpu_pod("web", 1))), arrival(0, gpu_pod("full", 8))]))
    assert events_of(result, PodEvicted) == [] and events_of(result, NodeDeleted) == []
    assert result.state.pods[key("web")].phase == "Running"


def test_one_drain_at_a_time() -> None:
    """Three nodes, two of them underused by replicated pods, room for both on the third: one is drained
    at 10 min (the other is its pod's destination in that loop, so it is not removed with it); the
    replacement lands where the scheduler puts it, and the second drain is tainted only once the first
    node is gone."""
    work = [arrival(0, owned(gpu_pod("a", 1), name="a")), arrival(0, owned(gpu_pod("b", 1), name="b")),
            arrival(0, gpu_pod("big", 4))]
    result = run(gpu_doc(work, nodes=3))
    deleted = [t for t, _, e in events_of(result, NodeDeleted)]
    assert len(deleted) == 2 and deleted[0] < deleted[1]
    tainted = [t for t, _, e in events_of(result, NodeTaintsChanged) if e.taints]
    assert tainted[1] >= deleted[0]  # never two nodes tainted for a drain at once
    assert sorted(result.state.pods[k].phase for k in result.state.pods_by_phase["Running"]) == ["Running"] * 3


def test_a_node_with_only_daemonset_pods_is_empty_and_its_daemon_is_not_replaced() -> None:
    daemon = owned(gpu_pod("agent", 0), kind="DaemonSet", name="agent")
    result = run(gpu_doc([arrival(0, daemon)], nodes=1))
    assert [(t, e.name) for t, _, e in events_of(result, NodeDeleted)] == [(610_000, "gpu-0")]
    assert events_of(result, PodEvicted) == []  # not evicted: it goes with its node
    assert [e.phase for _, _, e in events_of(result, PodFinished)] == ["Failed"]
    assert [e for _, source, e in events_of(result, PodCreated) if source == "claims"] == []


# ---------------------------------------------------------------- DRA claims move with their pod

DRA_OBJECTS = [
    {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "gpu.example.com"},
     "spec": {"selectors": [{"cel": {"expression": 'device.driver == "gpu.example.com"'}}]}},
    {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate", "metadata": {"name": "gpus"},
     "spec": {"spec": {"devices": {"requests": [
         {"name": "gpu", "exactly": {"deviceClassName": "gpu.example.com", "count": 1}}]}}}},
]


def dra_doc(policy: str) -> dict[str, Any]:
    template = node_template(gpu=0, cpu="32")
    g = group("dra", min=0, max=4, delay="1m", template=template)
    g["resourceSlices"] = [{"spec": {"driver": "gpu.example.com", "devices": [
        {"name": f"gpu-{i}"} for i in range(4)]}}]

    def claiming(name: str, cpu: str, claims: int) -> dict[str, Any]:
        p = pod(name, cpu=cpu)
        p["spec"]["resourceClaims"] = [{"name": f"gpu-{i}", "resourceClaimTemplateName": "gpus"}
                                       for i in range(claims)]
        p["spec"]["containers"][0]["resources"]["claims"] = [{"name": f"gpu-{i}"} for i in range(claims)]
        return p

    # web: 1 of 4 devices on its node (unneeded); big: 2 of 4 on the other (at the threshold: needed)
    d = scenario_doc([g], nodes={"dra": 2}, duration="30m", score="least-allocated",
                     workload=[arrival(0, owned(claiming("web", "1", 1))), arrival(0, claiming("big", "8", 2))])
    d["spec"]["objects"] = DRA_OBJECTS
    d["spec"]["policy"] = {"autoscaler": policy}
    return d


@pytest.mark.parametrize("policy", ["count", "dra"])
def test_a_pods_own_claim_is_deallocated_and_allocated_again_where_it_goes(policy: str) -> None:
    result = run(dra_doc(policy))
    bound = {e.pod: e.node for _, _, e in events_of(result, PodBound)}
    web_node = bound[key("web")]
    assert bound[key("big")] != web_node
    evicted = [(e.pod, e.node) for _, _, e in events_of(result, PodEvicted)]
    assert evicted == [(key("web"), web_node)]
    replacement = next(e for _, source, e in events_of(result, PodCreated) if source == "claims")
    allocations = [e for _, _, e in events_of(result, ClaimAllocated) if e.pod == replacement.key]
    assert len(allocations) == 1
    results = allocations[0].allocation["devices"]["results"]
    assert [r["pool"] for r in results] == [bound[replacement.key]] != [web_node]
    old_claims = [c for c in result.state.dra.claims.values() if key("web") in c.reserved_for]
    assert old_claims == []  # released, deallocated by the resourceclaim controller


# ---------------------------------------------------------------- the rules, one by one


def state_pod(manifest: dict[str, Any]) -> PodState:
    namespace = manifest["metadata"].get("namespace", "default")
    return PodState(key=key(manifest["metadata"]["name"], namespace), manifest=manifest, requests={},
                    priority=0, created_t=0, created_offset=0, run_for_ms=-1)


def annotated(manifest: dict[str, Any], **annotations: str) -> dict[str, Any]:
    manifest["metadata"]["annotations"] = {k.replace("_", "-"): v for k, v in annotations.items()}
    return manifest


SAFE = "cluster-autoscaler.kubernetes.io/safe-to-evict"


@pytest.mark.parametrize(("manifest", "expected"), [
    (owned(pod("rs")), (MOVES, "")),
    (owned(pod("job"), kind="Job", name="train"), (MOVES, "")),
    (owned(pod("sts"), kind="StatefulSet", name="db"), (MOVES, "")),
    (owned(pod("rc"), kind="ReplicationController", name="old"), (MOVES, "")),
    (pod("bare"), ("blocked", "NotReplicated")),
    (owned(pod("custom"), kind="MPIJob", name="mpi"), ("blocked", "NotReplicated")),
    (owned(pod("ds"), kind="DaemonSet", name="agent"), (STAYS, "")),
    ({**pod("mirror"), "metadata": {"name": "mirror", "annotations": {"kubernetes.io/config.mirror": "x"}}},
     (STAYS, "")),
    ({**pod("safe"), "metadata": {"name": "safe", "annotations": {SAFE: "true"}}}, (MOVES, "")),
    ({**owned(pod("unsafe")), "metadata": {**owned(pod("unsafe"))["metadata"], "annotations": {SAFE: "false"}}},
     ("blocked", "NotSafeToEvictAnnotation")),
    (owned(pod("sys", namespace="kube-system")), ("blocked", "UnmovableKubeSystemPod")),
])
def test_drainability_rules(manifest: dict[str, Any], expected: tuple[str, str]) -> None:
    assert drainability(state_pod(manifest)) == expected


def with_volumes(*volumes: dict[str, Any], safe: str = "") -> dict[str, Any]:
    manifest = owned(pod("vol"))
    manifest["spec"]["volumes"] = list(volumes)
    if safe:
        manifest["metadata"]["annotations"] = {"cluster-autoscaler.kubernetes.io/safe-to-evict-local-volumes": safe}
    return manifest


@pytest.mark.parametrize(("manifest", "outcome"), [
    (with_volumes({"name": "scratch", "emptyDir": {}}), "blocked"),
    (with_volumes({"name": "scratch", "emptyDir": {"medium": "Memory"}}), MOVES),
    (with_volumes({"name": "host", "hostPath": {"path": "/data"}}), "blocked"),
    (with_volumes({"name": "scratch", "emptyDir": {}}, safe="scratch"), MOVES),
    (with_volumes({"name": "cfg", "configMap": {"name": "c"}}), MOVES),
])
def test_local_storage_blocks_unless_declared_safe(manifest: dict[str, Any], outcome: str) -> None:
    assert drainability(state_pod(manifest))[0] == outcome


# ---------------------------------------------------------------- the controllers


def failed_state(*manifests: dict[str, Any]) -> ClusterState:
    state = ClusterState()
    for manifest in manifests:
        p = state_pod(manifest)
        p.phase = FAILED
        state.pods[p.key] = p
        state.pods_by_phase[FAILED][p.key] = None
    return state


def test_a_job_stops_replacing_pods_past_its_backoff_limit() -> None:
    pods = [owned(pod(f"train-{i}"), kind="Job", name="train") for i in range(JOB_BACKOFF_LIMIT + 2)]
    made = replacements(failed_state(*pods), random.Random(0))
    assert len(made) == JOB_BACKOFF_LIMIT


def test_only_replicated_pods_not_yet_replaced_are_replaced() -> None:
    state = failed_state(owned(pod("a")), pod("bare"), owned(pod("d"), kind="DaemonSet", name="d"), owned(pod("b")))
    state.pods[key("b")].replaced_by = key("web-5d8f-xxxxx")
    made = replacements(state, random.Random(0))
    assert [e.pod["metadata"]["annotations"][REPLACES_ANNOTATION] for e in made] == ["a"]  # type: ignore[union-attr]


@pytest.mark.parametrize(("refs", "message"), [
    ([{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web"}], "ownerReferences[0].uid: missing required"),
    ([{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web", "uid": "u", "controller": "yes"}],
     "ownerReferences[0].controller"),
    ([{"apiVersion": "v1", "kind": "A", "name": "a", "uid": "1", "controller": True},
      {"apiVersion": "v1", "kind": "B", "name": "b", "uid": "2", "controller": True}],
     "ownerReferences[1]: only one reference can have controller set to true"),
])
def test_bad_owner_references_say_where(refs: list[Any], message: str) -> None:
    manifest = gpu_pod("web", 1)
    manifest["metadata"]["ownerReferences"] = refs
    with pytest.raises(ScenarioError) as caught:
        parse_scenario(gpu_doc([arrival(0, manifest)]), "drain.yaml")
    assert message in str(caught.value) and "spec.workload[0].pod.metadata" in str(caught.value)
