"""Upstream coordination bugs dralab reproduces, each a behaviour switch named after its upstream issue.

"Was this my bug, and does upgrading fix it?" needs both behaviours: the buggy one in the releases that
have the bug and the fixed one after. So every modelled bug has an entry here: the component it lives in,
the versions of that component in which it is present, and the first fixed version. A :class:`Profile`
(core/kube/versions.py) answers ``profile.bug("autoscaler#3886")``: on when the profile's release of the
component has the bug, unless the scenario or the command set the switch (``spec.kubernetes.bugs``,
``--bugs``). The code that models a bug asks that question where the behaviour forks and cites the
issue there; docs/upstream-bugs.md lists every entry with the scenario under scenarios/upstream/ that
shows both outcomes.

Component versions: kube-scheduler, kube-controller-manager, kubelet and cluster-autoscaler follow the
Kubernetes minor (cluster-autoscaler 1.37 is released with, and tested against, Kubernetes 1.37), so their
bugs are present in entries of :data:`core.kube.versions.VERSIONS`; Kueue has its own releases
(:data:`KUEUE_VERSIONS`, ``spec.kubernetes.kueue``). The legacy profile (logs written before profiles
existed) has no bug on by default: those logs were made by the fixed behaviours and must read the same.

This module imports nothing of dralab's so that versions.py can check a switch's name against it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Component = Literal["kube-scheduler", "cluster-autoscaler", "kube-controller-manager", "kubelet", "kueue"]
COMPONENTS: tuple[str, ...] = ("kube-scheduler", "cluster-autoscaler", "kube-controller-manager", "kubelet", "kueue")
KUEUE_VERSIONS = ("0.14", "0.15", "0.16", "0.17", "0.18", "0.19")
DEFAULT_KUEUE_VERSION = "0.19"  # Kueue's current release (2026-12)
_K8S = ("1.34", "1.35", "1.36", "1.37")  # core.kube.versions.VERSIONS (not imported: versions.py imports this module)


@dataclass(frozen=True)
class Bug:
    """One upstream bug: where it lives, the versions of that component that have it (empty: fixed before
    every version dralab emulates, so it is on only when a scenario asks), and the first fixed version
    ("" while upstream has not fixed it)."""

    component: Component
    title: str
    url: str
    present: tuple[str, ...]
    fixed_in: str = ""

    def __post_init__(self) -> None:
        known = KUEUE_VERSIONS if self.component == "kueue" else _K8S
        unknown = [v for v in self.present if v not in known]
        if unknown:
            raise ValueError(f"{self.title}: versions {unknown} are not {self.component} versions dralab emulates")


def until(fixed: str, versions: tuple[str, ...] = _K8S) -> tuple[str, ...]:
    """The versions before `fixed` (a bug fixed in `fixed`); every version when `fixed` is empty (still open)."""
    if not fixed:
        return versions
    return tuple(v for v in versions if tuple(map(int, v.split("."))) < tuple(map(int, fixed.split("."))))


# name -> bug. The name is the upstream tracker's short reference: `autoscaler#N` (kubernetes/autoscaler),
# `kubernetes#N` (kubernetes/kubernetes), `kueue#N` (kubernetes-sigs/kueue).
BUGS: dict[str, Bug] = {
    "autoscaler#3886": Bug(
        "cluster-autoscaler", "scale-down deletes a node a pod was bound to after the empty-node judgment",
        "https://github.com/kubernetes/autoscaler/issues/3886", (), "1.26"),
    # Kueue keeps an evicted Workload's ProvisioningRequests (fixed by kueue PR #12522 behind the gate
    # CleanupProvisioningRequestsOnEviction, beta and on: 0.19.0, cherry-picked into 0.17.7 and 0.18.3; dralab
    # emulates a minor as its latest patch). On requeue the old request answers for the new admission: a booking
    # that expired makes the check Retry (a retry spent, a backoff waited), one still Provisioned is reused.
    "kueue#11677": Bug(
        "kueue", "an evicted Workload's ProvisioningRequests are not cleaned up; the requeued Workload reuses them",
        "https://github.com/kubernetes-sigs/kueue/issues/11677", ("0.14", "0.15", "0.16"), "0.17.7"),
    # The plain-pod integration's PodsReady requires every pod of a group Ready; a Succeeded pod is not Ready, so
    # once one member of a group completes the Workload goes PodsReady=False and waitForPodsReady's recoveryTimeout
    # evicts the rest (kueue PR #15734, merged to main 2026-09; 0.18/0.19 patches carry it behind an alpha gate,
    # off by default: every release dralab emulates has the bug).
    "kueue#15734": Bug(
        "kueue", "a pod group whose member Succeeded is PodsReady=False and is evicted after recoveryTimeout",
        "https://github.com/kubernetes-sigs/kueue/pull/15734", ("0.14", "0.15", "0.16", "0.17", "0.18", "0.19")),
    # still open (the fix, kubernetes-sigs/cluster-autoscaler#22, is under review): every release has it. Forks in
    # core/run/config.py (the run's provisioningRequestClaims, unless the scenario sets it), virtual_claims.py.
    "autoscaler#10065": Bug(
        "cluster-autoscaler", "check-capacity ProvisioningRequests: virtual pods' ResourceClaimTemplates never "
        "resolve, so capacity is never found", "https://github.com/kubernetes/autoscaler/issues/10065", until("")),
    # fixed by kubernetes/autoscaler#9806 (merged 2026-06, before the 1.37 branch; reported on 1.35.3). Forks in
    # provisioning/provreq_broker.py `Broker.booked`.
    "autoscaler#9805": Bug(
        "cluster-autoscaler", "a Provisioned ProvisioningRequest keeps booking capacity for its pods already running "
        "(counted twice), so other requests get CapacityIsNotFound", "https://github.com/kubernetes/autoscaler/issues/9805",
        until("1.37"), "1.37"),
    # open: a pod waiting for preemption is force-added to its nominated node without its claims' devices. Forks in
    # simulation/nodes.py `sim_ready_nodes` (without the bug: the claims are allocated there when they fit).
    "autoscaler#7683": Bug(
        "cluster-autoscaler", "a nominated pod is force-added to the autoscaler's snapshot without its ResourceClaims: "
        "its devices look free", "https://github.com/kubernetes/autoscaler/issues/7683", until("")),
    # the target size is not reverted when a scale-up times out: a cloud that retries a stockout in silence
    # delivers the node late (core/autoscaler/provisioning/target_revert.py); fixed by PR #9132, merged
    # 2026-06-12, first in cluster-autoscaler-1.36.0
    "autoscaler#9120": Bug(
        "cluster-autoscaler", "scale-up timeout does not decrease the target size: the cloud keeps retrying",
        "https://github.com/kubernetes/autoscaler/issues/9120", until("1.36"), "1.36"),
    # an Auto Scaling group out of capacity keeps retrying and SetDesiredCapacity returns no error: before PR #4489
    # ("Early abort if AWS node group has no capacity", merged 2022-03-03, first in cluster-autoscaler-1.24.0: failed
    # scaling activities mark the placeholder instances OutOfResources) the autoscaler only noticed at
    # max-node-provision-time; fixed before every release dralab emulates (core/controllers/cloud.py)
    "autoscaler#3490": Bug(
        "cluster-autoscaler", "a node group the cloud cannot fill is given up on only at max-node-provision-time",
        "https://github.com/kubernetes/autoscaler/issues/3490", (), "1.24"),
    # kube-scheduler's DynamicResources PreFilter refused a claim whose allocation is pending (reserved by a gang
    # member waiting at Permit) even to the same gang: the gang never completes. Fixed in 1.36.0 by #137647
    # (reuse the pending allocation within the gang); not backported to 1.35.
    "kubernetes#137617": Bug(
        "kube-scheduler", "gang members sharing a ResourceClaim: later members blocked by the pending allocation",
        "https://github.com/kubernetes/kubernetes/issues/137617", ("1.35",), "1.36"),
    # DynamicResources' Score (computeScore, added in 1.35 for prioritized lists) indexed the Filter's
    # allocations by the claim's position among all the pod's claims: a pod with an allocated (shared) claim and
    # an unallocated one fails Score with an error whenever more than one node is feasible. Fixed by #139017 in
    # 1.37.0 (and 1.35.6, 1.36 patch #139363): on in the 1.35 and 1.36 profiles (dralab's profiles are minors).
    "kubernetes#139016": Bug(
        "kube-scheduler", "a pod with an allocated multi-node claim and an unallocated claim fails Score (stuck)",
        "https://github.com/kubernetes/kubernetes/issues/139016", ("1.35", "1.36"), "1.37"),
    # kube-controller-manager's device taint eviction (podEvictionTime) reads only spec.resourceClaims: a pod
    # that got its device as a DRA-backed extended resource (status.extendedResourceClaimStatus, KEP-5004) is
    # never evicted by a NoExecute taint. Open (fix PR #142289 not merged): on in every release.
    "kubernetes#141290": Bug(
        "kube-controller-manager", "NoExecute device taints do not evict pods using DRA-backed extended resources",
        "https://github.com/kubernetes/kubernetes/issues/141290", _K8S, ""),
    # The structured allocator (kube-scheduler's DynamicResources, vendored by cluster-autoscaler) rebuilt a pool's
    # shared counters from dedicated allocations only: a committed share of a multi-allocatable device
    # (DRAConsumableCapacity) that consumes counters (DRAPartitionableDevices) left them free, so an overlapping
    # partition is allocated too. Fixed by #139040 in 1.37.0, backported to 1.36 (#139211); 1.34 and 1.35 have the
    # same incubating/experimental code (both gates alpha there), no backport found.
    "kubernetes#139034": Bug(
        "kube-scheduler", "committed shares of a multi-allocatable device do not consume its shared counters",
        "https://github.com/kubernetes/kubernetes/issues/139034", ("1.34", "1.35", "1.36"), "1.37"),
    # scale-down: a node exactly at its utilization threshold counts as not underutilized (`>=`), so threshold 0 with
    # --ignore-daemonsets-utilization never removes a node that runs only DaemonSet pods. Fixed by PR #8975 (`>`),
    # merged for 1.36; cherry-picked into patch releases of 1.32-1.34 (#9033-#9035), none found for 1.35.
    "autoscaler#8707": Bug(
        "cluster-autoscaler", "a node exactly at the scale-down utilization threshold (0 for a DaemonSet-only node "
        "with threshold 0) is never underutilized", "https://github.com/kubernetes/autoscaler/issues/8707",
        until("1.36"), "1.36"),
    # scale-down: the legacy scale-down (the only one until --parallel-drain became the default, PR #5976, 1.28)
    # aborted every loop while a non-empty node was being drained, so empty nodes waited for the drain to end.
    "autoscaler#5117": Bug(
        "cluster-autoscaler", "empty node deletion is blocked by another node's drain in progress",
        "https://github.com/kubernetes/autoscaler/issues/5117", (), "1.28"),
    # the snapshot: until PR #9607 (merged 2026-05, after 1.36.0) only the FilterOutExpendable pod-list processor put
    # pods with status.nominatedNodeName into the snapshot, and it sees only pods marked Unschedulable: a pod the
    # scheduler nominated for its binding cycle (KEP-5278: waiting at Permit or in PreBind) was not there unless an
    # earlier attempt had failed, so its node looked empty. Off by default: the versions are inferred from the PR, and
    # dralab's 1.35/1.36 keep the behaviour their scenarios were written against (a nominated node is occupied).
    "autoscaler#9607": Bug(
        "cluster-autoscaler", "a pod nominated for its binding cycle is left out of the snapshot unless it was once "
        "Unschedulable: its node looks empty", "https://github.com/kubernetes/autoscaler/pull/9607", (), "1.37"),
    # PR #8109 (DRA custom resources processor) merged 2025-06-11; tag cluster-autoscaler-1.33.0 contains it
    "autoscaler#7780": Bug(
        "cluster-autoscaler", "a Ready node whose DRA driver has not published its ResourceSlices counts as ready: "
        "a second scale-up for the same pods", "https://github.com/kubernetes/autoscaler/issues/7780", (), "1.33"),
    # open (2026-12); reported on 1.34.2; dralab's "one node per zonal group per loop" (simulation/sim_pods.py).
    # Switched off, a balanced scale-up is estimated across the similar groups at once (provisioning/balance.py).
    "autoscaler#9150": Bug(
        "cluster-autoscaler", "topologySpreadConstraints limit a scale-up to one node per loop, even with "
        "balance-similar-node-groups", "https://github.com/kubernetes/autoscaler/issues/9150", until("")),
    # clusterapi only: its scale-from-zero template slice has resourceSliceCount 0 (an incomplete pool). The issue
    # says 1.35+ (reported on 1.36.1); PR #10200 merged 2026-08-26 or later: whether cluster-autoscaler 1.37.0
    # carries it is not confirmed (fixed_in 1.37 is an assumption)
    "autoscaler#10199": Bug(
        "cluster-autoscaler", "clusterapi: DRA pods never trigger scale-from-zero (template pool's "
        "resourceSliceCount 0)", "https://github.com/kubernetes/autoscaler/issues/10199", ("1.35", "1.36"), "1.37"),
}


def present(bug: Bug, k8s_version: str, kueue_version: str) -> bool:
    """Whether `bug` is present in the cluster emulated: its component's version there is one that has it."""
    return (kueue_version if bug.component == "kueue" else k8s_version) in bug.present
