"""A static cluster snapshot and the scheduler's filters over it, for `dralab audit` and `dralab schedule`.

Built from an :class:`~dralab.core.dra.model.Inventory` (a cluster dump). Pure: no clock, no I/O. Change
tracking and rollback live in :mod:`dralab.core.analysis.audit_journal`, device reachability in
:mod:`dralab.core.analysis.audit_devices`.
The filters follow kube-scheduler's order: node readiness (the Ready condition; a node without conditions
counts as Ready) and ``spec.unschedulable``, nodeSelector and required node affinity, taints and
tolerations, cpu/memory/pods/extended resources against allocatable minus the requests of the pods bound
there, then DRA (allocated claims must be usable on the node; the unallocated ones are allocated there
together, all-or-nothing, by the structured allocator).
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from typing import Any

from ..dra.allocator import AllocatedState, AllocationError, Allocator
from ..dra.api import ManifestError, claim_from_template
from ..dra.cel import CelMatcher, SelectorError
from ..dra.model import Claim, DeviceID, Inventory, Node, Slice
from ..dra.pools import SliceIndex
from ..dra.taint_rules import inventory_rules, patch_slices
from ..kube.nodeselector import node_selector_matches
from ..kube.resources import node_allocatable, pod_requests
from ..scheduler.plugins.node_resources_fit import lacking
from ..scheduler.reactor import tolerates
from .audit_devices import DeviceCatalog
from .audit_extended import POD_CLAIM, ExtendedResources, is_special
from .audit_journal import ChangeJournal, Checkpoint

# DRA explanation kinds -> pending reason
_DRA_REASON = {
    "topology": "topology",
    "capacity": "capacity",
    "counters": "capacity",
    "consumable-capacity": "capacity",
    "taint": "device-taint",  # the devices' taints (the slices' and DeviceTaintRules'), as the scheduler says
    "incomplete-pool": "not-ready",
    "invalid-pool": "not-ready",
    "no-class": "missing",
    "selector-error": "selector-error",  # a selector failing at runtime: upstream aborts the attempt (SchedulerError)
}
# how far DRA got on a node (higher is closer): a topology failure means enough devices are there
_DRA_PROGRESS = {"topology": 3, "capacity": 2, "device-taint": 1, "not-ready": 1, "missing": 0}
_DRA_PROGRESS["selector-error"] = 4  # upstream's Filter error on any node ends the attempt: it wins over the rest
# issue 23: shared counters and consumable capacity are their own causes (core/analysis/causes.py), not `capacity`
_DRA_REASON.update({"counters": "counters", "consumable-capacity": "consumable-capacity"})
_DRA_PROGRESS.update({"counters": 2, "consumable-capacity": 2})
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


class Snapshot:
    """The cluster as the dump shows it, plus what a scheduling pass assumed since (bindings, allocations)."""

    def __init__(self, inv: Inventory) -> None:
        self.inv = inv
        self.nodes: dict[str, Node] = dict(sorted(inv.nodes.items()))
        self.node_index = {name: i for i, name in enumerate(self.nodes)}  # position in node order
        self.allocatable = {name: node_allocatable(n.manifest) for name, n in self.nodes.items()}
        self.used: dict[str, dict[str, int]] = {name: {} for name in self.nodes}
        self.extended = ExtendedResources(inv, self.allocatable)  # DRA-served extended resources (KEP-5004)
        for pod in inv.pods.values():
            node = (pod.get("spec") or {}).get("nodeName")
            if node in self.used and (pod.get("status") or {}).get("phase") not in _DONE:
                self._add_used(node, pod)
        self.claims: dict[str, Claim] = dict(inv.claims)
        self.allocated = AllocatedState.from_claims(self.claims.values())
        self._shared = self.allocated.shared_devices()
        self.matcher = CelMatcher()
        self.slices: list[Slice] = patch_slices(inv.slices.values(), inventory_rules(inv.other))  # DeviceTaintRules
        self._allocator: Allocator | None = None
        self._index = SliceIndex.build(self.slices)  # the slices never change: one index for every Allocator
        self.devices = DeviceCatalog(self.slices, inv.classes, self.matcher)  # which devices match what
        self.complete = self.devices.complete
        # Memos (see "Speed" in docs/audit.md). Static filters by the pod's scheduling signature, then node;
        # DRA outcomes by the shape of the pod's unallocated claims (everything but their names), node and
        # explain. A DRA outcome does not depend on the claims' names, only its messages name them: callers
        # of `dra_shape` get the failure reasons and progress of the first pod of that shape, and re-run
        # `dra` for the node whose messages they report.
        self._static_memo: dict[str, dict[str, list[Failure]]] = {}
        # where (a node name, or "\x00" + a node signature) -> (claims shape, explain) -> outcome; by node
        # first so that a binding drops its node's entries without a walk over the others
        self._dra_memo: dict[str, dict[tuple[str, bool], NodeResult]] = {}
        # (driver, pool) -> the one node all its slices name, or None when some slice is not node-local
        # or they name several nodes
        self._pool_node: dict[tuple[str, str], str | None] = {}
        self._node_slices: dict[str, list[Slice]] = {}
        for slc in self.slices:
            local = (slc.node_selection.node_name if not slc.per_device_node_selection
                     and slc.node_selection is not None else None) or None
            key = (slc.driver, slc.pool)
            if key in self._pool_node and self._pool_node[key] != local:
                local = None
            self._pool_node[key] = local
            if local is not None:
                self._node_slices.setdefault(local, []).append(slc)
        # nodes whose DRA state is the same, pool and node names aside, get the same allocator outcome
        # (reasons, progress, explanations' counts) when every pool is local to one node
        self._share_nodes = all(n is not None for n in self._pool_node.values())
        self._node_sig: dict[str, str | None] = {}
        self._corpus: str | None = None  # the text of every class, claim and template (see _referenced_only)
        self._iterates = True
        self._named: dict[str, bool] = {}
        # What changed since the snapshot was built (see `version`, `changed_since`) and, while a checkpoint
        # is open, what to restore: ("used", node, old dict) or ("claim", key, old Claim or None)
        self.journal = ChangeJournal()

    # ------------------------------------------------------------------ state

    def _add_used(self, node: str, pod: dict[str, Any]) -> None:
        used = self.used[node]
        for res, amount in pod_requests(pod).items():
            used[res] = used.get(res, 0) + amount
        used["pods"] = used.get("pods", 0) + 1

    def add_pod(self, node: str, pod: dict[str, Any]) -> None:
        """Bind ``pod`` to ``node``: its requests count against the node's allocatable."""
        self.journal.keep("used", node, dict(self.used[node]))
        self._add_used(node, pod)
        self._forget_nodes({node}, statics=True, dra=False)

    def commit(self, allocations: dict[str, dict[str, Any]], claims: dict[str, Claim]) -> None:
        nodes: set[str] | None = set()
        for key, alloc in allocations.items():
            self.journal.keep("claim", key, self.claims.get(key))
            self.claims[key] = dataclasses.replace(claims[key], allocation=alloc)
            self.allocated.add_allocation(alloc)
            touched = self._device_nodes(alloc)
            nodes = None if touched is None or nodes is None else nodes | touched
        self._shared = self.allocated.shared_devices()
        self._allocator = None
        if allocations:
            self._forget_nodes(nodes)

    def _device_nodes(self, alloc: dict[str, Any]) -> set[str] | None:
        """The nodes whose node-local pools hold the devices of ``alloc``; None when a device may be
        reachable from other nodes (a network-attached or per-device pool)."""
        nodes = set()
        for r in (alloc.get("devices") or {}).get("results") or []:
            node = self._pool_node.get((str(r.get("driver")), str(r.get("pool"))))
            if node is None:
                return None
            nodes.add(node)
        return nodes

    def _forget_nodes(self, nodes: set[str] | None, *, statics: bool = False, dra: bool = True) -> None:
        """Record a change of ``nodes`` (None: any node) and drop what was memoized about them: with ``dra``
        the DRA outcomes and signatures, with ``statics`` the non-DRA filter outcomes."""
        if dra and nodes is None:
            self._dra_memo.clear()
            self._node_sig.clear()
        elif dra and nodes is not None:
            for node in nodes:
                self._dra_memo.pop(node, None)
                self._node_sig.pop(node, None)
        if statics and nodes is None:
            self._static_memo.clear()
        elif statics and nodes is not None:
            for memo in self._static_memo.values():
                for node in nodes:
                    memo.pop(node, None)
        self.journal.record(nodes)

    def pool_node(self, driver: str, pool: str) -> str | None:
        """The one node all slices of the pool name (None: not node-local, or unknown)."""
        return self._pool_node.get((driver, pool))

    @property
    def version(self) -> int:
        """How many changes the snapshot has seen (bindings, allocations, rollbacks)."""
        return self.journal.version

    def changed_since(self, version: int) -> set[str] | None:
        """The nodes that may have changed since ``version`` (None: possibly all of them)."""
        return self.journal.changed_since(version)

    def checkpoint(self) -> Checkpoint:
        """Start a tentative change (a gang's placements): `rollback` undoes every `add_pod` and `commit`
        made since, `release` keeps them. Checkpoints nest."""
        return self.journal.open(self.allocated.copy())

    def release(self, cp: Checkpoint) -> None:
        """Keep what was done since ``cp``."""
        self.journal.release(cp)

    def rollback(self, cp: Checkpoint) -> None:
        """Undo what was done since ``cp``: the snapshot is as it was then (a new version, with the touched
        nodes recorded as changed)."""
        touched = self.changed_since(cp.version)
        for what, key, old in self.journal.unwind(cp):
            if what == "used":
                self.used[key] = old
            elif old is None:
                self.claims.pop(key, None)
            else:
                self.claims[key] = old
        self.allocated = cp.allocated
        self._shared = self.allocated.shared_devices()
        self._allocator = None
        if touched is None or touched:
            self._forget_nodes(touched, statics=True)

    def node_signature(self, node: str) -> str | None:
        """The DRA state of ``node`` with pool and node names left out (its slices in allocation order,
        and which of their devices are in use), or None when nodes may not share allocator outcomes
        (some pool is not local to one node; a device on the node has shares or consumed capacity)."""
        if not self._share_nodes:
            return None
        if node in self._node_sig:
            return self._node_sig[node]
        parts: list[Any] = []
        for slc in sorted(self._node_slices.get(node, []), key=lambda s: (s.driver, s.pool, s.name)):
            spec = dict(slc.manifest.get("spec") or {})
            spec.pop("nodeName", None)
            pool = dict(spec.get("pool") or {})
            pool.pop("name", None)
            spec["pool"] = pool
            if isinstance(spec.get("devices"), list):
                spec["devices"] = [self._referenced_only(d) for d in spec["devices"]]
            used = []
            for d in slc.devices:
                if d.id in self._shared or d.id in self.allocated.capacity:
                    self._node_sig[node] = None
                    return None
                used.append(d.id in self.allocated.devices)
            parts.append([spec, used])
        sig = json.dumps(parts, sort_keys=True, default=str)
        self._node_sig[node] = sig
        return sig

    @property
    def allocator(self) -> Allocator:
        if self._allocator is None:
            self._allocator = Allocator(self.slices, self.inv.classes, self.allocated, self.matcher, index=self._index)
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
        special = self.extended.claim(pod, self.claims)
        if special is not None:
            out.claims.append((POD_CLAIM, special))
        return out

    # ------------------------------------------------------------------ filters

    def node_static(self, pod: dict[str, Any], node: str) -> list[Failure]:
        """`static_failures` of ``pod`` on the node named ``node``, memoized as `node_statics` (do not modify)."""
        requests = pod_requests(pod)
        memo = self._static_memo.setdefault(static_signature(pod, requests), {})
        hit = memo.get(node)
        if hit is None:
            hit = memo[node] = self.static_failures(pod, self.nodes[node], requests=requests)
        return hit

    def node_statics(self, pod: dict[str, Any]) -> dict[str, list[Failure]]:
        """`static_failures` of ``pod`` on every node (by node name, in node order), memoized by what the
        filters read of the pod: requests, nodeSelector, affinity, tolerations. Do not modify the lists."""
        requests = pod_requests(pod)
        sig = static_signature(pod, requests)
        memo = self._static_memo.setdefault(sig, {})
        if len(memo) != len(self.nodes):
            for name, node in self.nodes.items():
                if name not in memo:
                    memo[name] = self.static_failures(pod, node, requests=requests)
            memo = {name: memo[name] for name in self.nodes}  # node order
            self._static_memo[sig] = memo
        return memo

    def static_failures(self, pod: dict[str, Any], node: Node, *,
                        requests: dict[str, int] | None = None) -> list[Failure]:
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
            if taint.get("effect") in ("NoSchedule", "NoExecute") and not tolerates(taint, tolerations):
                out.append(Failure("taint", f"node {node.name} has untolerated taint "
                                            f"{{{taint.get('key')}: {taint.get('value', '')}}}"))
                break
        out.extend(self.resource_failures(pod, node.name, requests=requests))
        return out

    def resource_failures(self, pod: dict[str, Any], node: str, *,
                          requests: dict[str, int] | None = None) -> list[Failure]:
        checks = sorted(self.extended.fit_requests(pod_requests(pod) if requests is None else requests, node).items())
        missing = lacking(checks, self.used[node], self.allocatable[node], every=True)
        if not missing:
            return []
        return [Failure("resources", f"node {node}: Insufficient {', '.join(missing)}")]

    def dra(self, claims: list[tuple[str, Claim]], node: Node, *, explain: bool) -> NodeResult:
        result = NodeResult(node.name)
        claims = self.extended.on_node(claims, node.name)
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
        for kind in ("selector-error", "topology", "capacity", "counters", "consumable-capacity", "taint",
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

    def _referenced_only(self, device: Any) -> Any:
        """A device of a slice manifest without the attributes that no selector or constraint of the dump
        can read (a GPU's uuid, PCI address...): when no expression iterates over attributes, one whose
        name occurs in no DeviceClass, ResourceClaim or ResourceClaimTemplate cannot change an outcome."""
        if self._corpus is None:
            docs = [c.manifest for c in self.inv.classes.values()] + [c.manifest for c in self.inv.claims.values()]
            docs += list(self.inv.templates.values())
            self._corpus = json.dumps(docs, default=str)
            self._iterates = any(token in self._corpus
                                 for token in ("exists", "all(", "size(", "map(", "filter(", "attributes)"))
        if self._iterates or not isinstance(device, dict) or not isinstance(device.get("attributes"), dict):
            return device
        out = dict(device)
        out["attributes"] = {k: v for k, v in device["attributes"].items() if self._referenced(str(k))}
        return out

    def _referenced(self, attribute: str) -> bool:
        hit = self._named.get(attribute)  # by the attribute as published: one lookup per attribute seen
        if hit is None:
            hit = self._named[attribute] = attribute.rsplit("/", 1)[-1] in (self._corpus or "")
        return hit

    def dra_shape(self, claims: list[tuple[str, Claim]], node: Node, *, explain: bool,
                  shape: str | None = None, share_nodes: bool = False) -> NodeResult:
        """`dra`, memoized by the shape of the claims (see ``__init__``): the failure reasons, progress and
        allocated devices are those of ``claims``; the messages, and the claim keys of ``allocations``, may
        name the claims of an earlier pod of the same shape. Do not modify the result. ``shape``:
        ``claims_shape(claims)``, when the caller has it. ``share_nodes``: the result may be that of
        another node with the same `node_signature` (then ``allocations`` name that node's devices, and
        messages that node)."""
        where: str | None = None
        if share_nodes and self.extended.mixed and any(is_special(c) for _, c in claims):
            share_nodes = False  # the special claim is left out on nodes that list its resources
        if share_nodes and all(c.allocation is None for _, c in claims):
            sig = self.node_signature(node.name)
            where = None if sig is None else "\x00" + sig  # never a node name
        memo = self._dra_memo.setdefault(node.name if where is None else where, {})
        key = (claims_shape(claims) if shape is None else shape, explain)
        hit = memo.get(key)
        if hit is None:
            hit = memo[key] = self.dra(claims, node, explain=explain)
        return hit

    # ------------------------------------------------------------------ devices

    def in_use(self, dev: DeviceID) -> bool:
        return dev in self.allocated.devices or dev in self._shared


def static_signature(pod: dict[str, Any], requests: dict[str, int] | None = None) -> str:
    """What the non-DRA filters read of a pod: requests, nodeSelector, affinity, tolerations."""
    spec = pod.get("spec") or {}
    return json.dumps([sorted((pod_requests(pod) if requests is None else requests).items()),
                       spec.get("nodeSelector") or {}, spec.get("affinity") or {}, spec.get("tolerations") or []],
                      sort_keys=True, default=str)


def claims_shape(claims: list[tuple[str, Claim]]) -> str:
    """What the allocator reads of a pod's claims, names aside: for the allocated ones their
    nodeSelector, for the others namespace, requests, constraints and config (in order)."""
    return repr([(c.allocation.get("nodeSelector"),) if c.allocation is not None
                 else (c.namespace, c.requests, c.constraints, c.config) for _, c in claims])
