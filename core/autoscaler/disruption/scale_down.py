"""Scale-down, as cluster-autoscaler does it (core/scaledown: planner, unneeded nodes, actuation).

A node is a candidate when its group is above its min size, it is ready, and its utilization is below
the threshold (0.5): for a node with GPUs, GPU utilization only (extended resources, or for DRA the
share of the node's devices allocated); else max(cpu, memory) requested over allocatable. It must stay
a candidate for `unneededTime` (10 min), and no scale-up may have happened in the last `delayAfterAdd`
(10 min). Actuation taints it `ToBeDeletedByClusterAutoscaler:NoSchedule` (the value is the time, as
upstream writes it), then `deleteDelayAfterTaint` (5 s) later deletes it.

A node with pods is scaled down too when every pod is either left behind (DaemonSet and mirror pods) or
may move and fits on another node (drain.py: upstream's drainability rules and removal simulation):
at most `--scale-down-non-empty-candidates-count` (30) such nodes are simulated per loop and one is
drained at a time (`--max-drain-parallelism` 1). After the taint and `deleteDelayAfterTaint` the pods
are evicted (`PodEvicted`; a zero grace period: they are gone at once) and the node deleted in the same
record; their controllers replace them (workload_controllers.py), and the scheduler places the
replacements. A node stays unneeded from the last time a pod was bound to it, left it or was reserved
on it (`busy_t`); upstream's timer restarts whenever a loop finds it needed, which for a non-empty node
also happens when the pods stop fitting elsewhere for a while: dralab does not keep that memory (a
reactor decides from the log), so it may drain such a node sooner.

Before deleting, cluster-autoscaler looks at the node again; with `recheckBeforeDelete: false` dralab
deletes on the judgment it made when tainting, which is the race of autoscaler#3886: a pod bound in
between (one the scheduler had already reserved the node for, invisible without a nominated node name)
is killed with the node.

With PodDisruptionBudgets (the scenario has some: `pdbs`), a candidate whose pods a budget does not let go is
not removable (NotEnoughPdb), budgets are shared by the candidates of one loop, and the drain of a node already
chosen evicts what the budgets allow, retrying the rest every loop until --max-pod-eviction-time (2 min) after
it began, then gives up and removes the taint (pdb.py has the upstream sources). In release profiles
(`release`), expendable pods (priority below -10) are invisible to scale-down: not counted in utilization, not
moved, no blockers (drain.py).

The flags (core/scenario/scale_down_flags.py) are this class's fields, their defaults in core/kube/defaults.py.
Where the run's own profile is a release (`planner`), marking is upstream's planner with its reasons
(candidates.py), the actuator's events are written (report.py), the delays after delete and failure apply and
the nodes this loop's FilterOutSchedulable filled are needed; the legacy loop below is kept for the legacy
profile's logs.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass, field, replace
from typing import Any

from ...cluster.nodes import delete_node, set_taints
from ...dra.allocated import AllocatedState
from ...kube.defaults import (
    IGNORE_DAEMONSETS_UTILIZATION,
    IGNORE_MIRROR_PODS_UTILIZATION,
    MAX_DRAIN_PARALLELISM,
    MAX_POD_EVICTION_TIME_MS,
    MAX_SCALE_DOWN_PARALLELISM,
    NODE_DELETE_DELAY_AFTER_TAINT_MS,
    SCALE_DOWN_DELAY_AFTER_ADD_MS,
    SCALE_DOWN_DELAY_AFTER_DELETE_MS,
    SCALE_DOWN_DELAY_AFTER_FAILURE_MS,
    SCALE_DOWN_GPU_UTILIZATION_THRESHOLD,
    SCALE_DOWN_NON_EMPTY_CANDIDATES_COUNT,
    SCALE_DOWN_UNNEEDED_TIME_MS,
    SCALE_DOWN_UNREADY_ENABLED,
    SCALE_DOWN_UNREADY_TIME_MS,
    SCALE_DOWN_UTILIZATION_THRESHOLD,
    SKIP_NODES_WITH_CUSTOM_CONTROLLER_PODS,
    SKIP_NODES_WITH_LOCAL_STORAGE,
    SKIP_NODES_WITH_SYSTEM_PODS,
)
from ...kube.versions import Profile
from ...log.events import AnyEvent, PodEvicted
from ...scheduler.plugins.dra_binding import waiting_devices
from ...scheduler.preemption import view_budgets
from ...state.cluster import FAILED, ClusterState, NodeState, PodState
from ...state.objects import controller_ref
from ..simulation.nominated import expendable
from . import report
from .candidates import TAINT_KEY, Snapshot, mark
from .drain import STAYS, DrainRules, RemovalSimulator, drainability, pods_to_move
from .pdb import NOT_ENOUGH_PDB, RemainingPdbs
from .utilization_cache import UtilizationCache


@dataclass(frozen=True)
class ScaleDown:
    enabled: bool = True
    utilization_threshold: float = SCALE_DOWN_UTILIZATION_THRESHOLD
    unneeded_time_ms: int = SCALE_DOWN_UNNEEDED_TIME_MS
    delay_after_add_ms: int = SCALE_DOWN_DELAY_AFTER_ADD_MS
    delete_delay_after_taint_ms: int = NODE_DELETE_DELAY_AFTER_TAINT_MS
    recheck_before_delete: bool = True
    # the flags of core/scenario/scale_down_flags.py (defaults: core/kube/defaults.py); the legacy profile reads only
    # those a scenario sets
    unready_enabled: bool = SCALE_DOWN_UNREADY_ENABLED
    unready_time_ms: int = SCALE_DOWN_UNREADY_TIME_MS
    delay_after_delete_ms: int = SCALE_DOWN_DELAY_AFTER_DELETE_MS
    delay_after_failure_ms: int = SCALE_DOWN_DELAY_AFTER_FAILURE_MS
    gpu_utilization_threshold: float | None = None  # None: utilization_threshold (the legacy profile's one threshold)
    ignore_daemonsets_utilization: bool = IGNORE_DAEMONSETS_UTILIZATION
    ignore_mirror_pods_utilization: bool = IGNORE_MIRROR_PODS_UTILIZATION
    max_scale_down_parallelism: int = MAX_SCALE_DOWN_PARALLELISM
    max_drain_parallelism: int = MAX_DRAIN_PARALLELISM
    non_empty_candidates_count: int = SCALE_DOWN_NON_EMPTY_CANDIDATES_COUNT  # <= 0: no limit
    max_pod_eviction_time_ms: int = MAX_POD_EVICTION_TIME_MS
    skip_nodes_with_system_pods: bool = SKIP_NODES_WITH_SYSTEM_PODS
    skip_nodes_with_local_storage: bool = SKIP_NODES_WITH_LOCAL_STORAGE
    skip_nodes_with_custom_controller_pods: bool = SKIP_NODES_WITH_CUSTOM_CONTROLLER_PODS
    # upstream bugs (core/kube/bugs.py), set by the reactor from the release: the fix of autoscaler#8707 (only a
    # utilization above the threshold keeps a node; release profiles) and autoscaler#5117 (no new deletion while a
    # drain is under way)
    strict_threshold: bool = False
    drain_blocks_scale_down: bool = False
    # spec.nodeGroups[].autoscalingOptions: group -> the fields above it overrides (release profiles: candidates.py)
    group_options: dict[str, dict[str, Any]] = field(default_factory=dict)
    # A cache, never an answer: node -> the pod that blocked its drain (drainability depends on the pod
    # alone, so while that pod is on the node the node stays blocked).
    _blocker: dict[str, str] = field(default_factory=dict, compare=False, repr=False)
    # A cache too: each node's utilization until the fold's journals name it (utilization_cache.py)
    _utils: UtilizationCache = field(default_factory=UtilizationCache, compare=False, repr=False)

    def for_groups(self) -> dict[str, ScaleDown]:
        """This ScaleDown as each group with autoscalingOptions sees it (NodeGroupAutoscalingOptions over the
        flags' defaults, config/autoscaling_options.go), sharing the blocker cache."""
        return {group: replace(self, **options) for group, options in self.group_options.items()}

    @property
    def rules(self) -> DrainRules:
        return DrainRules(self.skip_nodes_with_system_pods, self.skip_nodes_with_local_storage,
                          self.skip_nodes_with_custom_controller_pods)

    def threshold(self, node: NodeState) -> float:
        """--scale-down-gpu-utilization-threshold for a node with a GPU (an extended `*/gpu` resource: the
        provider's GPU config), else --scale-down-utilization-threshold (DRA nodes too: eligibility.go)."""
        if self.gpu_utilization_threshold is not None and self._utils.has_gpu(node):
            return self.gpu_utilization_threshold
        return self.utilization_threshold

    def decide(self, view: ClusterState, now: int, ready: Callable[[NodeState], bool],
               occupied: set[str], snapshot: Snapshot | None = None, pdbs: list[dict[str, Any]] | None = None,
               release: bool = False, placed: Collection[str] = (), scaled_up: bool = False,
               planner: bool = False) -> list[AnyEvent]:
        """This loop's scale-down events. `occupied`: nodes with pods nominated to them. `snapshot`:
        makes the autoscaler's simulation and its ready nodes, for draining nodes with pods (none: only
        empty nodes are scaled down). `pdbs`: the scenario's PodDisruptionBudgets; `release`: the autoscaler
        has a release (expendable pods ignored). `planner`: the run's own profile is a release (its run config
        has a `kubernetes` entry; a legacy run whose scheduler sets gates has `release` but not this): upstream's
        planner (candidates.py), events and unremovable reasons (report.py), cooldowns, and: `placed`, the nodes
        this loop's FilterOutSchedulable put pending pods on (one snapshot for scale-up and scale-down: they are
        needed); `scaled_up`, whether this loop asked for nodes."""
        if not self.enabled:
            return []
        budgets: list[RemainingPdbs] = []  # made once, when a drain or a candidate with pods needs it

        def tracker() -> RemainingPdbs | None:
            if not pdbs:
                return None
            if not budgets:
                budgets.append(RemainingPdbs(view_budgets(view, pdbs)))
            return budgets[0]
        events: list[AnyEvent] = []
        leaving: set[str] = set()  # nodes deleted or tainted for deletion: no destination for moved pods
        removal: list[RemovalSimulator] = []  # made once, when a drain needs it

        def removal_sim() -> RemovalSimulator:
            if not removal:
                assert snapshot is not None
                removal.append(RemovalSimulator(view, *snapshot(), removed=leaving))
            return removal[0]

        draining = 0
        for node in view.nodes.values():  # (events are only returned: the view does not change meanwhile)
            spec = node.manifest.get("spec")
            if not spec or not spec.get("taints"):
                continue  # most nodes: no taints at all (read without the property: this runs every loop)
            taint = None
            for t in spec["taints"]:  # node.taints, without the property and a generator (GPU nodes' taint)
                if t.get("key") == TAINT_KEY:
                    taint = t
                    break
            if taint is None:
                continue
            leaving.add(node.name)
            tainted_at = int(str(taint.get("value") or "0") or 0)
            # pods there when it was tainted: a drain; pods bound since: a race with the scheduler
            drain = snapshot is not None and any(view.pods[k].bound_t <= tainted_at for k in node.pods)
            if now < tainted_at + self.delete_delay_after_taint_ms:
                draining += drain
                continue
            moving = pods_to_move(view, node, skip_expendable=release, rules=self.rules) if drain else []
            started = drain and bool(pdbs) and _evicted_since(view, node.name, tainted_at)  # with budgets only
            if self.recheck_before_delete and not started and not self._still_removable(node, drain, moving,
                                                                                        occupied, removal_sim):
                if planner:  # actuator.go deleteNodesAsync aborts the deletion (upstream's error text)
                    events += report.failed(node.name, f'failed to delete empty node "{node.name}", new pods '
                                            "scheduled" if not drain else "failed to drain the node: its pods can "
                                            "no longer move")
                events += set_taints(view, node.name, [t for t in node.taints if t.get("key") != TAINT_KEY])
                continue  # still counted as leaving in this loop, as the view shows it tainted
            evict = [p.key for p in moving] if isinstance(moving, list) else []
            if evict and (pdbs_left := tracker()) is not None:
                allowed = [k for k in evict if pdbs_left.evict(view.pods[k])]
                if len(allowed) < len(evict):  # the Eviction API refused some: retried next loop, or given up
                    if now >= tainted_at + self.delete_delay_after_taint_ms + self.max_pod_eviction_time_ms:
                        if planner:
                            events += report.failed(node.name, "failed to drain the node, aborting ScaleDown")
                        events += set_taints(view, node.name, [t for t in node.taints if t.get("key") != TAINT_KEY])
                    else:
                        if planner:
                            events += report.evicted(allowed)
                        events += [PodEvicted(pod=k, node=node.name, reason="scale-down: unneeded") for k in allowed]
                        draining += 1
                    continue
            if planner:
                events += report.evicted(evict) + report.removed(node.name)
            events += delete_node(view, node.name, reason="scale-down: unneeded", evict=evict)
        last_add = max((t for t, _, _ in view.scale_ups), default=None)
        if last_add is not None and now < last_add + self.delay_after_add_ms:
            return events
        if self.drain_blocks_scale_down and draining:  # autoscaler#5117: legacy.go returned ScaleDownInProgress
            return events
        if planner:
            if self._cooldown(view, now, scaled_up):
                return events
            return events + mark(self, view, now, ready, occupied | set(placed), leaving, draining, snapshot,
                                 tracker, removal_sim)
        sizes = {g: sum(1 for n in members if n in view.nodes and n not in leaving)
                 for g, members in view.nodes_by_group.items()}
        tainted = simulated = 0
        since = now - self.unneeded_time_ms  # now < t + unneeded_time, for integers: t > since
        for node in view.nodes.values():
            # the cheap checks first, the one that excludes most nodes (in use lately) at the head: every
            # one of them only excludes, so their order changes nothing
            if node.busy_t > since or node.ready_t > since or tainted >= self.max_scale_down_parallelism:
                continue
            group = view.node_groups.get(node.group)
            if group is None or sizes.get(node.group, 0) <= group.min:
                continue
            if node.name in leaving or not ready(node) or node.name in occupied:
                continue
            if node.pods:  # the drain's cheap exclusions before the utilization
                if (snapshot is None or draining >= self.max_drain_parallelism
                        or 0 < self.non_empty_candidates_count <= simulated):
                    continue
                if self._blocker.get(node.name) in node.pods:
                    continue  # the pod that blocked its drain is still there: still blocked
                moving = pods_to_move(view, node, tracker(), release, self.rules)
                if isinstance(moving, tuple):
                    if moving[0] != NOT_ENOUGH_PDB:  # a budget may allow it later: not cached
                        self._blocker[node.name] = moving[1]
                    continue
                if self._utilization(view, node, release) >= self.threshold(node):
                    continue
                if moving:  # else only DaemonSet and mirror pods: empty, as upstream counts it
                    simulated += 1
                    if not removal_sim().try_remove(node, moving):
                        continue
                    draining += 1
                    if (pdbs_left := tracker()) is not None:
                        pdbs_left.remove(moving)  # the planner's RemovePods
            elif self._utilization(view, node, release) >= self.threshold(node):
                continue
            taints: list[dict[str, Any]] = [*node.taints,
                                            {"key": TAINT_KEY, "value": str(now), "effect": "NoSchedule"}]
            events += set_taints(view, node.name, taints)
            leaving.add(node.name)
            sizes[node.group] -= 1
            tainted += 1
        return events

    def _utilization(self, view: ClusterState, node: NodeState, release: bool) -> float:
        daemonsets, mirror = self.ignore_daemonsets_utilization, self.ignore_mirror_pods_utilization
        return self._utils.utilization(view, node, (release, daemonsets, mirror),
                                       lambda: utilization(view, node, release, daemonsets, mirror))

    def _cooldown(self, view: ClusterState, now: int, scaled_up: bool) -> bool:
        """Release profiles: scale-down is in cooldown after this loop's own scale-up (RunOnce sets lastScaleUpTime
        before scale-down runs), after the last deletion and after the last failure (static_autoscaler.go
        isScaleDownInCooldown: --scale-down-delay-after-add/-delete/-failure)."""
        status = view.scale_down
        return ((scaled_up and self.delay_after_add_ms > 0)
                or (status.last_delete_t >= 0 and now < status.last_delete_t + self.delay_after_delete_ms)
                or (status.last_failure_t >= 0 and now < status.last_failure_t + self.delay_after_failure_ms))

    @staticmethod
    def _still_removable(node: NodeState, drain: bool, moving: list[PodState] | tuple[str, str], occupied: set[str],
                         removal_sim: Callable[[], RemovalSimulator]) -> bool:
        """cluster-autoscaler's look before deleting: an empty node is still empty; a drained node's
        pods may still all move, and fit elsewhere."""
        if node.name in occupied:
            return False
        if not drain:
            return not node.pods
        if isinstance(moving, tuple):
            return False
        return not moving or removal_sim().try_remove(node, moving)


def scale_down_options(flags: dict[str, Any], release: bool) -> dict[str, Any]:
    """ScaleDown's keywords from the scenario's scale-down flags. Release profiles separate the GPU threshold from
    the plain one (upstream's two flags, both 0.5 by default); the legacy profile keeps its one threshold unless
    the scenario sets the GPU flag."""
    if release and "gpu_utilization_threshold" not in flags:
        return {**flags, "gpu_utilization_threshold": SCALE_DOWN_GPU_UTILIZATION_THRESHOLD}
    return dict(flags)


def scale_down_bugs(profile: Profile, release: bool) -> dict[str, Any]:
    """ScaleDown's keywords for the upstream bugs of the release (core/kube/bugs.py). autoscaler#8707's fix applies to
    release profiles only: the legacy profile's logs were made with `>=`."""
    return {"strict_threshold": release and not profile.bug("autoscaler#8707"),
            "drain_blocks_scale_down": profile.bug("autoscaler#5117")}


def _evicted_since(view: ClusterState, node: str, t: int) -> bool:
    """Whether a pod of the node ended (was evicted) at or after `t`: its drain has begun. Newest first."""
    for key in reversed(view.pods_by_phase[FAILED]):
        pod = view.pods[key]
        if pod.finished_t < t:
            return False
        if pod.node == node:
            return True
    return False


def utilization(view: ClusterState, node: NodeState, release: bool = False, daemonsets: bool = False,
                mirror: bool = False) -> float:
    """GPU utilization for a node with GPUs (extended `*/gpu` or DRA devices of its own slices), else
    max(cpu, memory). `release`: expendable pods left out (not in cluster-autoscaler's snapshot). `daemonsets`,
    `mirror` (--ignore-daemonsets-utilization, --ignore-mirror-pods-utilization): those pods' requests are taken
    out of both the requests and the allocatable, as utilization/info.go calculateUtilizationOfResource does
    (requests / (allocatable - theirs)); a node they fill entirely counts as 0. DRA devices: upstream's
    CalculateDynamicResourceUtils counts every pod's claims."""
    ignored = [p for k in node.pods if expendable(p := view.pods[k])] if release else []
    gone = {p.key for p in ignored}
    skipped = [p for k in node.pods if k not in gone and drainability(p := view.pods[k])[0] == STAYS
               and (daemonsets if controller_ref(p.manifest) is not None else mirror)] if daemonsets or mirror else []

    def ratio(resource: str, allocatable: int) -> float:
        theirs = sum(p.requests.get(resource, 0) for p in skipped)
        used = node.used.get(resource, 0) - theirs - sum(p.requests.get(resource, 0) for p in ignored)
        return used / (allocatable - theirs) if allocatable > theirs else 0.0
    gpus = {r: a for r, a in node.allocatable.items() if r.endswith("/gpu") and a}
    if gpus:
        return max(ratio(r, a) for r, a in gpus.items())
    devices = [d.id for _, slc in view.dra.slice_index().by_node.get(node.name, ()) for d in slc.devices]
    if devices:
        waiting = waiting_devices(view) if view.dra.binding else set()  # no pod on the node uses them (#8795)
        if gone:  # devices of claims only expendable pods use are free
            held = AllocatedState()
            for c in view.dra.claims.values():
                if c.allocation is not None and c.reserved_for and set(c.reserved_for) <= gone:
                    held.add_allocation(c.allocation)
            waiting = waiting | held.devices
        return sum(1 for d in devices if d in view.dra.allocated.devices and d not in waiting) / len(devices)
    return max((ratio(r, node.allocatable[r]) for r in ("cpu", "memory") if node.allocatable.get(r)), default=0.0)
