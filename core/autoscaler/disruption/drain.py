"""Which pods a scale-down may move, and whether they fit elsewhere: cluster-autoscaler's drain simulation
(simulator/drainability/rules, simulator.RemovalSimulator), for nodes that are not empty.

Each pod of the node goes through upstream's default rules, in order (rules.Default with
skipNodesWithSystemPods, skipNodesWithLocalStorage and skipNodesWithCustomControllerPods all true, the
defaults; `DrainRules` turns them off as the flags do):
  mirror pod (annotation kubernetes.io/config.mirror)                  -> stays, does not block
  DaemonSet pod                                                        -> stays, does not block
  annotation cluster-autoscaler.kubernetes.io/safe-to-evict: "true"    -> moves
  no controller of kind ReplicationController/Job/ReplicaSet/StatefulSet -> blocks (NotReplicated)
  namespace kube-system                                                -> blocks (UnmovableKubeSystemPod)
  safe-to-evict: "false"                                               -> blocks (NotSafeToEvictAnnotation)
  a hostPath or disk-backed emptyDir volume not listed in
  cluster-autoscaler.kubernetes.io/safe-to-evict-local-volumes         -> blocks (LocalStorageRequested)
  a PodDisruptionBudget with less than one disruption left matches it -> blocks (NotEnoughPdb; pdb.py)
  otherwise                                                            -> moves
Budgets are read only when the scenario has PodDisruptionBudgets (the run config's `autoscaler.pdbs`).

In release profiles, expendable pods (priority below --expendable-pods-priority-cutoff, -10) are not seen at
all: cluster-autoscaler leaves them out of its snapshot (static_autoscaler.go: FilterOutExpendablePods before
initializeClusterSnapshot; the actuator's snapshot likewise), so they neither block nor move, and end with
the node.

The pods that move must each fit on another ready node of the autoscaler's snapshot (the scheduler's
filters; with a DRA policy the allocator too), the node itself and the nodes already chosen for removal
left out; their placements stay in the snapshot for the next candidate, as upstream's removal simulator
keeps them. A pod's claims that only it uses are deallocated in the snapshot and allocated again where
it goes (the DRA snapshot's unreserve-and-deallocate); a claim it shares with other pods keeps its
allocation, so the pod may only go where that allocation's node selector allows.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ...cluster.workload_controllers import replicated
from ...kube.defaults import (
    SKIP_NODES_WITH_CUSTOM_CONTROLLER_PODS,
    SKIP_NODES_WITH_LOCAL_STORAGE,
    SKIP_NODES_WITH_SYSTEM_PODS,
)
from ...kube.nodeselector import node_selector_matches
from ...scheduler.plugins.dynamic_resources import PodClaims
from ...scheduler.plugins.fragmentation import claim_demand
from ...state.cluster import ClusterState, NodeState, PodState
from ...state.objects import controller_ref
from ..simulation.capacity import SimNode, Simulation
from ..simulation.nominated import expendable
from .pdb import NOT_ENOUGH_PDB, RemainingPdbs

MIRROR_ANNOTATION = "kubernetes.io/config.mirror"
SAFE_TO_EVICT = "cluster-autoscaler.kubernetes.io/safe-to-evict"
SAFE_LOCAL_VOLUMES = "cluster-autoscaler.kubernetes.io/safe-to-evict-local-volumes"
STAYS, MOVES = "stays", "moves"


@dataclass(frozen=True)
class DrainRules:
    """The flags of upstream's default drainability rules (rules.Default's options): --skip-nodes-with-system-pods,
    --skip-nodes-with-local-storage, --skip-nodes-with-custom-controller-pods, all true by default. With the first
    false a kube-system pod does not block (rules/system); with the second, local storage does not
    (rules/localstorage); with the third, any controller makes a pod replicated, not only the kinds upstream knows
    (rules/replicated: `controllerRef != nil`)."""

    system_pods: bool = SKIP_NODES_WITH_SYSTEM_PODS
    local_storage: bool = SKIP_NODES_WITH_LOCAL_STORAGE
    custom_controller_pods: bool = SKIP_NODES_WITH_CUSTOM_CONTROLLER_PODS


DEFAULT_RULES = DrainRules()


def drainability(pod: PodState, rules: DrainRules = DEFAULT_RULES) -> tuple[str, str]:
    """(STAYS | MOVES | "blocked", the upstream block reason or "")."""
    meta = pod.manifest.get("metadata") or {}
    annotations = meta.get("annotations") or {}
    if MIRROR_ANNOTATION in annotations:
        return STAYS, ""
    ref = controller_ref(pod.manifest)
    if ref is not None and ref.get("kind") == "DaemonSet":
        return STAYS, ""
    if annotations.get(SAFE_TO_EVICT) == "true":
        return MOVES, ""
    if (replicated(pod.manifest) if rules.custom_controller_pods else ref) is None:
        return "blocked", "NotReplicated"
    if rules.system_pods and (meta.get("namespace") or "default") == "kube-system":
        return "blocked", "UnmovableKubeSystemPod"
    if annotations.get(SAFE_TO_EVICT) == "false":
        return "blocked", "NotSafeToEvictAnnotation"
    if rules.local_storage and blocking_local_storage(pod.manifest, annotations):
        return "blocked", "LocalStorageRequested"
    return MOVES, ""


def blocking_local_storage(manifest: dict[str, Any], annotations: dict[str, Any]) -> bool:
    """utils/drain.HasBlockingLocalStorage: hostPath, or emptyDir not in memory, unless declared safe."""
    safe = {v.strip() for v in str(annotations.get(SAFE_LOCAL_VOLUMES) or "").split(",") if v.strip()}
    for volume in (manifest.get("spec") or {}).get("volumes") or []:
        if not isinstance(volume, dict) or volume.get("name") in safe:
            continue
        empty_dir = volume.get("emptyDir")
        if "hostPath" in volume or (empty_dir is not None and (empty_dir or {}).get("medium") != "Memory"):
            return True
    return False


def pods_to_move(view: ClusterState, node: NodeState, pdbs: RemainingPdbs | None = None,
                 skip_expendable: bool = False, rules: DrainRules = DEFAULT_RULES) -> list[PodState] | tuple[str, str]:
    """The node's pods a drain evicts, or (the block reason, the pod key) of the first pod that blocks.
    `pdbs`: the loop's remaining budgets (none: no PodDisruptionBudgets); `skip_expendable`: release profiles."""
    moving = []
    for key in node.pods:
        pod = view.pods[key]
        if skip_expendable and expendable(pod):
            continue
        outcome, reason = drainability(pod, rules)
        if outcome == "blocked":
            return reason, key
        if outcome == MOVES:
            # the PDB rule comes last (rules.Default): safe-to-evict pods were let go before it
            if pdbs is not None and pdbs.blocks(pod) and not _safe_to_evict(pod):
                return NOT_ENOUGH_PDB, key
            moving.append(pod)
    return moving


