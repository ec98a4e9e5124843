"""PodDisruptionBudgets in cluster-autoscaler's scale-down: the remaining-budget tracker of one loop and the
Eviction API's answer to a drain.

Upstream (kubernetes/autoscaler, cluster-autoscaler 1.3x):
- core/scaledown/pdb/basic.go (basicRemainingPdbTracker): each loop takes the budgets as the API shows them
  (`status.disruptionsAllowed`); the planner (core/scaledown/planner/planner.go categorizeNodes), for every node
  found removable, subtracts the pods it would move (RemovePods), so the next candidates see what is left.
- simulator/drainability/rules/pdb/rule.go: a pod matched by a budget with fewer than 1 disruption left blocks
  its node's drain: the node is unremovable, reason NotEnoughPdb. It is the last of the default rules
  (rules/rules.go Default), so mirror, DaemonSet and safe-to-evict pods never reach it.
- A node whose pods are allowed one by one but not all at once (CanRemovePods' inParallel) is still removable,
  marked "risky"; dralab does not model risky nodes beyond this: its drain simply runs into the eviction retries.
- core/scaledown/actuation/drain.go (evictPod): the actuator evicts each pod through the Eviction API, which
  refuses (429) an eviction a budget does not allow; a refused eviction is retried every EvictionRetryTime (10 s)
  until --max-pod-eviction-time (2 min); then the drain fails and the node's ToBeDeletedByClusterAutoscaler taint
  is removed (CleanUpAndRecordFailedScaleDownEvent). Meanwhile the pods evicted earlier are replaced, their
  replacements become healthy and the budget allows the next eviction.

The Eviction API's side (pkg/registry/core/pod/storage/eviction.go): a pod matched by more than one budget is
refused (dralab: refused like a spent budget); one matched by none is evicted. dralab's simplifications are those
of kube/pdb.py (budgets computed from the view when a scenario's PDB has no status).

Version differences: cluster-autoscaler before the tracker (simulator/drain.go checkPdbs, replaced in 2023 when the
planner and drainability rules came) blocked the same pods with the same NotEnoughPdb reason but did not take budgets
across the candidates of one loop; every release dralab emulates (1.34-1.37) has the tracker. Newer actuators can
force-delete a pod whose eviction kept failing (drainNodeForce, for nodes a forcescaledown rule marks): not
modelled, dralab's drains are never forced.
"""

from __future__ import annotations

from collections.abc import Sequence

from ...kube import defaults
from ...scheduler.plugins.default_preemption import Budget
from ...state.cluster import PodState

NOT_ENOUGH_PDB = "NotEnoughPdb"  # utils/drain BlockingPodReason
EVICTION_RETRY_MS = 10_000  # actuation EvictionRetryTime (the autoscaler's scan interval by default)
MAX_POD_EVICTION_TIME_MS = defaults.MAX_POD_EVICTION_TIME_MS  # --max-pod-eviction-time (the default; a flag)


class RemainingPdbs:
    """One loop's budgets, with what the drains planned or started in that loop already taken from them."""

    def __init__(self, budgets: Sequence[Budget]) -> None:
        self.budgets = list(budgets)
        self.left = [b.allowed for b in self.budgets]

    def _matching(self, pod: PodState) -> list[int]:
        meta = pod.manifest.get("metadata") or {}
        namespace, labels = meta.get("namespace") or "default", meta.get("labels") or {}
        return [i for i, b in enumerate(self.budgets) if b.namespace == namespace and b.matches(labels)]

    def blocks(self, pod: PodState) -> bool:
        """The drainability rule: a matching budget with less than one disruption left."""
        return any(self.left[i] < 1 for i in self._matching(pod))

    def remove(self, pods: Sequence[PodState]) -> None:
        """RemovePods: the budgets the pods of a node found removable will take."""
        for pod in pods:
            for i in self._matching(pod):
                self.left[i] -= 1

    def evict(self, pod: PodState) -> bool:
        """The Eviction API: whether it lets the pod go now (and if so, the budget is taken)."""
        matching = self._matching(pod)
        if len(matching) > 1 or any(self.left[i] < 1 for i in matching):
            return False
        for i in matching:
            self.left[i] -= 1
        return True
