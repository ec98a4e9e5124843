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
}


def present(bug: Bug, k8s_version: str, kueue_version: str) -> bool:
    """Whether `bug` is present in the cluster emulated: its component's version there is one that has it."""
    return (kueue_version if bug.component == "kueue" else k8s_version) in bug.present
