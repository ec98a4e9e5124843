"""A static cluster snapshot and the scheduler's filters over it, for `dralab audit` and `dralab schedule`.

Built from an :class:`~dralab.core.dra.model.Inventory` (a cluster dump). Pure: no clock, no I/O.
The filters follow kube-scheduler's order: node readiness (the Ready condition; a node without conditions
counts as Ready) and ``spec.unschedulable``, nodeSelector and required node affinity, taints and
tolerations, cpu/memory/pods/extended resources against allocatable minus the requests of the pods bound
there, then DRA (allocated claims must be usable on the node; the unallocated ones are allocated there
together, all-or-nothing, by the structured allocator).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from .dra.allocator import AllocatedState, AllocationError, Allocator
from .dra.api import ManifestError, claim_from_template
from .dra.cel import CelMatcher, SelectorError
from .dra.model import Claim, Device, DeviceID, Inventory, Node, Slice
from .dra.pools import node_matches
from .nodeselector import node_selector_matches
from .resources import node_allocatable, pod_requests

# DRA explanation kinds -> pending reason
_DRA_REASON = {
    "topology": "topology",
    "capacity": "capacity",
    "counters": "capacity",
    "consumable-capacity": "capacity",
    "taint": "taint",
    "incomplete-pool": "not-ready",
    "invalid-pool": "not-ready",
    "no-class": "missing",
}
# how far DRA got on a node (higher is closer): a topology failure means enough devices are there
_DRA_PROGRESS = {"topology": 3, "capacity": 2, "taint": 1, "not-ready": 1, "missing": 0}
_DONE = ("Succeeded", "Failed")


@dataclass
class Failure:
    reason: str  # not-ready | selector | taint | resources | capacity | topology | missing
    message: str


@dataclass
class NodeResult:
    node: str
    failures: list[Failure] = field(default_factory=list)
    dra_progress: tuple[int, int] = (0, 0)
    allocations: dict[str, dict[str, Any]] = field(default_factory=dict)  # claim key -> status.allocation

    @property
    def feasible(self) -> bool:
        return not self.failures


@dataclass
class PodClaims:
    """A pod's claims resolved: (pod claim name, Claim); ``missing`` names what does not exist."""

    claims: list[tuple[str, Claim]] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)


def pod_key(pod: dict[str, Any]) -> str:
    meta = pod.get("metadata") or {}
    return f"{meta.get('namespace') or 'default'}/{meta.get('name')}"


def is_pending(pod: dict[str, Any]) -> bool:
    spec, status = pod.get("spec") or {}, pod.get("status") or {}
    return not spec.get("nodeName") and status.get("phase") not in _DONE


def node_ready(node: Node) -> bool:
    conditions = (node.manifest.get("status") or {}).get("conditions") or []
    for cond in conditions:
        if isinstance(cond, dict) and cond.get("type") == "Ready":
            return cond.get("status") == "True"
    return True


def _tolerates(taint: dict[str, Any], tolerations: list[dict[str, Any]]) -> bool:
    for tol in tolerations:
        if tol.get("effect") and tol.get("effect") != taint.get("effect"):
            continue
        if tol.get("key") and tol.get("key") != taint.get("key"):
            continue
        if tol.get("operator", "Equal") == "Exists":
            return True
        if tol.get("key") and tol.get("value", "") == taint.get("value", ""):
            return True
    return False


