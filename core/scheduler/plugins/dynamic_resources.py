"""The DynamicResources plugin of the scheduler reactor (kube-scheduler 1.35, pkg/scheduler/framework/
plugins/dynamicresources): resolve a pod's claims, allocate the unallocated ones on a node with the
structured allocator (all together, all-or-nothing), and say why not.

Per pod, one Allocator is built over every slice and class (as PreFilter builds one per cycle), and
asked node by node (Filter). Already-allocated claims only constrain the node (their nodeSelector)
and get one more consumer in reservedFor. The caller keeps an assume cache: allocations made earlier
in the same decision are counted as in use, like upstream's in-flight map.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ...cluster.pod_claims import group_claims, same_source, status_claim
from ...dra.allocated import AllocatedState
from ...dra.allocator import AllocationError, Allocator, Features
from ...dra.cel import CelMatcher, SelectorError
from ...dra.model import Claim
from ...dra.model import Node as DraNode
from ...kube.nodeselector import node_selector_matches
from ...log.events import claim_key
from ...state.cluster import ClusterState, NodeState, PodState
from ...state.dra import RESERVED_FOR_MAX
from ..framework import ExtensionPoint

NAME = "DynamicResources"
# PreFilter: DraPlugin.prefilter; Filter: DraPlugin.filter (run last and lazily, on the best-scored nodes:
# reactor.py); PostFilter: DraPlugin.explain (why, not upstream's deallocation); Reserve: the allocations in
# the cycle's assume cache; PreBind: ClaimAllocated and ClaimReserved, written with the binding (cycle.py).
EXTENSION_POINTS = (ExtensionPoint.PRE_FILTER, ExtensionPoint.FILTER, ExtensionPoint.POST_FILTER,
                    ExtensionPoint.RESERVE, ExtensionPoint.PRE_BIND)
DRA_FAILURE = "cannot allocate all claims"
Held = dict[str, tuple[str, dict[str, Any]]]  # claim key -> (gang key, allocation) of members waiting at Permit
# Allocator explanation kinds -> dralab's pending reasons.
EXPLANATION_CAUSE = {
    "capacity": "capacity",
    "counters": "capacity",
    "consumable-capacity": "capacity",
    "topology": "topology",
    "taint": "device-taint",  # devices tainted (the slice's taints, DeviceTaintRules'), not the node
    "incomplete-pool": "not-ready",
    "invalid-pool": "not-ready",
    "no-class": "missing",
    "selector-error": "selector-error",  # a selector failing at runtime (core/dra/explain_errors.py)
}


@dataclass
class PodClaims:
    """What PreFilter found: claims to allocate, claims already allocated, or why the pod cannot go on."""

    to_allocate: list[Claim] = field(default_factory=list)
    allocated: list[tuple[str, dict[str, Any]]] = field(default_factory=list)  # (claim key, allocation)
    missing: str | None = None  # a referenced object that does not exist: the pod is pending, reason missing
    waiting: bool = False  # a claim from a template is not created yet (the claim controller will)
    # claim key -> the consumer to reserve it for when it is not the pod: its PodGroup ("podgroup/<ns>/<name>"),
    # for the pod's entries that match one of the group's (KEP-5729)
    consumers: dict[str, str] = field(default_factory=dict)
    # kubernetes#137617 (1.35): a claim whose allocation is pending for a gang member waiting at Permit, refused to
    # the rest of that gang too (upstream PreFilter's "resource claim ... is in the process of being allocated")
    in_flight: str | None = None

    @property
    def any(self) -> bool:
        return bool(self.to_allocate or self.allocated)

    def shape(self) -> str:
        """What the DRA filter's answer depends on, names aside: claims with the same requests and
        constraints, and the same already-allocated node constraints, get the same answer on a node."""
        return repr(([(c.requests, c.constraints) for c in self.to_allocate],
                     [a.get("nodeSelector") for _, a in self.allocated]))


class DraPlugin:
    """Holds the compiled-selector cache across decisions (a cache, it never changes an answer) and the
    allocator's features, which do: the release's DRA gates (core/dra/features.py)."""

    def __init__(self, features: Features | None = None, status_claims: bool = False,
                 gang_claims_blocked: bool = False, filter_errors: bool = False) -> None:
        self.matcher = CelMatcher()
        self.features = features or Features()  # the allocator's, from the release's gates (dra/features.py)
        # release profiles: a template entry whose claim the pod's status names is that claim, template or not
        # (cluster/pod_claims.py status_claim); legacy logs were made with the template looked up first
        self.status_claims = status_claims
        # kubernetes#137617 (core/kube/bugs.py): a pending allocation blocks the holder's own gang as well
        self.gang_claims_blocked = gang_claims_blocked
        # release profiles: a selector failing at runtime is Filter's Error status, which aborts the attempt
        # (filter_errors.py); legacy logs were made with it counted as "cannot allocate" on that node
        self.filter_errors = filter_errors
        self._may_fail: dict[tuple[str, ...], bool] = {}  # selectors -> fails on some device (may_fail's memo)
        self._may_fail_index: object = None  # the slice index that memo is for

    def prefilter(self, view: ClusterState, pod: PodState, assumed: dict[str, dict[str, Any]],
                  held: Held | None = None, gang: str | None = None) -> PodClaims:
        """Resolve the pod's claims. A claim that a gang member waiting at Permit allocated (in flight,
        not yet written) is usable by members of the same gang only; other pods wait for it."""
        out = PodClaims()
        namespace = pod.key.split("/")[1]
        generated = view.dra.pod_claims.get(pod.key, {})
        shared = group_claims(view, pod)
        for entry in pod.manifest.get("spec", {}).get("resourceClaims") or []:
            group = shared.get(entry.get("name", ""))
            if group is not None and same_source(group[1], entry):
                key_or_none = self._group_claim(view, namespace, group[0], entry, out)
                if key_or_none is None:
                    if out.missing is not None:
                        return out
                    continue
                key = key_or_none
                out.consumers[key] = group[0]
            elif entry.get("resourceClaimName"):
                key = claim_key(namespace, entry["resourceClaimName"])
                if key not in view.dra.claims:
                    out.missing = f"ResourceClaim {namespace}/{entry['resourceClaimName']} does not exist"
                    return out
            elif self.status_claims and (made := status_claim(generated, entry)) is not None:
                if made not in view.dra.claims:  # named, not seen yet: upstream waits for it to be created
                    out.waiting = True
                    continue
                key = made
            else:
                template = entry.get("resourceClaimTemplateName", "")
                if f"{namespace}/{template}" not in view.dra.templates:
                    out.missing = f"ResourceClaimTemplate {namespace}/{template} does not exist"
                    return out
                if entry.get("name") not in generated:
                    out.waiting = True
                    continue
                key = generated[entry["name"]]
            state = view.dra.claims[key]
            if held and key in held:
                holder, in_flight = held[key]
                if holder == gang and self.gang_claims_blocked:
                    # kubernetes#137617 (fixed in 1.36.0 by #137647): PreFilter saw the claim's pending allocation
                    # (ClaimHasPendingAllocation) and answered Unschedulable, for the holder's gang as for any pod
                    out.in_flight = f"resource claim {key[6:]} is in the process of being allocated"
                    return out
                if holder != gang:
                    out.waiting = True
                    continue
                out.allocated.append((key, in_flight))
                continue
            if key in view.dra.deleting:  # upstream's podResourceClaims: the claim has a deletionTimestamp
                out.missing = f"resourceclaim {key[6:]} is being deleted"
                return out
            allocation = assumed.get(key, state.allocation)
            if allocation is not None:
                consumer = out.consumers.get(key, pod.key)
                if consumer not in state.reserved_for and len(state.reserved_for) >= RESERVED_FOR_MAX:
                    out.missing = f"ResourceClaim {key[6:]} already has {RESERVED_FOR_MAX} consumers"
                    return out
                out.allocated.append((key, allocation))
            else:
                for request in state.claim.requests:
                    for sub in request.choices():
                        if sub.device_class not in view.dra.classes:
                            out.missing = f"DeviceClass {sub.device_class} (claim {key[6:]}) does not exist"
                            return out
                out.to_allocate.append(state.claim)
        return out

    @staticmethod
    def _group_claim(view: ClusterState, namespace: str, consumer: str, entry: dict[str, Any],
                     out: PodClaims) -> str | None:
        """The claim key of a PodGroup's claim entry; None with `out.missing` (it does not exist) or
        `out.waiting` (the claim controller has not made it from its template yet)."""
        if entry.get("resourceClaimName"):
            key = claim_key(namespace, entry["resourceClaimName"])
            if key not in view.dra.claims:
                out.missing = f"ResourceClaim {namespace}/{entry['resourceClaimName']} does not exist"
                return None
            return key
        template = entry.get("resourceClaimTemplateName", "")
        if f"{namespace}/{template}" not in view.dra.templates:
            out.missing = f"ResourceClaimTemplate {namespace}/{template} does not exist"
            return None
        made = view.dra.pod_claims.get(consumer, {}).get(entry.get("name", ""))
        if made is None:
            out.waiting = True
        return made

    def allocator(self, view: ClusterState, allocated: AllocatedState) -> Allocator:
        return Allocator([], view.dra.classes, allocated, self.matcher, features=self.features,
                         index=view.dra.taint_rules.index(view.dra.slices, view.dra.slice_index()))  # taints: rules

    def filter(
        self, allocator: Allocator | None, claims: PodClaims, node: NodeState
    ) -> tuple[dict[str, dict[str, Any]] | None, str | None]:
        """The allocations for this node (claim key -> allocation), or the failure reason."""
        for _, allocation in claims.allocated:
            if not node_selector_matches(allocation.get("nodeSelector"), node.labels, node.name):
                return None, "node(s) didn't match a ResourceClaim's allocation"
        if not claims.to_allocate or allocator is None:
            return {}, None
        try:
            outcome = allocator.allocate(dra_node(node), claims.to_allocate, explain=False)
        except (AllocationError, SelectorError) as exc:
            return None, f"{DRA_FAILURE}: {exc}"
        if outcome.outcome != "allocated":
            return None, DRA_FAILURE
        return {claim_key(c.namespace, c.name): outcome.allocations[c.key] for c in claims.to_allocate}, None

    def explain(self, allocator: Allocator, claims: PodClaims, node: NodeState) -> tuple[str, str]:
        """Why the claims do not fit on this node: (pending cause, message)."""
        try:
            outcome = allocator.allocate(dra_node(node), claims.to_allocate, explain=True)
        except (AllocationError, SelectorError) as exc:
            return "missing", str(exc)
        if not outcome.explanations:
            return "capacity", outcome.message
        first = outcome.explanations[0]
        return EXPLANATION_CAUSE.get(first.kind, "capacity"), first.message


    def may_fail(self, view: ClusterState, claims: PodClaims) -> bool:
        """Whether a selector of the claims to allocate (theirs, their classes') fails to evaluate on some device
        of some slice: only then can a Filter end with upstream's selector error (filter_errors.py). Cached per
        set of selectors while the slices do not change; the results per device are the matcher's cache."""
        index = view.dra.slice_index()
        if index is not self._may_fail_index:
            self._may_fail, self._may_fail_index = {}, index
        classes = view.dra.classes
        exprs = tuple(dict.fromkeys(
            expr for claim in claims.to_allocate for request in claim.requests for sub in request.choices()
            for expr in (*(classes[sub.device_class].selectors if sub.device_class in classes else ()),
                         *sub.selectors)))
        hit = self._may_fail.get(exprs)
        if hit is None:
            hit = self._may_fail[exprs] = any(
                self._fails(expr, device) for expr in exprs for slc in view.dra.slices.values()
                for device in slc.devices)
        return hit

    def _fails(self, expression: str, device: Any) -> bool:
        try:
            self.matcher.matches(expression, device, "selector")
        except Exception:  # SelectorError: does not compile, fails at runtime or is not a bool
            return True
        return False

    def filter_error(self, allocator: Allocator, claims: PodClaims, node: NodeState
                     ) -> tuple[bool, tuple[str, str] | None]:
        """Filter on this node as upstream runs it: (feasible, None), or (False, (message, detail)) when the
        allocator ends on a selector that fails to evaluate: the Error status's message as handleSchedulingFailure
        writes it, and dralab's explanation (naming request, claim and device) as the detail."""
        for _, allocation in claims.allocated:
            if not node_selector_matches(allocation.get("nodeSelector"), node.labels, node.name):
                return False, None
        if not claims.to_allocate:
            return True, None
        outcome = allocator.allocate(dra_node(node), claims.to_allocate, explain=False)
        if outcome.outcome == "allocated":
            return True, None
        first = outcome.explanations[0] if outcome.outcome == "error" and outcome.explanations else None
        if first is None or first.kind != "selector-error":
            return False, None
        # the explanation opens with upstream's allocator error (core/dra/explain_errors.py selector_error)
        upstream = first.message.split(" (request ", 1)[0]
        return False, (f'running "{NAME}" filter plugin: {upstream}', first.message)


def dra_node(node: NodeState) -> DraNode:
    return DraNode(name=node.name, labels=node.labels, manifest=node.manifest)
