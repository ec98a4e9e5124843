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