class Snapshot:
    """The cluster as the dump shows it, plus what a scheduling pass assumed since (bindings, allocations)."""

    def __init__(self, inv: Inventory) -> None:
        self.inv = inv
        self.nodes: dict[str, Node] = dict(sorted(inv.nodes.items()))
        self.allocatable = {name: node_allocatable(n.manifest) for name, n in self.nodes.items()}
        self.used: dict[str, dict[str, int]] = {name: {} for name in self.nodes}
        for pod in inv.pods.values():
            node = (pod.get("spec") or {}).get("nodeName")
            if node in self.used and (pod.get("status") or {}).get("phase") not in _DONE:
                self.add_pod(node, pod)
        self.claims: dict[str, Claim] = dict(inv.claims)
        self.allocated = AllocatedState.from_claims(self.claims.values())
        self.matcher = CelMatcher()
        self.slices: list[Slice] = list(inv.slices.values())
        self._allocator: Allocator | None = None
        self.complete = complete_devices(self.slices)

    # ------------------------------------------------------------------ state

    def add_pod(self, node: str, pod: dict[str, Any]) -> None:
        used = self.used[node]
        for res, amount in pod_requests(pod).items():
            used[res] = used.get(res, 0) + amount
        used["pods"] = used.get("pods", 0) + 1

    def commit(self, allocations: dict[str, dict[str, Any]], claims: dict[str, Claim]) -> None:
        for key, alloc in allocations.items():
            self.claims[key] = dataclasses.replace(claims[key], allocation=alloc)
            self.allocated.add_allocation(alloc)
        self._allocator = None

    @property
    def allocator(self) -> Allocator:
        if self._allocator is None:
            self._allocator = Allocator(self.slices, self.inv.classes, self.allocated, self.matcher)
        return self._allocator

    # ------------------------------------------------------------------ claims

    def resolve_claims(self, pod: dict[str, Any]) -> PodClaims:
        meta, spec = pod.get("metadata") or {}, pod.get("spec") or {}
        ns, pod_name = meta.get("namespace") or "default", meta.get("name")
        statuses = {s.get("name"): s.get("resourceClaimName")
                    for s in (pod.get("status") or {}).get("resourceClaimStatuses") or [] if isinstance(s, dict)}
        out = PodClaims()
        for ref in spec.get("resourceClaims") or []:
            name = ref["name"]
            if ref.get("resourceClaimName"):
                claim = self.claims.get(f"{ns}/{ref['resourceClaimName']}")
                if claim is None:
                    out.missing.append(f"ResourceClaim {ns}/{ref['resourceClaimName']}")
                    continue
            else:
                if name in statuses and statuses[name] is None:
                    continue  # the controller decided no claim is needed
                claim_name = statuses.get(name) or f"{pod_name}-{name}"
                claim = self.claims.get(f"{ns}/{claim_name}")
                if claim is None:
                    template = self.inv.templates.get(f"{ns}/{ref['resourceClaimTemplateName']}")
                    if template is None:
                        out.missing.append(f"ResourceClaimTemplate {ns}/{ref['resourceClaimTemplateName']}")
                        continue
                    try:
                        claim = claim_from_template(template, claim_name)
                    except ManifestError as exc:
                        out.missing.append(f"a valid claim from ResourceClaimTemplate "
                                           f"{ns}/{ref['resourceClaimTemplateName']} ({exc})")
                        continue
            if claim.allocation is None:
                for request in claim.requests:
                    for sub in request.choices():
                        if sub.device_class and sub.device_class not in self.inv.classes:
                            out.missing.append(f"DeviceClass {sub.device_class} (claim {claim.key}, "
                                               f"request {request.name})")
            out.claims.append((name, claim))
        return out

    # ------------------------------------------------------------------ filters

    def static_failures(self, pod: dict[str, Any], node: Node) -> list[Failure]:
        """Every non-DRA filter that fails for ``pod`` on ``node`` (not only the first)."""
        spec = pod.get("spec") or {}
        out: list[Failure] = []
        if not node_ready(node):
            out.append(Failure("not-ready", f"node {node.name} is not Ready"))
        elif (node.manifest.get("spec") or {}).get("unschedulable"):
            out.append(Failure("not-ready", f"node {node.name} is unschedulable (cordoned)"))
        selector = spec.get("nodeSelector") or {}
        affinity = ((spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
            "requiredDuringSchedulingIgnoredDuringExecution")
        if any(node.labels.get(k) != v for k, v in selector.items()) or (
                affinity is not None and not node_selector_matches(affinity, node.labels, node.name)):
            out.append(Failure("selector", f"node {node.name} didn't match Pod's node affinity/selector"))
        tolerations = spec.get("tolerations") or []
        for taint in (node.manifest.get("spec") or {}).get("taints") or []:
            if taint.get("effect") in ("NoSchedule", "NoExecute") and not _tolerates(taint, tolerations):
                out.append(Failure("taint", f"node {node.name} has untolerated taint "
                                            f"{{{taint.get('key')}: {taint.get('value', '')}}}"))
                break
        out.extend(self.resource_failures(pod, node.name))
        return out

    def resource_failures(self, pod: dict[str, Any], node: str) -> list[Failure]:
        used, alloc = self.used[node], self.allocatable[node]
        missing = []
        if used.get("pods", 0) + 1 > alloc.get("pods", 110):
            missing.append("pods")
        for res, amount in sorted(pod_requests(pod).items()):
            if amount and used.get(res, 0) + amount > alloc.get(res, 0):
                missing.append(res)
        if not missing:
            return []
        return [Failure("resources", f"node {node}: Insufficient {', '.join(missing)}")]

    def dra(self, claims: list[tuple[str, Claim]], node: Node, *, explain: bool) -> NodeResult:
        result = NodeResult(node.name)
        if not claims:
            return result
        for _, claim in claims:
            if claim.allocation is not None:
                sel = claim.allocation.get("nodeSelector")
                if sel is not None and not node_selector_matches(sel, node.labels, node.name):
                    result.failures.append(Failure(
                        "selector", f"claim {claim.key} is allocated to devices not available on node {node.name}"))
        if result.failures:
            return result
        pending = [c for _, c in claims if c.allocation is None]
        try:
            outcome = self.allocator.allocate(node, pending, explain=explain)
        except (AllocationError, SelectorError) as exc:
            result.failures.append(Failure("capacity", f"node {node.name}: {exc}"))
            return result
        if outcome.outcome == "allocated":
            result.allocations = outcome.allocations
            return result
        kinds = [e.kind for e in outcome.explanations]
        reason = "capacity"
        for kind in ("topology", "capacity", "counters", "consumable-capacity", "taint",
                     "incomplete-pool", "invalid-pool", "no-class"):
            if kind in kinds:
                reason = _DRA_REASON[kind]
                break
        chosen = next((e for e in outcome.explanations if _DRA_REASON.get(e.kind) == reason), None)
        message = chosen.message if chosen is not None else outcome.message
        free = sum(e.free for e in outcome.explanations)
        result.dra_progress = (_DRA_PROGRESS.get(reason, 0), free)
        result.failures.append(Failure(reason, f"node {node.name}: {message}"))
        return result

    # ------------------------------------------------------------------ devices

    def device_matches(self, device: Device, class_name: str, selectors: tuple[str, ...]) -> bool:
        cls = self.inv.classes.get(class_name)
        if cls is None:
            return False
        try:
            return all(self.matcher.matches(e, device, f"deviceclass {class_name}") for e in cls.selectors) and all(
                self.matcher.matches(e, device, "request") for e in selectors)
        except SelectorError:
            return False

    def in_use(self, dev: DeviceID) -> bool:
        return dev in self.allocated.devices or dev in self.allocated.shared_devices()


def complete_devices(slices: list[Slice]) -> list[tuple[Slice, Device]]:
    """The devices of every complete pool (all slices of its newest generation published)."""
    pools: dict[tuple[str, str], list[Slice]] = {}
    for slc in slices:
        pools.setdefault((slc.driver, slc.pool), []).append(slc)
    out: list[tuple[Slice, Device]] = []
    for key in sorted(pools):
        gen = max(s.generation for s in pools[key])
        newest = [s for s in pools[key] if s.generation == gen]
        if len(newest) != newest[0].resource_slice_count:
            continue
        for slc in sorted(newest, key=lambda s: s.name):
            out.extend((slc, d) for d in slc.devices)
    return out


def device_reachable(slc: Slice, device: Device, node: Node) -> bool:
    """Can a pod on ``node`` be allocated ``device``?"""
    if slc.per_device_node_selection:
        return node_matches(device.node_selection, node)
    return node_matches(slc.node_selection, node)
