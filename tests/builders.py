"""Small factories for tests: scenario documents (checked by `parse_scenario`), records, folded states.

Manifests are built as plain dicts in the v1 shapes a user would write, then go through the same loader
as a scenario file, so tests exercise what users feed dralab rather than hand-built internal objects.
`Log` appends records one offset at a time to a `ClusterState`, as the simulator does.
"""

from __future__ import annotations

import copy
import itertools
from dataclasses import dataclass, field
from typing import Any

from dralab.core.kube.manifests import check_node, check_pod
from dralab.core.log.events import (
    AnyEvent,
    NodeCreated,
    NodeGroupDefined,
    NodeReady,
    PodBound,
    PodCreated,
    PodFinished,
    PodUnschedulable,
    Record,
    ScaleUpRequested,
    decode_record,
    node_key,
    pod_key,
)
from dralab.core.run.inputs import scenario_inputs
from dralab.core.scenario.load import Scenario, parse_scenario
from dralab.core.state.cluster import ClusterState

GPU = "nvidia.com/gpu"
GPU_TAINT = {"key": GPU, "value": "present", "effect": "NoSchedule"}
GPU_TOLERATION = {"key": GPU, "operator": "Exists", "effect": "NoSchedule"}

_ids = itertools.count()


# ---------------------------------------------------------------- manifests


def pod(
    name: str,
    *,
    gpu: int = 0,
    cpu: str | None = None,
    memory: str | None = None,
    priority: int | None = None,
    node_selector: dict[str, str] | None = None,
    tolerations: list[dict[str, Any]] | None = None,
    namespace: str | None = None,
) -> dict[str, Any]:
    """A v1 Pod manifest with one container; a GPU is asked for through its limit, as users do."""
    resources: dict[str, Any] = {}
    requests = {k: v for k, v in (("cpu", cpu), ("memory", memory)) if v is not None}
    if requests:
        resources["requests"] = requests
    if gpu:
        resources["limits"] = {GPU: str(gpu)}
    spec: dict[str, Any] = {"containers": [{"name": "main", "image": "busybox", "resources": resources}]}
    if priority is not None:
        spec["priority"] = priority
    if node_selector:
        spec["nodeSelector"] = dict(node_selector)
    if tolerations:
        spec["tolerations"] = [dict(t) for t in tolerations]
    metadata: dict[str, Any] = {"name": name}
    if namespace is not None:
        metadata["namespace"] = namespace
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec}


def node_template(
    *,
    gpu: int = 8,
    cpu: str = "96",
    memory: str = "1000Gi",
    pods: int = 110,
    labels: dict[str, str] | None = None,
    taints: list[dict[str, Any]] | None = None,
    unschedulable: bool = False,
) -> dict[str, Any]:
    """A v1 Node manifest (a node group's template) with the given allocatable."""
    allocatable = {"cpu": cpu, "memory": memory, "pods": str(pods)}
    if gpu:
        allocatable[GPU] = str(gpu)
    spec: dict[str, Any] = {}
    if taints:
        spec["taints"] = [dict(t) for t in taints]
    if unschedulable:
        spec["unschedulable"] = True
    node: dict[str, Any] = {"apiVersion": "v1", "kind": "Node", "metadata": {}, "spec": spec,
                            "status": {"allocatable": allocatable}}
    if labels:
        node["metadata"]["labels"] = dict(labels)
    return node


def checked_pod(manifest: dict[str, Any]) -> dict[str, Any]:
    """The manifest as the loader keeps it (namespace, apiVersion, kind filled in)."""
    checked: dict[str, Any] = check_pod(manifest)
    return checked


def checked_node(manifest: dict[str, Any], name: str) -> dict[str, Any]:
    node: dict[str, Any] = check_node(manifest)
    node.setdefault("metadata", {})["name"] = name
    return node


# ---------------------------------------------------------------- scenarios