def _safe_to_evict(pod: PodState) -> bool:
    return ((pod.manifest.get("metadata") or {}).get("annotations") or {}).get(SAFE_TO_EVICT) == "true"


@dataclass
class _Placed:
    pod: PodState
    node: SimNode
    allocations: dict[str, dict[str, Any]]


class RemovalSimulator:
    """Moves nodes' pods elsewhere in the autoscaler's snapshot, candidate after candidate."""

    def __init__(self, view: ClusterState, sim: Simulation, nodes: list[SimNode], removed: set[str]) -> None:
        self.view, self.sim, self.nodes = view, sim, nodes
        self.removed = removed  # nodes leaving (the caller's set, which this one adds to): no destinations
        self.destinations: set[str] = set()  # nodes that took pods: not removed in the same loop

    def try_remove(self, node: NodeState, pods: list[PodState]) -> bool:
        """Whether every pod finds another node; if so the node counts as removed and its pods stay
        placed in the snapshot, else the snapshot is as before."""
        if node.name in self.destinations:
            return False
        placed: list[_Placed] = []
        freed: list[dict[str, Any]] = []
        for pod in pods:
            kept = self._release_claims(pod, freed)
            spot = self._find(pod, node.name, kept)
            if spot is None:
                self._undo(placed, freed)
                return False
            self.sim.place(pod, spot[0], spot[1])
            placed.append(_Placed(pod, spot[0], spot[1]))
        self.removed.add(node.name)
        self.destinations.update(p.node.node.name for p in placed)
        return True

    def _release_claims(self, pod: PodState, freed: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Deallocate in the snapshot the claims only this pod uses (to be allocated again where it
        goes); the allocations of the claims it shares, which it keeps."""
        claims = self.sim.claims(pod)
        kept: list[tuple[str, dict[str, Any]]] = []
        again = []
        for key, allocation in claims.allocated:
            state = self.view.dra.claims.get(key)
            if state is not None and set(state.reserved_for) <= {pod.key}:
                self.sim.allocated.remove_allocation(allocation)
                freed.append(allocation)
                again.append(state.claim)
            else:
                kept.append((key, allocation))
        self.sim.set_claims(pod, PodClaims(to_allocate=[*claims.to_allocate, *again], allocated=kept,
                                           missing=claims.missing, waiting=claims.waiting))
        return [a for _, a in kept]

    def _find(self, pod: PodState, leaving: str, kept: list[dict[str, Any]]
              ) -> tuple[SimNode, dict[str, dict[str, Any]]] | None:
        for sim_node in self.nodes:
            name = sim_node.node.name
            if name == leaving or name in self.removed:
                continue
            if not all(node_selector_matches(a.get("nodeSelector"), sim_node.node.labels, name) for a in kept):
                continue
            allocations = self.sim.fits(pod, sim_node)
            if allocations is not None:
                return sim_node, allocations
        return None

    def _undo(self, placed: list[_Placed], freed: list[dict[str, Any]]) -> None:
        for p in placed:
            used = p.node.used
            for resource, amount in p.pod.requests.items():
                used[resource] = used.get(resource, 0) - amount
            used["pods"] = used.get("pods", 0) - 1
            if self.sim.policy == "count":
                p.node.devices_used -= sum(claim_demand(c) for c in self.sim.claims(p.pod).to_allocate)
            for allocation in p.allocations.values():
                self.sim.allocated.remove_allocation(allocation)
        for allocation in freed:
            self.sim.allocated.add_allocation(allocation)
