"""Gang scheduling (KEP-4671, 1.35 alpha) in the scheduler reactor, through the simulator: PreEnqueue
until the Workload and minCount members exist, members held at Permit, the whole gang bound in one
record, the group's deadline releasing every waiting member, and never a partial binding."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml
from builders import GPU_TOLERATION, arrival, group, key, node_template, pod, record, scenario_doc, with_1_35_gangs

from dralab.core.analysis.summary import summarize
from dralab.core.checks.invariants import check
from dralab.core.log.events import (
    ClaimAllocated,
    NodeCreated,
    NodeReady,
    PodBound,
    PodCreated,
    PodReserved,
    PodUnreserved,
    PodUnschedulable,
    ScaleUpRequested,
    WorkloadCreated,
    decode_record,
)
from dralab.core.scenario.load import ScenarioError, parse_scenario
from dralab.core.state.cluster import ClusterState
from dralab.replay.logs.logfile import LogFile
from dralab.replay.simulation.sim import simulate
from dralab.replay.simulation.verify import verify

ROOT = Path(__file__).resolve().parents[1]


def workload(name: str = "job", min_count: int = 4, *, group_name: str = "workers",
             namespace: str | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if namespace:
        meta["namespace"] = namespace
    return {"apiVersion": "scheduling.k8s.io/v1alpha1", "kind": "Workload", "metadata": meta,
            "spec": {"podGroups": [{"name": group_name, "policy": {"gang": {"minCount": min_count}}}]}}


def member(name: str = "worker", gpu: int = 4, *, workload_name: str = "job", pod_group: str = "workers",
           replica: str | None = None) -> dict[str, Any]:
    manifest = pod(name, gpu=gpu, tolerations=[GPU_TOLERATION])
    ref: dict[str, Any] = {"name": workload_name, "podGroup": pod_group}
    if replica is not None:
        ref["podGroupReplicaKey"] = replica
    manifest["spec"]["workloadRef"] = ref
    return manifest


def doc(workload_arrivals: list[dict[str, Any]], *, objects: list[dict[str, Any]] | None = None,
        nodes: int = 2, max_nodes: int | None = None, delay: str = "1m", gang_timeout: str | None = None,
        duration: str = "20m") -> dict[str, Any]:
    d = scenario_doc([group("gpu", max=max_nodes if max_nodes is not None else nodes, delay=delay,
                            template=node_template(gpu=8))],
                     nodes={"gpu": nodes} if nodes else None, workload=workload_arrivals, duration=duration)
    d["spec"]["objects"] = objects if objects is not None else [workload()]
    if gang_timeout is not None:
        d["spec"]["scheduler"] = {"gangTimeout": gang_timeout}
    return with_1_35_gangs(d)


def run(d: dict[str, Any], seed: int = 3):  # type: ignore[no-untyped-def]
    result = simulate(parse_scenario(d, "gang.yaml"), seed)
    assert result.violations == [], result.violations
    checked = verify(LogFile("x", {}, result.entries))
    assert checked.ok, checked.divergence and checked.divergence.render()
    return result


def records(result):  # type: ignore[no-untyped-def]
    return [(o, decode_record(p, o)) for o, p in result.entries]


def events_of(result, kind):  # type: ignore[no-untyped-def]
    return [(o, r.t, e) for o, r in records(result) for e in r.events if isinstance(e, kind)]


def gang_pods(result, base: str = "worker") -> list[Any]:  # type: ignore[no-untyped-def]
    return [p for p in result.state.pods.values() if p.key.split("/")[2].startswith(base)]


def test_a_gang_that_fits_binds_whole_in_one_record() -> None:
    result = run(doc([arrival(0, member(), count=4, run_for="5m")]))
    bound = events_of(result, PodBound)
    assert len(bound) == 4 and len({offset for offset, _, _ in bound}) == 1
    assert events_of(result, PodReserved) == []  # the quorum was met in the decision that placed them


def test_members_below_min_count_wait_outside_the_queue_and_the_autoscaler_ignores_them() -> None:
    result = run(doc([arrival(0, member(), count=3)], nodes=0, max_nodes=4))
    for p in gang_pods(result):
        assert p.condition is not None
        assert (p.condition.reason, p.condition.cause) == ("NotReadyForScheduling", "gang")
        assert p.condition.message == "waiting for minCount pods from a gang to appear in scheduling queue"
        assert p.condition.detail == "3 of minCount 4 pods of gang default/job/workers exist"
    assert events_of(result, ScaleUpRequested) == []  # invisible demand (KEP-5501 reason is not Unschedulable)
    assert summarize(result.state, [])["pods"]["pending_by_reason"] == {"gang": 3}


def test_the_last_member_arriving_lets_the_whole_gang_in() -> None:
    result = run(doc([arrival(0, member(), count=3), arrival("1m", member("late"))]))
    bound = events_of(result, PodBound)
    assert len(bound) == 4 and {t for _, t, _ in bound} == {60_000}
    assert len({offset for offset, _, _ in bound}) == 1


@pytest.mark.parametrize(
    ("objects", "detail"),
    [
        ([], "Workload default/job does not exist"),
        ([workload(group_name="other")], "pod group workers of Workload default/job does not exist"),
    ],
)
def test_a_missing_workload_or_pod_group_is_named(objects: list[dict[str, Any]], detail: str) -> None:
    result = run(doc([arrival(0, member(), count=4)], objects=objects))
    for p in gang_pods(result):
        assert p.condition is not None
        assert (p.condition.reason, p.condition.cause, p.condition.detail) == (
            "NotReadyForScheduling", "missing", detail)


def test_a_workload_created_later_releases_the_gang() -> None:
    """The Workload's arrival is an event the waiting members are retried on (upstream's Workload/Add hint)."""
    d = doc([arrival(0, member(), count=4)], objects=[])
    sc = parse_scenario(d, "gang.yaml")
    from dralab.replay.simulation.sim import Simulator

    sim = Simulator(sc, 3)
    late = record(WorkloadCreated(manifest={**workload(), "metadata": {"name": "job", "namespace": "default"}}),
                  t=120_000, source="scenario")
    sim.inputs.append(late)
    result = sim.run()
    assert result.violations == []
    bound = [e for o, p in result.entries for e in decode_record(p, o).events if isinstance(e, PodBound)]
    assert len(bound) == 4


def test_members_hold_their_room_at_permit_and_are_all_released_at_the_deadline() -> None:
    """One 8-GPU node, a gang of four 4-GPU pods: two can be placed, they wait at Permit holding the
    whole node (a one-GPU pod arriving meanwhile cannot use it), and at the 5-minute deadline both are
    rejected together; nothing of the gang ever binds. The freed room goes first to the other half of
    the gang (earlier in the queue than the small pod), which holds it for another five minutes, and so
    on (the released half comes back from the unschedulable pool after five minutes, just as the other
    half's deadline passes): a gang that can never fit keeps the node in turns and starves the small pod,
    as 1.35's per-pod Permit waits do."""
    result = run(doc([arrival(0, member(), count=4), arrival("1m", pod("small", gpu=1, tolerations=[GPU_TOLERATION]),
                                                                run_for="1m")],
                     nodes=1))
    reserved = events_of(result, PodReserved)
    first = [e for o, _, e in reserved if o == reserved[0][0]]
    assert len(first) == 2 and {e.deadline for e in first} == {300_000}
    released = events_of(result, PodUnreserved)
    first_release = [(t, e.pod) for o, t, e in released if o == released[0][0]]
    assert first_release == [(300_000, e.pod) for e in first]  # both together, at the deadline
    assert not any(e.pod.startswith("pod/default/worker") for _, _, e in events_of(result, PodBound))
    small = result.state.pods[key("small")]
    assert small.node is None and small.condition is not None and small.condition.cause == "capacity"
    assert small.attempts >= 4  # tried whenever room appeared, always too late
    for _, _, e in released:
        p = result.state.pods[e.pod]
        assert p.condition is not None
        assert p.condition.reason == "Unschedulable" and p.condition.cause in ("gang", "capacity")
    w0 = events_of(result, PodUnschedulable)
    assert any(e.message == "rejected due to timeout after waiting 5m0s at plugin GangScheduling" and e.cause == "gang"
               for _, _, e in w0)


def test_waiting_members_are_reported_as_gang_and_the_rest_for_their_own_reason() -> None:
    result = run(doc([arrival(0, member(), count=4)], nodes=1, duration="4m"))
    assert summarize(result.state, [])["pods"]["pending_by_reason"] == {"capacity": 2, "gang": 2}
    assert sum(n.reserved.get("nvidia.com/gpu", 0) for n in result.state.nodes.values()) == 8


def test_the_autoscaler_completes_a_gang_within_the_deadline() -> None:
    result = run(doc([arrival(0, member(), count=4, run_for="10m")], nodes=1, max_nodes=2, delay="1m"))
    bound = events_of(result, PodBound)
    ready = [t for _, t, e in events_of(result, NodeReady) if t > 0]
    assert len(bound) == 4 and len({o for o, _, _ in bound}) == 1
    assert ready and bound[0][1] >= ready[0]
    assert events_of(result, PodUnreserved) == []


@pytest.mark.parametrize(("nominate", "first_scale_up"), [(True, 30_000), (False, 310_000)])
def test_without_nominated_node_names_the_autoscaler_is_blind_to_waiting_members(
    nominate: bool, first_scale_up: int
) -> None:
    """KEP-5278 on (1.35's default): the two waiting members show as nominated to the full node, the
    autoscaler scales up for the other two at its first scan once they are 30 s old (GPU pods). Off: it sees
    an empty node that fits the two it is shown, and does nothing until the deadline releases the waiting ones."""
    d = doc([arrival(0, member(), count=4, run_for="10m")], nodes=1, max_nodes=2, delay="1m", duration="30m")
    d["spec"]["scheduler"] = {"featureGates": {"NominatedNodeNameForExpectation": nominate}}
    result = run(d)
    assert events_of(result, ScaleUpRequested)[0][1] == first_scale_up
    assert all(e.nominated is nominate for _, _, e in events_of(result, PodReserved))
    assert (events_of(result, PodUnreserved) == []) is nominate
    assert len(events_of(result, PodBound)) == 4


def test_provisioning_slower_than_the_deadline_releases_then_binds_when_nodes_come() -> None:
    """Partial visibility (reference: autoscaling.md, 3.4): the autoscaler provisions for the pods it
    sees, the placed members time out before the node is ready, then the gang binds whole."""
    result = run(doc([arrival(0, member(), count=4, run_for="10m")], nodes=1, max_nodes=2, delay="8m",
                     duration="30m"))
    released = events_of(result, PodUnreserved)
    bound = events_of(result, PodBound)
    assert released and released[0][1] == 300_000
    assert len(bound) == 4 and len({o for o, _, _ in bound}) == 1 and bound[0][1] > 300_000


def test_the_deadline_is_configurable() -> None:
    result = run(doc([arrival(0, member(), count=4)], nodes=1, gang_timeout="90s", duration="3m"))
    released = events_of(result, PodUnreserved)
    assert released and released[0][1] == 90_000
    assert released[0][2].reason == "rejected due to timeout after waiting 1m30s at plugin GangScheduling"


def test_a_member_arriving_after_its_gang_runs_binds_on_its_own() -> None:
    result = run(doc([arrival(0, member(), count=4, run_for="10m"), arrival("1m", member("extra", gpu=1))],
                     objects=[workload(min_count=2)], nodes=3))
    (extra,) = [(o, t) for o, t, e in events_of(result, PodBound) if e.pod == key("extra")]
    assert extra[1] == 60_000


def test_min_count_smaller_than_the_group_binds_as_soon_as_min_count_fit() -> None:
    result = run(doc([arrival(0, member(), count=4)], objects=[workload(min_count=2)], nodes=1))
    bound = events_of(result, PodBound)
    assert len(bound) == 2 and len({o for o, _, _ in bound}) == 1
    assert summarize(result.state, [])["pods"]["pending_by_reason"] == {"capacity": 2}


def test_each_replica_is_a_gang_of_its_own() -> None:
    d = doc([arrival(0, member("a", replica="r0"), count=2), arrival(0, member("b", replica="r1"), count=1)],
            objects=[workload(min_count=2)], nodes=2)
    result = run(d)
    bound = {e.pod for _, _, e in events_of(result, PodBound)}
    assert bound == {key("a-0"), key("a-1")}
    b = result.state.pods[key("b")]
    assert b.condition is not None and b.condition.detail == "1 of minCount 2 pods of gang default/job/workers/r1 exist"


def test_basic_policy_pods_schedule_one_by_one() -> None:
    basic = workload()
    basic["spec"]["podGroups"][0]["policy"] = {"basic": {}}
    result = run(doc([arrival(0, member(), count=3)], objects=[basic], nodes=1))
    assert len(events_of(result, PodBound)) == 2


def test_gang_members_with_dra_claims_allocate_when_the_gang_binds() -> None:
    d = with_1_35_gangs(yaml.safe_load((ROOT / "scenarios" / "dra-quickstart.yaml").read_text()))
    d["spec"]["objects"].append(workload(min_count=2))
    train = copy.deepcopy(next(a for a in d["spec"]["workload"] if a["pod"]["metadata"]["name"] == "train"))
    train["pod"]["metadata"]["name"] = "worker"
    train["pod"]["spec"]["workloadRef"] = {"name": "job", "podGroup": "workers"}
    train["at"], train["count"] = 0, 2
    d["spec"]["workload"] = [train]
    result = run(d)
    bound = events_of(result, PodBound)
    allocated = events_of(result, ClaimAllocated)
    assert len(bound) == 2 and {o for o, _, _ in allocated} == {bound[0][0]}
    domains = {tuple(sorted({r["device"] for r in e.allocation["devices"]["results"]})) for _, _, e in allocated}
    assert domains == {("gpu-0", "gpu-1", "gpu-2", "gpu-3"), ("gpu-4", "gpu-5", "gpu-6", "gpu-7")}


def test_the_same_seed_gives_the_same_log_with_gangs() -> None:
    d = doc([arrival(0, member(), count=4, run_for="10m"), arrival("30s", member("b", workload_name="job2"),
                                                                      count=2)],
            objects=[workload(), workload("job2", 2)], nodes=1, max_nodes=3, delay="2m")
    a, b = simulate(parse_scenario(d), 5), simulate(parse_scenario(d), 5)
    assert a.entries == b.entries


# ---------------------------------------------------------------- invariants and the fold


def _fold(*recs) -> ClusterState:  # type: ignore[no-untyped-def]
    state = ClusterState()
    for i, r in enumerate(recs, start=1):
        state.apply(i, r)
    return state


def _cluster() -> list[Any]:
    from builders import checked_node, checked_pod

    node = checked_node(node_template(gpu=8), "n0")
    wl = {**workload(min_count=2), "metadata": {"name": "job", "namespace": "default"}}
    pods = [PodCreated(pod=checked_pod(member(f"w{i}"))) for i in range(2)]
    return [record(NodeCreated(name="n0", group="", node=node), NodeReady(name="n0"), WorkloadCreated(manifest=wl),
                   *pods)]


def test_binding_part_of_a_gang_is_a_violation() -> None:
    state = _fold(*_cluster(), record(PodBound(pod=key("w0"), node="n0"), source="scheduler"))
    assert [v.invariant for v in check(state)] == ["gang-never-partially-bound"]
    assert "1 of minCount 2" in check(state)[0].message


def test_reservations_count_against_the_node_and_are_freed_by_binding_or_release() -> None:
    reserve = record(PodReserved(pod=key("w0"), node="n0", allocations={}, deadline=10), source="scheduler")
    state = _fold(*_cluster(), reserve)
    assert state.nodes["n0"].reserved == {"nvidia.com/gpu": 4, "pods": 1}
    state.apply(3, record(PodUnreserved(pod=key("w0")), source="scheduler"))
    assert state.nodes["n0"].reserved == {"nvidia.com/gpu": 0, "pods": 0}
    assert state.gang.reservations == {}
    state = _fold(*_cluster(), reserve, record(PodBound(pod=key("w0"), node="n0"), PodBound(pod=key("w1"), node="n0")))
    assert state.nodes["n0"].reserved["nvidia.com/gpu"] == 0 and state.nodes["n0"].used["nvidia.com/gpu"] == 8
    assert check(state) == []


def test_an_overcommitting_reservation_is_a_violation() -> None:
    recs = _cluster()
    bind = record(PodCreated(pod={**pod("big", gpu=8), "metadata": {"name": "big", "namespace": "default"}}),
                  PodBound(pod=key("big"), node="n0"))
    reserve = record(PodReserved(pod=key("w0"), node="n0", allocations={}, deadline=10))
    state = _fold(*recs, bind, reserve)
    messages = [v.message for v in check(state) if v.invariant == "no-overcommit"]
    assert messages == ["node n0: nvidia.com/gpu 12 in use > 8 allocatable (4 held for waiting gang members)"]


# ---------------------------------------------------------------- bad input


@pytest.mark.parametrize(
    ("edit", "path", "message"),
    [
        (lambda d: d["spec"]["objects"][0].update(apiVersion="scheduling.k8s.io/v1beta1"),
         "spec.objects[0].apiVersion", "Kubernetes 1.35 does not serve Workload in `scheduling.k8s.io/v1beta1` "
         "(served by 1.37); it serves scheduling.k8s.io/v1alpha1"),
        (lambda d: d["spec"]["objects"][0]["spec"]["podGroups"][0]["policy"]["gang"].update(minCount=0),
         "spec.objects[0].spec.podGroups[0].policy.gang.minCount", "must be >= 1, got 0"),
        (lambda d: d["spec"]["objects"][0]["spec"]["podGroups"][0]["policy"].update(basic={}),
         "spec.objects[0].spec.podGroups[0].policy", "exactly one of `basic` and `gang` must be set"),
        (lambda d: d["spec"]["objects"][0]["spec"].update(podGroups=[]),
         "spec.objects[0].spec.podGroups", "a Workload needs at least one pod group"),
        (lambda d: d["spec"]["objects"][0]["spec"]["podGroups"].append(
            copy.deepcopy(d["spec"]["objects"][0]["spec"]["podGroups"][0])),
         "spec.objects[0].spec.podGroups[1].name",
         "duplicate pod group `workers` (also spec.objects[0].spec.podGroups[0])"),
        (lambda d: d["spec"]["workload"][0]["pod"]["spec"]["workloadRef"].pop("podGroup"),
         "spec.workload[0].pod.spec.workloadRef.podGroup", "missing required field"),
        (lambda d: d["spec"]["workload"][0]["pod"]["spec"]["workloadRef"].update(podGroupReplicaKey="Bad_Key"),
         "spec.workload[0].pod.spec.workloadRef.podGroupReplicaKey", None),
        (lambda d: d["spec"].update(scheduler={"gangTimeout": "0s"}), "spec.scheduler.gangTimeout", None),
        (lambda d: d["spec"].update(scheduler={"featureGates": {"GangScheduling": False}}),  # on in spec.kubernetes
         "spec.scheduler.featureGates.GangScheduling", None),
        (lambda d: d["spec"].update(scheduler={"featureGates": {"NoSuchGate": True}}),
         "spec.scheduler.featureGates.NoSuchGate", None),
        (lambda d: d["spec"].update(scheduler={"featureGates": {"NominatedNodeNameForExpectation": "yes"}}),
         "spec.scheduler.featureGates.NominatedNodeNameForExpectation", None),
    ],
)
def test_bad_gang_input_is_refused_with_its_path(edit, path: str, message: str | None) -> None:  # type: ignore[no-untyped-def]
    d = doc([arrival(0, member(), count=4)])
    edit(d)
    with pytest.raises(ScenarioError) as info:
        parse_scenario(d, "gang.yaml")
    assert info.value.path == path
    if message is not None:
        assert info.value.message == message


def _shared_claim_doc(second_member_gpus: str) -> dict[str, Any]:
    """dra-quickstart's node, a gang of two whose members each take one GPU of their own (the second
    member's template is `second_member_gpus`) and share the claim `shared`, and a pod outside the gang,
    arriving 10 s later, that names `shared` too."""
    d = with_1_35_gangs(yaml.safe_load((ROOT / "scenarios" / "dra-quickstart.yaml").read_text()))
    d["spec"]["objects"] += [
        workload(min_count=2),
        {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": "shared"},
         "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.example.com"}}]}}},
        {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate", "metadata": {"name": "nine-gpus"},
         "spec": {"spec": {"devices": {"requests": [
             {"name": "gpus", "exactly": {"deviceClassName": "gpu.example.com", "count": 9}}]}}}},
    ]

    def gpu_pod(name: str, claims: list[dict[str, str]], gang: bool) -> dict[str, Any]:
        spec: dict[str, Any] = {"resourceClaims": claims,
                                "containers": [{"name": "main", "image": "busybox",
                                                "resources": {"claims": [{"name": c["name"]} for c in claims]}}]}
        if gang:
            spec["workloadRef"] = {"name": "job", "podGroup": "workers"}
        return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec}

    shared = {"name": "shared", "resourceClaimName": "shared"}
    d["spec"]["workload"] = [
        {"at": 0, "pod": gpu_pod("worker-0", [{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}, shared], True)},
        {"at": 0, "pod": gpu_pod("worker-1", [{"name": "gpu", "resourceClaimTemplateName": second_member_gpus},
                                              shared], True)},
        {"at": "10s", "pod": gpu_pod("solo", [shared], False)},
    ]
    return d


