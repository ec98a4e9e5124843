"""Invariants: what must hold in every state of every run, whatever the faults.

Checked by the simulator after every record and by every run at its end; a violation is reported
with the offset where it was first seen, so the log can be replayed and shrunk to it.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..cluster.pod_claims import group_claims, same_source
from ..log.events import claim_key
from ..scheduler.plugins.dra_extended import served_on
from ..scheduler.plugins.node_resources_fit import allocatable_of
from ..state.cluster import ClusterState, NodeState
from .dra import CounterWatch, counter_violations, counters_within_capacity


@dataclass(frozen=True)
class Violation:
    invariant: str
    offset: int
    message: str

    def to_json(self) -> dict[str, object]:
        return {"invariant": self.invariant, "offset": self.offset, "message": self.message}


def no_overcommit(state: ClusterState) -> list[str]:
    """No node holds pods whose requests exceed its allocatable (the scheduler's core promise), counting
    what gang members waiting at Permit hold there."""
    return [msg for node in state.nodes.values() for msg in _overcommit(node, state)]


def _overcommit(node: NodeState, state: ClusterState) -> list[str]:
    out = []
    for resource in sorted(node.used.keys() | node.reserved.keys()):
        used = node.used.get(resource, 0) + node.reserved.get(resource, 0)
        limit = allocatable_of(node.allocatable, resource)
        if used > limit and not node.allocatable.get(resource):  # DRA extended resources: served by devices
            used -= served_on(state, node).get(resource, 0)
        if used > limit:
            held = f" ({node.reserved[resource]} held for waiting gang members)" if node.reserved.get(
                resource) else ""
            out.append(f"node {node.name}: {resource} {used} in use > {limit} allocatable{held}")
    return out


def bound_to_ready_nodes(state: ClusterState) -> list[str]:
    """Every running pod sits on an existing node that was Ready when the pod was bound (the fold notes
    a binding to a node not Ready then: a node may turn NotReady later with its pods still running)."""
    out = list(state.unready_bindings)
    for key in state.pods_by_phase["Running"]:
        pod = state.pods[key]
        node = state.nodes.get(pod.node or "")
        if node is None:
            out.append(f"pod {key} runs on missing node {pod.node}")
    return out


def group_within_max(state: ClusterState) -> list[str]:
    """The autoscaler never asks a group for more nodes than its max."""
    return [
        f"node group {g.name}: target size {g.target_size} > max {g.max}"
        for g in state.node_groups.values()
        if g.target_size > g.max
    ]


def no_device_allocated_twice(state: ClusterState) -> list[str]:
    """A dedicated device belongs to at most one allocated claim (admin access aside), counting the
    in-flight allocations of gang members waiting at Permit."""
    owner: dict[tuple[str, str, str], str] = {}
    out = []
    allocations = [(key, claim.allocation) for key, claim in state.dra.claims.items()]
    allocations += [(key, a) for r in state.gang.reservations.values() for key, a in r.allocations.items()]
    for key, allocation in allocations:
        for result in ((allocation or {}).get("devices") or {}).get("results") or []:
            if result.get("adminAccess") or result.get("shareID"):
                continue
            dev = (str(result.get("driver")), str(result.get("pool")), str(result.get("device")))
            if dev in owner and owner[dev] != key:
                out.append(f"device {'/'.join(dev)} allocated to {owner[dev]} and {key}")
            owner.setdefault(dev, key)
    return out


def claims_reserved_for_running_pods(state: ClusterState) -> list[str]:
    """Every pod running with claims is in each claim's reservedFor (kubelet would not start it)."""
    return [msg for key in state.pods_by_phase["Running"] for msg in _unreserved(state, key)]


def _unreserved(state: ClusterState, key: str) -> list[str]:
    out = []
    for own in state.dra.pod_claims.get(key, {}).values():
        claim = state.dra.claims.get(own)
        if claim is None or key not in claim.reserved_for:
            out.append(f"pod {key} runs without being in reservedFor of {own}")
    if key in state.gang.group_of:  # KEP-5729: a PodGroup's claim is reserved for the group, not its pods
        pod = state.pods[key]
        shared = group_claims(state, pod)
        for entry in pod.manifest.get("spec", {}).get("resourceClaims") or []:
            group = shared.get(entry.get("name", ""))
            if group is None or not same_source(group[1], entry):
                continue
            made = (state.dra.pod_claims.get(group[0], {}).get(entry.get("name", ""))
                    if entry.get("resourceClaimTemplateName")
                    else claim_key(key.split("/")[1], str(entry.get("resourceClaimName"))))
            claim = state.dra.claims.get(made or "")
            if claim is None or group[0] not in claim.reserved_for:
                out.append(f"pod {key} runs while its PodGroup is not in reservedFor of {made or entry.get('name')}")
    return out


def gang_never_partially_bound(state: ClusterState) -> list[str]:
    """A record that binds members of a gang leaves at least minCount of them running (KEP-4671)."""
    return list(state.gang_violations)


def log_is_consistent(state: ClusterState) -> list[str]:
    """Every event made sense when applied (no double binding, no unknown objects, no gaps)."""
    return list(state.anomalies)


INVARIANTS = {
    "no-overcommit": no_overcommit,
    "bound-to-ready-nodes": bound_to_ready_nodes,
    "group-within-max": group_within_max,
    "no-device-allocated-twice": no_device_allocated_twice,
    "counters-within-capacity": counters_within_capacity,
    "claims-reserved-for-running-pods": claims_reserved_for_running_pods,
    "gang-never-partially-bound": gang_never_partially_bound,
    "log-consistent": log_is_consistent,
}


def check(state: ClusterState) -> list[Violation]:
    return [Violation(name, state.offset, msg) for name, fn in INVARIANTS.items() for msg in fn(state)]


class InvariantMonitor:
    """Checks after each record and keeps the first sighting of each distinct violation.

    Incremental: the first observation of a state checks everything and turns on the fold's bookkeeping
    of what each record touched (`ClusterState.touched_*`); later observations check only what can have
    changed. A violation can only first appear where the record touched something: an overcommitted
    node was touched (pods bound, finished, reserved or released there), a pod on a missing node needs
    a node deleted, a pod missing from a claim's reservedFor was touched (bound, released, given a new
    claim), a device allocated twice needs an allocation changed, and the fold's own lists (unready
    bindings, partial gangs, anomalies) only grow. Whenever a touched object shows a violation not seen
    yet, that invariant is checked in full, so the violations, their offsets and their order are those of
    checking everything after every record.
    Counters and consumable capacity (checks/dra.py) can only first be exceeded in a pool whose
    devices in use changed, or when the slices changed (then every pool is checked)."""

    def __init__(self) -> None:
        self._seen: dict[tuple[str, str], Violation] = {}
        self._state: ClusterState | None = None
        self._lengths: tuple[int, int, int] = (0, 0, 0)
        self._counters: CounterWatch | None = None

    def observe(self, state: ClusterState) -> None:
        if state is not self._state:
            self._state = state
            state.touched_nodes, state.touched_pods, state.touched_allocations = set(), set(), False
            self._lengths = (len(state.unready_bindings), len(state.gang_violations), len(state.anomalies))
            self._counters = CounterWatch(state)
            self._add(check(state))
            return
        nodes, pods, allocations = state.touched_nodes or set(), state.touched_pods or set(), state.touched_allocations
        state.touched_nodes, state.touched_pods, state.touched_allocations = set(), set(), False
        lengths = (len(state.unready_bindings), len(state.gang_violations), len(state.anomalies))
        grown = [now > before for now, before in zip(lengths, self._lengths, strict=True)]
        self._lengths = lengths
        deleted = any(name not in state.nodes for name in nodes)
        running = state.pods_by_phase["Running"]
        assert self._counters is not None
        pools = self._counters.dirty_pools(state, allocations)
        dirty = {
            "no-overcommit": any(self._new("no-overcommit", _overcommit(state.nodes[name], state))
                                 for name in nodes if name in state.nodes),
            "bound-to-ready-nodes": grown[0] or deleted,
            "group-within-max": True,  # a few node groups: checked every time
            "no-device-allocated-twice": allocations,
            "counters-within-capacity": pools is None or (bool(pools) and self._new(
                "counters-within-capacity", counter_violations(state, pools))),
            "claims-reserved-for-running-pods": any(self._new("claims-reserved-for-running-pods",
                                                              _unreserved(state, key))
                                                    for key in pods if key in running),
            "gang-never-partially-bound": grown[1],
            "log-consistent": grown[2],
        }
        self._add([Violation(name, state.offset, msg) for name, fn in INVARIANTS.items() if dirty[name]
                   for msg in fn(state)])

    def _new(self, invariant: str, messages: list[str]) -> bool:
        return any((invariant, msg) not in self._seen for msg in messages)

    def _add(self, violations: list[Violation]) -> None:
        for violation in violations:
            self._seen.setdefault((violation.invariant, violation.message), violation)

    def __len__(self) -> int:
        return len(self._seen)

    @property
    def violations(self) -> list[Violation]:
        return list(self._seen.values())
