"""Stranded GPUs: free GPUs of Ready nodes that no pending pod could use where they are, and why.

`gpu_hours_idle` (core/analysis/metrics.py) compares counts: a node's free GPUs are "wanted" as soon as some
pending pod asks for no more devices than the node has free, whatever the shape of its request. So four pods
that each want 4 GPUs in one NVLink domain, pending beside four nodes with 4 free GPUs split 2 + 2 across
domains, make those 16 paid GPUs count as wanted, and `gpu_hours_idle` says 0 (issue 22). Here each pending
pod is judged on each node the way kube-scheduler judges it, restricted to that node: the Filter plugins
dralab runs for every pod (NodeUnschedulable, NodeAffinity, TaintToleration, NodeResourcesFit:
core/scheduler/filters.py FILTERS), then DynamicResources' allocation of its unallocated claims on that node
with the allocator's explanation of a failure (core/dra/explain.py, through the scheduler's own DraPlugin).

Definition, at each instant while at least one pending pod asks for devices:

- a Ready node's free GPUs (paid GPUs less used and held, as the fold counts them) are **wanted** when some
  pending pod passes every filter there and its claims can be allocated there;
- otherwise they are **stranded**, and the cause is the failure of the *nearest* pending pod: the one that
  got furthest through the chain (node readiness < node selector < taint < resources < devices; among device
  failures, a request no free device matches (`selector`) < `capacity` < `device-taint` <
  `consumable-capacity` < `counters` < `topology`: the later, the more "the room is there, wrong shape").
  Fewer free extended GPUs (`nvidia.com/gpu`) than the pod asks is `capacity` too, as too few devices are.

Pods that cannot take a node whatever its state are not pending pods here: gated pods (asking nothing, as in
idle), gang members holding a place at Permit, pods in PreBind, pods of another scheduler, pods whose claims
are missing or not created yet. While no pending pod asks for devices nothing is stranded: the free GPUs are
idle for want of demand (`gpu_hours_idle` says so), not for want of the right shape.

Cost: pods are grouped by what the answer depends on (placement constraints, requests, claim shapes), each
(node, shape) answer is kept until the node changes (a record touches it), and the totals are recomputed
lazily, once per instant that is integrated, for the nodes touched since (all nodes with free GPUs when the
set of pending shapes changed, from the kept answers). Approximations (documented in docs/cli.md): a node is
judged whole (a node where some pod fits counts all its free GPUs as wanted, even devices of another model
that pod does not select); partially used GPUs are never stranded (their unused share stays in idle); spread
and inter-pod affinity, DRA extended resources (KEP-5004) and DeviceTaintRules changed mid-run are not weighed.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable
from typing import Any

from ..dra.allocator import AllocationError, Allocator
from ..dra.cel import SelectorError
from ..dra.features import allocator_features
from ..kube.fields import FieldError
from ..kube.versions import merge_gates, profile_from_config
from ..scheduler.filters import FILTERS, static_shape
from ..scheduler.plugins.dynamic_resources import DraPlugin, PodClaims, dra_node
from ..state.cluster import ClusterState, NodeState, PodState
from .gpu_units import is_gpu_resource

# the stage each cause is found at: the higher, the nearer the pod came to using the GPUs
CAUSE_RANK = {"not-ready": 0, "selector": 1, "taint": 2, "missing": 3, "resources": 4, "capacity": 5,
              "device-taint": 6, "consumable-capacity": 7, "counters": 8, "topology": 9}
# the allocator's explanation kinds (core/dra/explain.py) as stranded causes; `capacity` with no matching device
# on the node is `selector` (the request's class or selectors pick none of its devices)
EXPLANATION_KINDS = {"capacity": "capacity", "counters": "counters", "consumable-capacity": "consumable-capacity",
                     "topology": "topology", "taint": "device-taint", "incomplete-pool": "not-ready",
                     "invalid-pool": "not-ready", "no-class": "missing"}
# issue 23: a selector failing at runtime (core/dra/explain_errors.py) is no lack of devices: ranked with `selector`
# (the pod's own selectors keep it off the GPUs), never `capacity`
EXPLANATION_KINDS["selector-error"] = "selector-error"
CAUSE_RANK["selector-error"] = 1
CLAIM_ELSEWHERE = "selector"  # an allocated claim of the pod pins it to other nodes (its nodeSelector)
# objects whose change may change any answer (classes select devices, templates make claims, taint rules taint
# devices anywhere): a record writing one drops every kept answer (rare: objects over time, issue 22)
EVERYWHERE = ("deviceclass/", "claimtemplate/", "devicetaintrule/")


class StrandedFold:
    """The stranded GPUs of the fold's current state, kept per node and totalled by cause.

    `free(name)` is the fold's count of a node's free GPUs (0 for a node that is not Ready or gone)."""

    def __init__(self, free: Callable[[str], int]) -> None:
        self.free = free
        self.dra: DraPlugin | None = None
        self.pod_shape: dict[str, str] = {}  # candidate pod -> its shape
        self.members: dict[str, set[str]] = {}  # shape -> candidate pods
        self.unresolved: set[str] = set()  # pending pods whose claims do not all exist yet
        self.answers: dict[str, dict[str, str | None]] = {}  # node -> shape -> cause (None: fits), kept
        self.free_nodes: set[str] = set()  # nodes with free GPUs
        self.counted: dict[str, tuple[str | None, int]] = {}  # node -> (cause, or None: wanted; GPUs)
        self.by_cause: Counter[str] = Counter()  # cause -> stranded GPUs now
        self.wanted = 0  # free GPUs some pending pod could use, now
        self._dirty: set[str] = set()
        self._all = False  # the shapes changed: every node with free GPUs is recounted
        self._allocator: Allocator | None = None

    # ------------------------------------------------------------------ per record

    def step(self, state: ClusterState, nodes: Iterable[str], writes: Iterable[str], candidates: dict[str, int]
             ) -> None:
        """After a record: `nodes` it touched, `writes` its keys, `candidates` the fold's pending pods asking for
        devices (pod -> demand)."""
        for name in nodes:
            self._dirty.add(name)
            self.answers.pop(name, None)
        again: set[str] = set()
        claims = everywhere = False
        for key in writes:
            if key.startswith("pod/"):
                again.add(key)
            elif key.startswith("claim/"):
                claims = True  # a pending pod's claim may exist now
            elif key.startswith(EVERYWHERE):
                everywhere = True
        if everywhere:
            self.answers.clear()
            self._all = True
        if claims or everywhere:
            again |= self.unresolved
        for key in sorted(again):
            self._reshape(state, key, key in candidates)

    def _reshape(self, state: ClusterState, key: str, asks: bool) -> None:
        pod = state.pods.get(key)
        shape: str | None = None
        self.unresolved.discard(key)
        if pod is not None and asks and _may_take_a_node(state, pod):
            claims = self._claims(state, pod)
            if claims.missing is not None or claims.waiting:
                self.unresolved.add(key)
            else:
                shape = repr((static_shape(pod), sorted(pod.requests.items()), claims.shape()))
        old = self.pod_shape.get(key)
        if old == shape:
            return
        if old is not None:
            del self.pod_shape[key]
            members = self.members[old]
            members.discard(key)
            if not members:
                del self.members[old]
                self._all = True
        if shape is not None:
            self.pod_shape[key] = shape
            if shape not in self.members:
                self.members[shape] = set()
                self._all = True
            self.members[shape].add(key)

    def _claims(self, state: ClusterState, pod: PodState) -> PodClaims:
        if not pod.manifest.get("spec", {}).get("resourceClaims"):
            return PodClaims()  # what PreFilter finds for a pod without claims, without its lookups
        if self.dra is None:
            self.dra = DraPlugin(allocator_features(_profile(state)))
        return self.dra.prefilter(state, pod, {})

    # ------------------------------------------------------------------ totals, once per integrated instant

    def flush(self, state: ClusterState) -> None:
        """Recount the nodes that changed (all nodes with free GPUs when the pending shapes changed)."""
        for name in self._dirty:
            if self.free(name) > 0:
                self.free_nodes.add(name)
            else:
                self.free_nodes.discard(name)
        todo = set(self.free_nodes) | set(self.counted) if self._all else self._dirty
        self._dirty = set()
        self._all = False
        self._allocator = None
        shapes = sorted(self.members)
        for name in sorted(todo):
            self._recount(state, name, shapes)
        self._allocator = None

    def _recount(self, state: ClusterState, name: str, shapes: list[str]) -> None:
        old = self.counted.pop(name, None)
        if old is not None:
            cause, gpus = old
            if cause is None:
                self.wanted -= gpus
            else:
                self.by_cause[cause] -= gpus
                if not self.by_cause[cause]:
                    del self.by_cause[cause]
        free = self.free(name) if self.members else 0
        node = state.nodes.get(name)
        if free <= 0 or node is None:
            return
        answers = self.answers.setdefault(name, {})
        nearest: str | None = None
        for shape in shapes:
            if shape not in answers:
                answers[shape] = self._judge(state, shape, node)
            cause = answers[shape]
            if cause is None:
                self.counted[name] = (None, free)
                self.wanted += free
                return
            if nearest is None or CAUSE_RANK.get(cause, 4) > CAUSE_RANK.get(nearest, 4):
                nearest = cause
        assert nearest is not None
        self.counted[name] = (nearest, free)
        self.by_cause[nearest] += free

    def _judge(self, state: ClusterState, shape: str, node: NodeState) -> str | None:
        """Why a pod of this shape cannot go on the node now (a stranded cause), or None when it can."""
        pod = state.pods[min(self.members[shape])]
        for f in FILTERS:
            status = f(pod, node, node.used)
            if status is not None:
                if status.cause == "resources" and _too_few_gpus(pod, node):
                    return "capacity"  # the GPUs themselves are too few here, as for devices
                return status.cause or "resources"
        claims = self._claims(state, pod)
        if not claims.any:
            return None
        assert self.dra is not None
        if self._allocator is None:
            self._allocator = self.dra.allocator(state, state.dra.allocated)
        allocations, failure = self.dra.filter(None, claims, node)  # allocated claims' node selectors only
        if allocations is None:
            return CLAIM_ELSEWHERE
        if not claims.to_allocate:
            return None
        try:
            outcome = self._allocator.allocate(dra_node(node), claims.to_allocate, explain=True)
        except (AllocationError, SelectorError):
            return "missing"
        if outcome.outcome == "allocated":
            return None
        if not outcome.explanations:
            return "capacity"
        first = outcome.explanations[0]
        if first.kind == "capacity" and first.matching == 0:
            return "selector"
        return EXPLANATION_KINDS.get(first.kind, "capacity")


def _too_few_gpus(pod: PodState, node: NodeState) -> bool:
    """Whether the node has fewer free extended GPUs (`*/gpu`) than the pod asks for."""
    return any(node.allocatable.get(r, 0) - node.used.get(r, 0) < a for r, a in pod.requests.items()
               if a > 0 and is_gpu_resource(r))


def _may_take_a_node(state: ClusterState, pod: PodState) -> bool:
    """A pending pod that could be placed on a node if one suited it: not holding a place at Permit, not in
    PreBind, and for dralab's scheduler."""
    spec: dict[str, Any] = pod.manifest.get("spec", {})
    return (pod.key not in state.gang.reservations and pod.key not in state.dra.binding
            and spec.get("schedulerName", "default-scheduler") == "default-scheduler")


def _profile(state: ClusterState) -> Any:
    """The release the run's scheduler emulated (its own gates merged in), from the log's RunStarted."""
    config = state.run.config if state.run is not None else {}
    try:
        return merge_gates(profile_from_config(config.get("kubernetes")),
                           (config.get("scheduler") or {}).get("feature_gates") or {}, path="scheduler")
    except (FieldError, ValueError):
        return profile_from_config(None)
