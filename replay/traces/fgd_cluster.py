"""An imported openb scenario as the flat arrays the FGD protocol runs on (replay/traces/fgd.py).

The experiment places about 10,800 pods on 1,213 nodes, scoring every node for every pod, ten times per
policy; dralab's full scheduler cycle (claims, the allocator's search, events) costs milliseconds per pod-node
pair, far too slow for that. So the run works on the same model reduced to numbers, read from the checked
scenario rather than from the CSVs:

- a node per `spec.nodes` entry, named as dralab names it (`<group>-<i>`), cpu and memory from the group's
  Node template (`status.allocatable`, through dralab's quantity parser);
- its GPUs: the devices its ResourceSlice templates publish (rendered for the node as the emulator renders
  them), each with its consumable `gpu_milli` capacity and its model attribute;
- a pod per workload entry (replicas named as the emulator names them), cpu/memory from `pod_requests`, and
  for its claim template the request's `count`, `capacity.requests.gpu_milli`, and the GPU models its
  selectors admit, found by evaluating the DeviceClass's and the request's CEL selectors with dralab's CEL
  matcher on a device of each model.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from dralab.core.dra.api import parse_documents
from dralab.core.dra.cel import CelMatcher
from dralab.core.dra.model import Device
from dralab.core.kube.resources import pod_requests
from dralab.core.scenario.dra import render_slices
from dralab.core.scenario.load import Scenario, replica_name

from .fgd_policies import NodeInfo, Shape
from .openb import DRIVER, GPU_MILLI, GPU_SPEC_ANNOTATION

MIB = 1 << 20


class ClusterError(ValueError):
    """The scenario is not one the FGD protocol can run (a GPU capacity that is not 1000, a pod's claim it
    cannot read). The message names the object."""


@dataclass(frozen=True)
class Cluster:
    """Nodes sorted by name; pods sorted by name (the protocol shuffles that order, README step 3)."""

    node_names: tuple[str, ...]
    nodes: tuple[NodeInfo, ...]
    models: tuple[str, ...]
    pod_names: tuple[str, ...]
    pods: tuple[Shape, ...]

    @property
    def total_gpus(self) -> int:
        return sum(n.gpus for n in self.nodes)


def _gpu_devices(group: Any) -> list[Device]:
    manifests = render_slices(group, f"{group.name}-0")
    if not manifests:
        return []
    docs: list[object] = list(manifests)
    inventory = parse_documents(docs, f"nodeGroups[{group.name}].resourceSlices")
    devices: list[Device] = []
    for slc in inventory.slices.values():
        if slc.driver == DRIVER:
            devices.extend(slc.devices)
    for d in devices:
        cap = d.capacity.get(f"{DRIVER}/{GPU_MILLI}")
        if cap is None or cap.value != 1000 or not d.allow_multiple_allocations:
            raise ClusterError(f"node group {group.name}: device {d.id.device} needs a shareable (allowMultiple"
                               f"Allocations) `{GPU_MILLI}` capacity of 1000")
    return devices


def _model(device: Device) -> str:
    attr = device.attributes.get(f"{DRIVER}/model")
    return str(attr.value) if attr is not None else ""


def _claim_shape(pod: dict[str, Any], templates: dict[str, dict[str, Any]], class_selectors: list[str],
                 samples: dict[str, Device], models: list[str], matcher: CelMatcher) -> tuple[int, int, Any]:
    claims = pod["spec"].get("resourceClaims") or []
    if not claims:
        return 0, 0, None
    name = pod["metadata"]["name"]
    if len(claims) != 1 or "resourceClaimTemplateName" not in claims[0]:
        raise ClusterError(f"pod {name}: the FGD protocol takes one claim from a ResourceClaimTemplate")
    key = f"{pod['metadata'].get('namespace') or 'default'}/{claims[0]['resourceClaimTemplateName']}"
    template = templates.get(key)
    if template is None:
        raise ClusterError(f"pod {name}: no ResourceClaimTemplate {key}")
    requests = template["spec"]["spec"]["devices"]["requests"]
    if len(requests) != 1 or "exactly" not in requests[0]:
        raise ClusterError(f"ResourceClaimTemplate {key}: the FGD protocol takes one `exactly` request")
    exactly = requests[0]["exactly"]
    count = int(exactly.get("count", 1))
    milli_text = (exactly.get("capacity") or {}).get("requests", {}).get(GPU_MILLI, "1000")
    milli = Fraction(str(milli_text))
    if milli.denominator != 1 or not 0 < milli <= 1000:
        raise ClusterError(f"ResourceClaimTemplate {key}: `{GPU_MILLI}` must be a whole number in 1..1000")
    selectors = class_selectors + [s["cel"]["expression"] for s in exactly.get("selectors") or []]
    allowed = frozenset(i for i, m in enumerate(models)
                        if all(matcher.matches(e, samples[m], f"ResourceClaimTemplate {key}") for e in selectors))
    return count, int(milli), (None if len(allowed) == len(models) else allowed)


def build_cluster(scenario: Scenario) -> Cluster:
    """The arrays of a checked openb scenario (:func:`dralab.replay.traces.openb.to_scenario`)."""
    groups = {g.name: g for g in scenario.node_groups}
    models: list[str] = []
    samples: dict[str, Device] = {}
    nodes: list[tuple[str, NodeInfo]] = []
    for entry in scenario.nodes:
        group = groups[entry.group]
        alloc = pod_requests({"spec": {"containers": [{"resources": {"requests": {
            k: group.template["status"]["allocatable"][k] for k in ("cpu", "memory")}}}]}})
        devices = _gpu_devices(group)
        model = -1
        if devices:
            names = {_model(d) for d in devices}
            if len(names) != 1:
                raise ClusterError(f"node group {group.name}: the FGD protocol takes one GPU model per node")
            [name] = names
            if name not in samples:
                samples[name] = devices[0]
                models.append(name)
            model = models.index(name)
        info = NodeInfo(model, alloc.get("cpu", 0), alloc.get("memory", 0) // MIB, len(devices))
        nodes.extend((f"{group.name}-{i}", info) for i in range(entry.count))
    nodes.sort()
    templates = {f"{o['metadata']['namespace']}/{o['metadata']['name']}": o for o in scenario.objects
                 if o.get("kind") == "ResourceClaimTemplate"}
    classes = [o for o in scenario.objects if o.get("kind") == "DeviceClass"]
    class_selectors = [s["cel"]["expression"] for o in classes for s in o["spec"].get("selectors") or []]
    matcher = CelMatcher()
    shapes: dict[str, tuple[int, int, Any]] = {}
    pods: list[tuple[str, Shape]] = []
    for arrival in scenario.workload:
        pod = arrival.pod
        req = pod_requests(pod)
        key = str(pod["spec"].get("resourceClaims"))
        if key not in shapes:
            shapes[key] = _claim_shape(pod, templates, class_selectors, samples, models, matcher)
        num, milli, allowed = shapes[key]
        spec = str(((pod.get("metadata") or {}).get("annotations") or {}).get(GPU_SPEC_ANNOTATION, "")) if num else ""
        shape = Shape(req.get("cpu", 0), -(-req.get("memory", 0) // MIB), num, milli, allowed, spec)
        base = pod["metadata"]["name"]
        pods.extend((replica_name(base, arrival.count, i), shape) for i in range(arrival.count))
    pods.sort(key=lambda p: p[0])
    return Cluster(tuple(n for n, _ in nodes), tuple(i for _, i in nodes), tuple(models),
                   tuple(n for n, _ in pods), tuple(s for _, s in pods))


def trace_order(cluster: Cluster, nodes: list[Any]) -> tuple[int, ...]:
    """The cluster's node indices in the order of the trace's node names (the openb `sn`, sorted as Go sorts
    strings: by bytes). The simulator's per-seed name prefixes follow that order (compat mode); dralab names
    nodes by shape (`<group>-<i>`), so the i-th trace node of a shape is taken as that group's i-th node (nodes
    of one shape are interchangeable until something lands on them)."""
    from .openb import group_name

    index = {name: i for i, name in enumerate(cluster.node_names)}
    seen: dict[str, int] = {}
    order: list[int] = []
    for node in sorted(nodes, key=lambda n: n.name.encode()):
        group = group_name(node)
        k = seen.get(group, 0)
        seen[group] = k + 1
        i = index.get(f"{group}-{k}")
        if i is None:
            raise ClusterError(f"node {node.name}: no node {group}-{k} in the scenario")
        order.append(i)
    if len(order) != len(cluster.nodes):
        raise ClusterError(f"the trace lists {len(order)} GPU nodes, the scenario has {len(cluster.nodes)}")
    return tuple(order)