def test_a_claim_shared_by_a_gang_is_allocated_once_and_reserved_by_every_consumer() -> None:
    doc = _shared_claim_doc("one-gpu")
    # the fixed behaviour (1.36.0+, kubernetes#137647); 1.35 itself has kubernetes#137617 (test_upstream_scheduler_bugs)
    doc["spec"]["kubernetes"]["bugs"] = {"kubernetes#137617": False}
    result = run(doc)
    shared = result.state.dra.claims["claim/default/shared"]
    assert set(shared.reserved_for) == {key("worker-0"), key("worker-1"), key("solo")}
    assert [e.claim for _, _, e in events_of(result, ClaimAllocated)].count("claim/default/shared") == 1
    bound = {e.pod: o for o, _, e in events_of(result, PodBound)}
    assert bound[key("worker-0")] == bound[key("worker-1")] < bound[key("solo")]


def test_a_claim_held_by_a_waiting_gang_is_not_given_to_another_pod_until_released() -> None:
    """worker-1 can never fit (nine GPUs on an eight-GPU node): worker-0 waits at Permit holding the
    shared claim's in-flight allocation; `solo` waits for it, and gets it once the deadline releases it."""
    result = run(_shared_claim_doc("nine-gpus"))
    bound = {e.pod: t for _, t, e in events_of(result, PodBound)}
    assert set(bound) == {key("solo")} and bound[key("solo")] == 300_000
    shared = result.state.dra.claims["claim/default/shared"]
    assert set(shared.reserved_for) == {key("solo")}


