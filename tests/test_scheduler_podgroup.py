"""The PodGroup scheduling cycle (kube-scheduler 1.36/1.37, KEP-4671 with KEP-5832; topology, KEP-5732) in the
scheduler reactor, through the simulator: the group placed in one cycle, all or nothing; PreEnqueue until the
PodGroup and minCount pods exist; the PodGroup's condition; basic groups; the priority mismatch; a topology
domain per label value; and the log verifies (replay decides the same)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from builders import GPU_TOLERATION, PODGROUP_RELEASE, arrival, group, node_template, pod, podgroup_doc, simulated

from dralab.core.log.events import (
    ClaimAllocated,
    ClaimReleased,
    ClaimReserved,
    PodBound,
    PodEvicted,
    PodGroupConditionSet,
    PodTerminating,
    PodUnschedulable,
    ResourceClaimCreated,
    decode_record,
)

V1BETA1 = "scheduling.k8s.io/v1beta1"


def podgroup(name: str = "train", min_count: int | None = 4, *, topology: str | None = None,
             priority: int | None = None) -> dict[str, Any]:
    """A PodGroup in the v1beta1 (hub) shape, as the API checks leave it."""
    spec: dict[str, Any] = {"schedulingPolicy": {"gang": {"minCount": min_count}} if min_count else {"basic": {}},
                            "disruptionMode": {"single": {}}}
    if topology is not None:
        spec["schedulingConstraints"] = {"topology": [{"key": topology}]}
    if priority is not None:  # priority admission resolves the class (run() adds the PriorityClass)
        spec["priorityClassName"] = f"prio-{priority}"
    return {"apiVersion": V1BETA1, "kind": "PodGroup", "metadata": {"name": name, "namespace": "default"},
            "spec": spec}


def member(name: str = "worker", gpu: int = 4, **kwargs: Any) -> dict[str, Any]:
    return pod(name, gpu=gpu, tolerations=[GPU_TOLERATION], **kwargs)


def run(arrivals: list[tuple[dict[str, Any], str | None]], podgroups: list[dict[str, Any]], *,
        groups: list[dict[str, Any]] | None = None, nodes: dict[str, int] | None = None,
        duration: str = "10m", seed: int = 3, policy: str | None = None):  # type: ignore[no-untyped-def]
    """Simulate a 1.37 scenario: `arrivals` are (a `spec.workload[]` entry, the PodGroup its pods name or None)."""
    groups = groups if groups is not None else [group("gpu", max=2, delay="1m", template=node_template(gpu=8))]
    classes = sorted({g["spec"]["priorityClassName"] for g in podgroups if "priorityClassName" in g["spec"]})
    priority_classes = [{"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": c},
                         "value": int(c.split("-")[1]),
                         **({"preemptionPolicy": "Never"} if c.endswith("-never") else {})} for c in classes]
    d = podgroup_doc(arrivals, [*priority_classes, *podgroups], groups=groups,
                     nodes=nodes if nodes is not None else {"gpu": 2}, duration=duration, policy=policy)
    return simulated(d, seed, "podgroup.yaml")


def events_of(result, kind):  # type: ignore[no-untyped-def]
    out = []
    for offset, payload in result.entries:
        rec = decode_record(payload, offset)
        out += [(offset, rec.t, e) for e in rec.events if isinstance(e, kind)]
    return out


def pods_named(result, base: str) -> list[Any]:  # type: ignore[no-untyped-def]
    return [p for p in result.state.pods.values() if p.key.split("/")[2].startswith(base)]


def test_a_gang_that_fits_binds_whole_in_one_record_and_the_group_is_initially_scheduled() -> None:
    result = run([(arrival(0, member(), count=4, run_for="5m"), "train")], [podgroup()])
    bound = events_of(result, PodBound)
    assert len(bound) == 4 and len({offset for offset, _, _ in bound}) == 1
    conditions = [e for _, _, e in events_of(result, PodGroupConditionSet)]
    assert [(c.condition, c.status, c.reason) for c in conditions] == [
        ("PodGroupInitiallyScheduled", "True", "Scheduled")]
    state = result.state.gang.podgroups["default/train"]
    assert state.conditions["PodGroupInitiallyScheduled"].status == "True"


def test_a_gang_that_does_not_fit_binds_nothing_and_every_pod_says_why() -> None:
    """Five 4-GPU pods, minCount 5, on two 8-GPU nodes (room for four): nothing binds, not even the four
    that fit; the autoscaler, blind to PodGroups, sees unschedulable pods one by one."""
    result = run([(arrival(0, member(), count=5), "train")], [podgroup(min_count=5)], duration="30s")
    assert events_of(result, PodBound) == []
    for p in pods_named(result, "worker"):
        assert p.condition is not None and p.condition.reason == "Unschedulable"
        assert 'pod group "train" is unschedulable' in p.condition.message
    condition = result.state.gang.podgroups["default/train"].conditions["PodGroupInitiallyScheduled"]
    assert (condition.status, condition.reason) == ("False", "Unschedulable")


def test_the_group_binds_when_the_autoscaler_adds_room() -> None:
    result = run([(arrival(0, member(), count=5, run_for="10m"), "train")], [podgroup(min_count=5)],
                 groups=[group("gpu", max=3, delay="1m", template=node_template(gpu=8))], duration="5m")
    bound = events_of(result, PodBound)
    assert len(bound) == 5 and len({offset for offset, _, _ in bound}) == 1
    assert {t for _, t, _ in bound} != {0}


def test_pods_wait_outside_the_queue_until_the_podgroup_and_min_count_exist() -> None:
    result = run([(arrival(0, member(), count=3), "train")], [podgroup()], duration="30s")
    for p in pods_named(result, "worker"):
        assert p.condition is not None
        assert (p.condition.reason, p.condition.cause) == ("NotReadyForScheduling", "gang")
        assert p.condition.detail == "3 of minCount 4 pods of PodGroup default/train exist"
    missing = run([(arrival(0, member(), count=4), "train")], [], duration="30s")
    for p in pods_named(missing, "worker"):
        assert p.condition is not None
        assert (p.condition.reason, p.condition.cause) == ("NotReadyForScheduling", "missing")
        assert p.condition.message == 'waiting for pods\'s pod group "train" to appear in scheduling queue'


def test_a_basic_group_binds_what_fits() -> None:
    result = run([(arrival(0, member(), count=5, run_for="5m"), "train")], [podgroup(min_count=None)],
                 duration="30s")
    assert len(events_of(result, PodBound)) == 4
    left = [p for p in pods_named(result, "worker") if p.node is None]
    assert len(left) == 1 and left[0].condition is not None and left[0].condition.reason == "Unschedulable"


def test_a_pod_whose_priority_differs_from_its_groups_rejects_the_group() -> None:
    result = run([(arrival(0, member(priority=10), count=4), "train")], [podgroup(priority=100)],
                 duration="30s")
    assert events_of(result, PodBound) == []
    for p in pods_named(result, "worker"):
        assert p.condition is not None and p.condition.reason == "SchedulerError"
    condition = result.state.gang.podgroups["default/train"].conditions["PodGroupInitiallyScheduled"]
    assert (condition.status, condition.reason) == ("False", "SchedulerError")


def racks(a: int, b: int) -> tuple[list[dict[str, Any]], dict[str, int]]:
    return ([group("rack-a", max=a, delay="1m", template=node_template(gpu=8, labels={"rack": "a"})),
             group("rack-b", max=b, delay="1m", template=node_template(gpu=8, labels={"rack": "b"}))],
            {"rack-a": a, "rack-b": b})


def test_a_topology_constraint_keeps_the_group_in_one_domain() -> None:
    """Six 4-GPU pods: rack a has two 8-GPU nodes (4 pods), rack b three (6 pods): only b takes the group,
    though the cluster as a whole has room for ten."""
    groups, nodes = racks(2, 3)
    result = run([(arrival(0, member(), count=6, run_for="5m"), "train")], [podgroup(min_count=6, topology="rack")],
                 groups=groups, nodes=nodes, duration="30s")
    bound = [e for _, _, e in events_of(result, PodBound)]
    assert len(bound) == 6
    assert {result.state.nodes[e.node].manifest["metadata"]["labels"]["rack"] for e in bound} == {"b"}
    condition = result.state.gang.podgroups["default/train"].conditions["PodGroupInitiallyScheduled"]
    assert "rack=b" in condition.message


def test_the_tightest_domain_wins_when_both_fit() -> None:
    """Four 4-GPU pods fit in either rack; rack a (two nodes) is left fuller, so it is chosen."""
    groups, nodes = racks(2, 3)
    result = run([(arrival(0, member(), count=4, run_for="5m"), "train")], [podgroup(topology="rack")],
                 groups=groups, nodes=nodes, duration="30s")
    bound = [e for _, _, e in events_of(result, PodBound)]
    assert {result.state.nodes[e.node].manifest["metadata"]["labels"]["rack"] for e in bound} == {"a"}


def test_no_domain_big_enough_rejects_the_group_naming_the_closest() -> None:
    groups, nodes = racks(2, 2)
    result = run([(arrival(0, member(), count=6), "train")], [podgroup(min_count=6, topology="rack")],
                 groups=groups, nodes=nodes, duration="5s")
    assert events_of(result, PodBound) == []
    p = pods_named(result, "worker")[0]
    assert p.condition is not None and "no rack domain fits the pod group" in p.condition.message


def test_unschedulable_members_are_retried_after_backoff_not_every_decision() -> None:
    result = run([(arrival(0, member(), count=5), "train")], [podgroup(min_count=5)],
                 groups=[group("gpu", max=2, delay="1m", template=node_template(gpu=8))], duration="2m")
    attempts = [e for _, _, e in events_of(result, PodUnschedulable) if e.reason == "Unschedulable"]
    assert 5 <= len(attempts) <= 5 * 12  # backoff and the unschedulable pool bound the retries


# ---------------------------------------------------------------- ResourceClaims for PodGroups (KEP-5729)

DRA_QUICKSTART = Path(__file__).resolve().parents[1] / "scenarios" / "dra-quickstart.yaml"


def run_group_claims(pods: int = 3, *, entry_template: str = "one-gpu", run_for: str = "2m"):  # type: ignore[no-untyped-def]
    d = yaml.safe_load(DRA_QUICKSTART.read_text())
    d["spec"]["duration"] = "5m"
    d["spec"]["kubernetes"] = PODGROUP_RELEASE
    d["spec"]["workload"] = [{"at": 0, "count": pods, "runFor": run_for, "pod": {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "worker"},
        "spec": {"containers": [{"name": "w", "image": "trainer"}], "schedulingGroup": {"podGroupName": "train"},
                 "resourceClaims": [{"name": "shared", "resourceClaimTemplateName": entry_template}]}}}]
    group_obj = podgroup(min_count=pods)
    group_obj["spec"]["resourceClaims"] = [{"name": "shared", "resourceClaimTemplateName": "one-gpu"}]
    d["spec"]["objects"].append(group_obj)
    return simulated(d, 7, "group-claims.yaml")


def test_a_group_claim_is_made_once_allocated_once_and_reserved_for_the_group() -> None:
    result = run_group_claims()
    created = [e for _, _, e in events_of(result, ResourceClaimCreated)]
    assert len(created) == 1
    made = created[0]
    assert made.pod == "podgroup/default/train" and made.pod_claim == "shared"
    owner = made.manifest["metadata"]["ownerReferences"][0]
    assert (owner["kind"], owner["name"]) == ("PodGroup", "train")
    allocated = [e for _, _, e in events_of(result, ClaimAllocated)]
    assert len(allocated) == 1 and allocated[0].pod == "podgroup/default/train"
    bound = [e for _, _, e in events_of(result, PodBound)]
    assert len(bound) == 3 and len({e.node for e in bound}) == 1  # a node-local device: one node for all
    assert [e for _, _, e in events_of(result, ClaimReserved)] == []  # reservedFor: the group, once
    released = [e for _, _, e in events_of(result, ClaimReleased)]
    assert [(e.pod, e.deallocate) for e in released] == [("podgroup/default/train", True)]


def test_a_pod_entry_that_does_not_match_the_groups_is_the_pods_own() -> None:
    result = run_group_claims(2, entry_template="four-gpus-one-domain")
    created = [e for _, _, e in events_of(result, ResourceClaimCreated)]
    owners = sorted(e.pod for e in created)
    assert owners == ["pod/default/worker-0", "pod/default/worker-1", "podgroup/default/train"]
    allocated = [e for _, _, e in events_of(result, ClaimAllocated)]
    assert sorted(e.pod for e in allocated) == ["pod/default/worker-0", "pod/default/worker-1"]


# ---------------------------------------------------------------- workload-aware preemption (KEP-5710)


def test_a_higher_priority_group_preempts_the_least_important_pods_it_needs() -> None:
    """Four low-priority 4-GPU pods fill two 8-GPU nodes; a gang of two (priority 100) arrives: two victims,
    the newest, are evicted (the others are reprieved), then the gang binds whole."""
    result = run([(arrival(0, member("low", priority=0), count=4, run_for="1h"), None),
                  (arrival("1m", member(priority=100), count=2, run_for="5m"), "train")],
                 [podgroup(min_count=2, priority=100)], duration="3m")
    evicted = [e for _, _, e in events_of(result, PodTerminating)]  # graceful: 30 s, then PodEvicted
    assert len(evicted) == 2 and all("by pod group default/train" in e.reason for e in evicted)
    assert len(events_of(result, PodEvicted)) == 2
    assert {e.node for e in evicted} <= {"gpu-0", "gpu-1"}
    bound = [(t, e) for _, t, e in events_of(result, PodBound) if e.pod.startswith("pod/default/worker")]
    assert len(bound) == 2 and bound[0][0] >= 90_000  # once the victims' grace period is over
    waiting = [e for _, _, e in events_of(result, PodUnschedulable) if e.cause == "preemption"]
    assert waiting and "waiting for 2 preemption victims" in waiting[0].message


def test_a_group_with_disruption_mode_all_is_evicted_whole() -> None:
    batch = podgroup("batch", min_count=4, priority=0)
    batch["spec"]["disruptionMode"] = {"all": {}}
    result = run([(arrival(0, member("low", priority=0), count=4, run_for="1h"), "batch"),
                  (arrival("1m", member(priority=100), count=1, run_for="5m"), "train")],
                 [batch, podgroup(min_count=1, priority=100)], duration="3m")
    evicted = [e for _, _, e in events_of(result, PodEvicted)]
    assert len(evicted) == 4  # one slot needed, the whole group goes
    target = result.state.gang.podgroups["default/batch"].conditions["DisruptionTarget"]
    assert (target.status, target.reason) == ("True", "PreemptionByScheduler")


def test_no_preemption_with_policy_never_or_against_equal_priority() -> None:
    never = podgroup(min_count=2, priority=100)
    never["spec"]["priorityClassName"] = "prio-100-never"  # the class says preemptionPolicy: Never
    for low, preemptor in ((0, never), (100, podgroup(min_count=2, priority=100))):
        result = run([(arrival(0, member("low", priority=low), count=4, run_for="1h"), None),
                      (arrival("1m", member(priority=100), count=2), "train")], [preemptor], duration="2m")
        assert events_of(result, PodEvicted) == []
        assert all(p.node is None for p in pods_named(result, "worker"))


# ---------------------------------------------------------------- CompositePodGroups (KEP-6012)


def composite(name: str, min_group_count: int | None, parent: str | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "workloadRef": {"workloadName": "lws", "templateName": name},
        "schedulingPolicy": {"gang": {"minGroupCount": min_group_count}} if min_group_count else {"basic": {}}}
    if parent is not None:
        spec["parentCompositePodGroupName"] = parent
    return {"apiVersion": "scheduling.k8s.io/v1alpha3", "kind": "CompositePodGroup",
            "metadata": {"name": name, "namespace": "default"}, "spec": spec}


def child(name: str, min_count: int, parent: str) -> dict[str, Any]:
    group = podgroup(name, min_count)
    group["spec"]["parentCompositePodGroupName"] = parent
    group["spec"]["workloadRef"] = {"workloadName": "lws", "templateName": name}
    return group


def replica(i: int, workers: int = 2, gpu: int = 4) -> list[tuple[dict[str, Any], str]]:
    return [(arrival(0, member(f"r{i}-leader", gpu=gpu), run_for="10m"), f"r{i}-leader"),
            (arrival(0, member(f"r{i}-worker", gpu=gpu), count=workers, run_for="10m"), f"r{i}-workers")]


def replica_groups(i: int, parent: str, workers: int = 2) -> list[dict[str, Any]]:
    return [child(f"r{i}-leader", 1, parent), child(f"r{i}-workers", workers, parent)]


def test_a_composite_binds_its_groups_together_or_not_at_all() -> None:
    fits = run(replica(0), [composite("r0", 2), *replica_groups(0, "r0")], duration="30s")
    bound = events_of(fits, PodBound)
    assert len(bound) == 3 and len({o for o, _, _ in bound}) == 1
    assert fits.state.gang.composites["default/r0"].conditions["CompositePodGroupInitiallyScheduled"].status == "True"
    # the leader fits on its own, the workers (4 x 4 GPUs) do not: nothing binds, not even the leader
    too_big = run(replica(0, workers=4), [composite("r0", 2), *replica_groups(0, "r0", workers=4)], duration="30s")
    assert events_of(too_big, PodBound) == []
    leader = too_big.state.pods["pod/default/r0-leader"]
    assert leader.condition is not None and 'composite pod group "r0"' in leader.condition.message
    condition = too_big.state.gang.composites["default/r0"].conditions["CompositePodGroupInitiallyScheduled"]
    assert (condition.status, condition.reason) == ("False", "Unschedulable")


def test_two_levels_min_group_count_of_replicas() -> None:
    """A root composite of three replicas (each a composite of a leader and two workers: 3 pods of 4 GPUs),
    minGroupCount 2, on two 8-GPU nodes (4 slots): one replica fits whole, not two: nothing binds. With three
    nodes (6 slots), two replicas bind and the third waits."""
    arrivals = [a for i in range(3) for a in replica(i)]
    objects = [composite("lws", 2), *[composite(f"r{i}", 2, parent="lws") for i in range(3)],
               *[g for i in range(3) for g in replica_groups(i, f"r{i}")]]
    small = run(arrivals, objects, duration="20s")
    assert events_of(small, PodBound) == []
    big = run(arrivals, objects, groups=[group("gpu", max=3, delay="1m", template=node_template(gpu=8))],
              nodes={"gpu": 3}, duration="20s")
    bound = [e for _, _, e in events_of(big, PodBound)]
    assert len(bound) == 6
    replicas = {e.pod.split("/")[2].split("-")[0] for e in bound}
    assert len(replicas) == 2
    assert big.state.gang.composites["default/lws"].conditions["CompositePodGroupInitiallyScheduled"].status == "True"


def test_a_missing_composite_keeps_its_groups_waiting() -> None:
    result = run(replica(0), replica_groups(0, "r0"), duration="10s")
    leader = result.state.pods["pod/default/r0-leader"]
    assert leader.condition is not None and leader.condition.reason == "NotReadyForScheduling"
    assert leader.condition.message == "waiting for composite pod group default/r0 to be created"


# ---------------------------------------------------------------- why a group is pending (the summary)


def why(result, name: str = "default/train") -> tuple[str, str]:  # type: ignore[no-untyped-def]
    from dralab.core.analysis.summary import summarize

    groups = summarize(result.state, [])["pod_groups"]
    row = next(r for r in groups["pending_groups"] if r["name"] == name)
    return row["blocked_by"], row["why"]


def test_the_summary_names_what_keeps_each_group_pending() -> None:
    assert why(run([(arrival(0, member(), count=3), "train")], [podgroup()], duration="5s"))[0] == "min-count"
    assert why(run([(arrival(0, member(), count=3), "train")], [], duration="5s"))[0] == "missing"
    kind, text = why(run([(arrival(0, member(), count=5), "train")], [podgroup(min_count=5)],
                         groups=[group("gpu", max=2, delay="1m", template=node_template(gpu=8))], duration="5s"))
    assert kind == "capacity" and "only 4 of the 5 pods" in text
    groups, nodes = racks(2, 2)
    kind, text = why(run([(arrival(0, member(), count=6), "train")], [podgroup(min_count=6, topology="rack")],
                         groups=groups, nodes=nodes, duration="5s"))
    assert kind == "topology" and "no rack domain fits" in text
    kind, _ = why(run([(arrival(0, member(priority=1), count=4), "train")], [podgroup(priority=5)], duration="5s"))
    assert kind == "priority-mismatch"


# ---------------------------------------------------------------- fidelity fixes found by upstream's cases
# (tests/workload_cases/, played by tests/test_workload_cases_run.py)


def dump_run(docs: list[dict[str, Any]]):  # type: ignore[no-untyped-def]
    """A 1.37 snapshot (manifests as a dump) folded, then the scheduler until it settles (the case runner)."""
    from test_workload_cases_run import Run

    spec = {"kubernetes": {"version": "1.37", "featureGates": {"GenericWorkload": True, "CompositePodGroup": True},
                           "runtimeConfig": {V1BETA1: True, "scheduling.k8s.io/v1alpha3": True}}}
    return Run(spec, docs, "test.yaml")


def node_doc(name: str, cpu: int) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
            "status": {"allocatable": {"cpu": str(cpu), "memory": "32Gi", "pods": "110"}}}


def pod_doc(name: str, group_name: str | None = None, *, node: str | None = None, priority: int = 0,
            scheduler: str | None = None, terminating: bool = False, start: str | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"priority": priority, "containers": [
        {"name": "c", "image": "pause", "resources": {"requests": {"cpu": "1"}}}]}
    meta: dict[str, Any] = {"name": name, "namespace": "default"}
    status: dict[str, Any] = {}
    if group_name:
        spec["schedulingGroup"] = {"podGroupName": group_name}
    if node:
        spec["nodeName"] = node
        status = {"phase": "Running", **({"startTime": start} if start else {})}
    if scheduler:
        spec["schedulerName"] = scheduler
    if terminating:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec, **({"status": status} if status else {})}


def group_doc(name: str, min_count: int | None = None, *, priority: int | None = None, mode: str = "single",
              conditions: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"schedulingPolicy": {"gang": {"minCount": min_count}} if min_count else {"basic": {}},
                            "disruptionMode": {mode: {}}}
    if priority is not None:
        spec["priority"] = priority
    return {"apiVersion": V1BETA1, "kind": "PodGroup", "metadata": {"name": name, "namespace": "default"},
            "spec": spec, **({"status": {"conditions": conditions}} if conditions else {})}


def test_a_missing_podgroup_and_a_short_composite_tree_wait_with_upstreams_messages() -> None:
    """gangscheduling.go PreEnqueue: `waiting for pods's pod group %q to appear in scheduling queue` (sic) and
    `waiting for composite pod group %q tree to meet quorum`."""
    missing = dump_run([node_doc("n1", 4), pod_doc("p1", "pg")])
    cond = missing.state.pods["pod/default/p1"].condition
    assert cond is not None and cond.message == 'waiting for pods\'s pod group "pg" to appear in scheduling queue'
    arrivals: list[tuple[dict[str, Any], str | None]] = [*replica(0)]
    short = run(arrivals, [composite("r0", 2), child("r0-leader", 1, "r0")], duration="10s")
    leader = short.state.pods["pod/default/r0-leader"]
    assert leader.condition is not None
    assert leader.condition.message == 'waiting for composite pod group "r0" tree to meet quorum'


def test_no_feasible_topology_domain_says_how_many_placements_were_tried() -> None:
    """schedule_one_podgroup.go: "0/%d placements are available, first placement status: %v"."""
    groups, nodes = racks(2, 2)
    result = run([(arrival(0, member(), count=6), "train")], [podgroup(min_count=6, topology="rack")],
                 groups=groups, nodes=nodes, duration="5s")
    p = pods_named(result, "worker")[0]
    assert p.condition is not None
    assert "0/2 placements are available, first placement status: no rack domain fits" in p.condition.message


def test_a_group_whose_pods_name_different_schedulers_is_a_scheduler_error() -> None:
    """validatePodGroup (TestValidatePodGroup): the pods to schedule and the running ones must name one scheduler,
    and share one priority; otherwise the group is refused with SchedulerError and nothing binds."""
    mixed = dump_run([node_doc("n1", 4), group_doc("pg"), pod_doc("p1", "pg"),
                      pod_doc("p2", "pg", scheduler="other-scheduler")])
    assert mixed.state.pods["pod/default/p1"].node is None
    condition = mixed.state.gang.podgroups["default/pg"].conditions["PodGroupInitiallyScheduled"]
    assert (condition.status, condition.reason) == ("False", "SchedulerError")
    assert ".spec.schedulerName" in condition.message
    running = dump_run([node_doc("n1", 4), group_doc("pg", priority=10), pod_doc("p1", "pg", priority=10),
                        pod_doc("p2", "pg", node="n1", priority=9)])
    assert running.state.pods["pod/default/p1"].node is None
    condition = running.state.gang.podgroups["default/pg"].conditions["PodGroupInitiallyScheduled"]
    assert (condition.status, condition.reason) == ("False", "SchedulerError")


def test_pods_of_another_scheduler_and_terminating_members_are_left_alone() -> None:
    """A group whose pods all name another scheduler is not ours (kube-scheduler's queue never takes it); a
    member being deleted is dropped from its group's cycle (skipPodGroupPodSchedule)."""
    other = dump_run([node_doc("n1", 4), group_doc("pg"), pod_doc("p1", "pg", scheduler="sched1"),
                      pod_doc("p2", "pg", scheduler="sched1")])
    assert all(p.node is None and p.condition is None for p in other.state.pods.values())
    assert other.records[1:] == []
    dropped = dump_run([node_doc("n1", 4), group_doc("pg"), pod_doc("p1", "pg"), pod_doc("p2", "pg", terminating=True)])
    assert dropped.state.pods["pod/default/p1"].node == "n1"
    p2 = dropped.state.pods["pod/default/p2"]
    assert p2.node is None and p2.condition is None


def test_victims_are_ranked_as_upstreams_more_important_victim() -> None:
    """podgrouppreemption.go moreImportantVictim, reversed (least important first): priority; a pod outside any
    PodGroup before a PodGroup member; single pods the latest started first; groups the smaller first."""
    from dralab.core.scheduler.plugins.workload_preemption import candidates

    folded = dump_run([node_doc("n1", 8), group_doc("single-pg"), group_doc("whole-pg", 2, mode="all"),
                       pod_doc("old", node="n1", start="2026-01-01T00:00:00Z"),
                       pod_doc("new", node="n1", start="2026-01-01T00:00:05Z"),
                       pod_doc("member", "single-pg", node="n1", start="2026-01-01T00:00:01Z"),
                       pod_doc("w1", "whole-pg", node="n1", start="2026-01-01T00:00:02Z"),
                       pod_doc("w2", "whole-pg", node="n1", start="2026-01-01T00:00:03Z"),
                       pod_doc("low", node="n1", priority=-1, start="2026-01-01T00:00:09Z")])
    ranked = [[p.key.rsplit("/", 1)[1] for p in v.pods] for v in candidates(folded.state, 1000, "default/x")]
    assert ranked == [["low"], ["new"], ["old"], ["member"], ["w1", "w2"]]


def test_a_dump_brings_its_podgroups_composites_and_their_conditions() -> None:
    condition = {"type": "PodGroupInitiallyScheduled", "status": "True", "reason": "Scheduled", "message": "done",
                 "lastTransitionTime": "2026-01-01T00:00:00Z"}
    folded = dump_run([node_doc("n1", 4), group_doc("pg", conditions=[condition]), pod_doc("p1", "pg", node="n1")])
    group_state = folded.state.gang.podgroups["default/pg"]
    assert group_state.conditions["PodGroupInitiallyScheduled"].reason == "Scheduled"
    assert "status" not in group_state.manifest
    assert folded.state.gang.group_of["pod/default/p1"] == "default/pg"
    assert folded.state.pods["pod/default/p1"].node == "n1"


def test_a_group_nominated_where_a_victim_still_terminates_waits_without_new_victims() -> None:
    """preemptorEligibleToPreemptOthers: a lower-priority pod terminating by preemption on a node a member is
    nominated to means the last preemption is still under way: no new victim search, the group waits. A pod
    terminating elsewhere, or one of a higher-priority group, does not stop a new search."""
    def victim(node: str) -> dict[str, Any]:
        doc = pod_doc("victim", node=node, priority=100, terminating=True)
        doc["status"]["conditions"] = [{"type": "DisruptionTarget", "status": "True",
                                        "reason": "PreemptionByScheduler"}]
        return doc

    def preemptors() -> list[dict[str, Any]]:
        nominated = pod_doc("p2", "pre", priority=1000)
        nominated["status"] = {"nominatedNodeName": "n1"}
        return [group_doc("pre", 2, priority=1000), pod_doc("p1", "pre", priority=1000), nominated]

    ongoing = dump_run([node_doc("n1", 1), node_doc("n2", 1), victim("n1"),
                        pod_doc("other", node="n2", priority=100), *preemptors()])
    assert ongoing.evicted() == set()
    cond = ongoing.state.pods["pod/default/p1"].condition
    assert cond is not None and cond.cause == "preemption" and cond.detail == "pod/default/victim"
    elsewhere = dump_run([node_doc("n1", 1), node_doc("n2", 1), victim("n2"),
                          pod_doc("other", node="n1", priority=100), *preemptors()])
    assert elsewhere.evicted() == {"other", "victim"}


def test_a_pod_for_another_scheduler_is_left_alone() -> None:
    """kube-scheduler schedules only the pods of its profiles (`spec.schedulerName`, default `default-scheduler`):
    a pod for another scheduler stays pending, untouched (no PodScheduled condition), and the autoscaler, which
    acts on Unschedulable pods only, adds nothing for it."""
    other = member("volcano-job")
    other["spec"]["schedulerName"] = "volcano"
    result = run([(arrival(0, other, run_for="5m"), None), (arrival(0, member("mine"), run_for="5m"), None)], [],
                 duration="1m")
    bound = [e.pod for _, _, e in events_of(result, PodBound)]
    assert bound == ["pod/default/mine"]
    pod = result.state.pods["pod/default/volcano-job"]
    assert pod.node is None and (pod.condition is None or pod.condition.reason == "")
    from dralab.core.analysis.summary import summarize

    assert summarize(result.state, [])["pods"]["pending_by_reason"] == {"other-scheduler": 1}