def group(
    name: str,
    *,
    max: int = 10,
    min: int = 0,
    delay: str | int | tuple[str | int, str | int] = "30s",
    cost: float | None = None,
    template: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A `spec.nodeGroups[]` entry."""
    g: dict[str, Any] = {"name": name, "min": min, "max": max, "template": template or node_template()}
    g["provisionDelay"] = {"min": delay[0], "max": delay[1]} if isinstance(delay, tuple) else delay
    if cost is not None:
        g["costPerHour"] = cost
    return g


def arrival(at: str | int, manifest: dict[str, Any], *, count: int = 1, run_for: str | int | None = None
            ) -> dict[str, Any]:
    """A `spec.workload[]` entry."""
    a: dict[str, Any] = {"at": at, "count": count, "pod": manifest}
    if run_for is not None:
        a["runFor"] = run_for
    return a


def scenario_doc(
    groups: list[dict[str, Any]],
    *,
    nodes: dict[str, int] | None = None,
    workload: list[dict[str, Any]] | None = None,
    duration: str | int = "10m",
    score: str | None = None,
    expander: str | None = None,
    scan_interval: str | int | None = None,
    name: str = "test",
) -> dict[str, Any]:
    spec: dict[str, Any] = {"duration": duration, "nodeGroups": groups}
    if nodes:
        spec["nodes"] = [{"group": g, "count": n} for g, n in nodes.items()]
    if workload:
        spec["workload"] = workload
    if score is not None:
        spec["scheduler"] = {"score": score}
    autoscaler = {k: v for k, v in (("expander", expander), ("scanInterval", scan_interval)) if v is not None}
    if autoscaler:
        spec["autoscaler"] = autoscaler
    return {"apiVersion": "dralab.io/v1alpha1", "kind": "Scenario", "metadata": {"name": name}, "spec": spec}


# spec.kubernetes of a scenario with 1.35's Workload API (scheduling.k8s.io/v1alpha1): only 1.35 serves it,
# behind two alpha gates and runtime-config (docs/versions.md); the scenarios in scenarios/ that use it say so
KUBERNETES_1_35_GANGS: dict[str, Any] = {
    "version": "1.35",
    "featureGates": {"GenericWorkload": True, "GangScheduling": True},
    "runtimeConfig": {"scheduling.k8s.io/v1alpha1": True},
}


def with_1_35_gangs(doc: dict[str, Any]) -> dict[str, Any]:
    """`doc` (a scenario document) emulating 1.35 with its Workload API on; returned for chaining."""
    doc["spec"]["kubernetes"] = copy.deepcopy(KUBERNETES_1_35_GANGS)
    return doc


def scenario(groups: list[dict[str, Any]], **kwargs: Any) -> Scenario:
    """A checked Scenario (see `scenario_doc` for the keyword arguments)."""
    return parse_scenario(scenario_doc(groups, **kwargs))


# ---------------------------------------------------------------- records and states


def record(*events: AnyEvent, t: int = 0, source: str = "test", view: int = -1) -> Record:
    return Record(id=f"test/{next(_ids)}", source=source, view=view, t=t, events=tuple(events))


@dataclass
class Log:
    """A log under construction, folded as it grows (offsets start at 1)."""

    state: ClusterState = field(default_factory=ClusterState)
    records: list[Record] = field(default_factory=list)

    @property
    def offset(self) -> int:
        return len(self.records)

    def append(self, *events: AnyEvent, t: int | None = None, source: str = "test") -> int:
        rec = record(*events, t=self.state.t if t is None else t, source=source, view=self.offset)
        self.records.append(rec)
        self.state.apply(self.offset, rec)
        return self.offset

    def extend(self, records: list[Record]) -> None:
        for rec in records:
            self.records.append(rec)
            self.state.apply(self.offset, rec)

    # conveniences for the usual events

    def group(self, name: str, *, max: int = 10, template: dict[str, Any] | None = None,
              delay: tuple[int, int] = (0, 0), cost: float = 0.0, t: int | None = None) -> int:
        return self.append(NodeGroupDefined(name=name, min=0, max=max, provision_delay_ms=delay,
                                            template=check_node(template or node_template()), cost_per_hour=cost), t=t)

    def node(self, name: str, *, group: str = "", template: dict[str, Any] | None = None, ready: bool = True,
             ready_at: int = 0, initial: bool = True, t: int | None = None) -> int:
        events: list[AnyEvent] = [NodeCreated(name=name, group=group, node=checked_node(template or node_template(),
                                                                                        name),
                                              ready_at=ready_at, initial=initial)]
        if ready:
            events.append(NodeReady(name=name))
        return self.append(*events, t=t)

    def pod(self, manifest: dict[str, Any], *, run_for_ms: int = -1, t: int | None = None) -> str:
        created = PodCreated(pod=checked_pod(manifest), run_for_ms=run_for_ms)
        self.append(created, t=t)
        k: str = created.key
        return k

    def bind(self, pod: str, node: str, *, t: int | None = None) -> int:
        return self.append(PodBound(pod=pod, node=node), t=t)

    def unschedulable(self, pod: str, message: str = "0/0 nodes are available.", cause: str = "no-nodes",
                      *, t: int | None = None) -> int:
        return self.append(PodUnschedulable(pod=pod, reason="Unschedulable", message=message, cause=cause), t=t)

    def finish(self, pod: str, *, t: int | None = None, phase: str = "Succeeded") -> int:
        return self.append(PodFinished(pod=pod, phase=phase), t=t)

    def scale_up(self, group: str, delta: int, *, t: int | None = None) -> int:
        return self.append(ScaleUpRequested(group=group, delta=delta), t=t)

    def ready(self, node: str, *, t: int | None = None) -> int:
        return self.append(NodeReady(name=node), t=t)


def fold(records: list[Record]) -> ClusterState:
    state = ClusterState()
    for offset, rec in enumerate(records, start=1):
        state.apply(offset, rec)
    return state


def initial_state(sc: Scenario, seed: int = 1, *, until_ms: int = 0) -> ClusterState:
    """The scenario's external inputs up to `until_ms` folded, with no reactor having run."""
    return fold([r for r in scenario_inputs(sc, seed) if r.t <= until_ms])


def key(name: str, namespace: str = "default") -> str:
    k: str = pod_key(namespace, name)
    return k


__all__ = ["GPU", "GPU_TAINT", "GPU_TOLERATION", "Log", "arrival", "checked_node", "checked_pod", "fold",
           "group", "initial_state", "key", "node_key", "node_template", "pod", "record", "scenario",
           "scenario_doc"]


def sourced_events(entries: list[tuple[int, bytes]], kind: type) -> list[tuple[int, str, Any]]:
    """(time, source, event) of every event of `kind` in a log's entries, in log order."""
    out = []
    for offset, payload in entries:
        rec = decode_record(payload, offset)
        out += [(rec.t, rec.source, e) for e in rec.events if isinstance(e, kind)]
    return out


def simulated(d: dict[str, Any], seed: int, file: str = "test.yaml") -> Any:
    """Simulate a scenario document; assert every invariant held and the log verifies."""
    return simulated_scenario(parse_scenario(d, file), seed)


def simulated_scenario(sc: Scenario, seed: int) -> Any:
    """Simulate a checked scenario; assert every invariant held and the log verifies."""
    from dralab.replay.logs.logfile import LogFile
    from dralab.replay.simulation.sim import simulate
    from dralab.replay.simulation.verify import verify

    result = simulate(sc, seed)
    assert result.violations == [], result.violations
    checked = verify(LogFile("x", {}, result.entries))
    assert checked.ok, checked.divergence and checked.divergence.render()
    return result


# ---------------------------------------------------------------- 1.37 PodGroups

# The release a PodGroup scenario declares: 1.37 with the workload-aware scheduling gates on and their API versions
# enabled, as a cluster that tries them does (docs/versions.md).
PODGROUP_RELEASE: dict[str, Any] = {
    "version": "1.37",
    "featureGates": {"GenericWorkload": True, "TopologyAwareWorkloadScheduling": True,
                     "DRAWorkloadResourceClaims": True, "CompositePodGroup": True, "PodGroupPreemptionPolicy": True},
    "runtimeConfig": {"scheduling.k8s.io/v1beta1": True, "scheduling.k8s.io/v1alpha3": True},
}


def podgroup_doc(arrivals: list[tuple[dict[str, Any], str | None]], podgroups: list[dict[str, Any]], *,
                 groups: list[dict[str, Any]], nodes: dict[str, int], duration: str = "10m",
                 policy: str | None = None) -> dict[str, Any]:
    """A 1.37 scenario document: `arrivals` are (a `spec.workload[]` entry, the PodGroup its pods name or None),
    `podgroups` the scheduling.k8s.io objects (PodGroups, CompositePodGroups) in `spec.objects`."""
    workload = []
    for entry, name in arrivals:
        entry = copy.deepcopy(entry)
        if name is not None:
            entry["pod"]["spec"]["schedulingGroup"] = {"podGroupName": name}
        workload.append(entry)
    d = scenario_doc(groups, nodes=nodes, workload=workload, duration=duration)
    d["spec"]["kubernetes"] = copy.deepcopy(PODGROUP_RELEASE)
    d["spec"]["objects"] = [*d["spec"].get("objects", []), *copy.deepcopy(podgroups)]
    if policy is not None:
        d["spec"]["policy"] = {"autoscaler": policy}
    return d