def test_gang_quickstart_tells_its_story() -> None:
    """scenarios/gang-quickstart.yaml: the placed members time out once before the slow GPU node is
    Ready, then the gang binds whole; the summary counts it. With the KEP-5278 gate off, the autoscaler
    waits for the deadline before it provisions anything."""
    d = yaml.safe_load((ROOT / "scenarios" / "gang-quickstart.yaml").read_text())
    result = run(d, seed=4)
    summary = summarize(result.state, [])
    assert summary["gangs"] == {"total": 1, "bound": 1, "waiting": 0, "timeouts": 2}
    assert summary["pods"]["pending"] == 0
    assert events_of(result, ScaleUpRequested)[0][1] == 30_000  # the GPU pods 30 s old (pod-age buffer)
    d["spec"]["scheduler"]["featureGates"] = {"NominatedNodeNameForExpectation": False}
    blind = run(d, seed=4)
    assert events_of(blind, ScaleUpRequested)[0][1] == 310_000
    assert summarize(blind.state, [])["gangs"]["bound"] == 1


def test_the_cli_summary_reports_gangs(tmp_path: Path) -> None:
    import json
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-m", "dralab", "sim", str(ROOT / "scenarios" / "gang-quickstart.yaml"),
                          "-o", "json"], capture_output=True, text=True, check=True)
    summary = json.loads(out.stdout)
    assert summary["gangs"]["bound"] == 1 and summary["invariant_violations"] == []
