"""Events of Kueue's Workloads (the part of Kueue's workload controller dralab models, core/controllers/
kueue_broker.py): admission, PodsReady, eviction, requeue and deactivation, and the deletion of a pod at once
(the tagged union and the codec are in :mod:`.events`).

Why an event of its own beside AdmissionCheckUpdated: eviction and requeue are the Workload's, not one check's
(waitForPodsReady evicts a Workload whose checks are all Ready), and the log must show each one with its reason,
the requeue count and the time of the requeue, as Kueue's Workload conditions (`Evicted`, `Requeued`,
`PodsReady`) and `status.requeueState` do.
"""

from __future__ import annotations

from .event_base import Event

# Workload states the broker writes (Kueue's Workload conditions, pkg/workload)
ADMITTED = "Admitted"  # every admission check Ready: the pods' gate removed
PODS_READY = "PodsReady"  # PodsReady=True: every pod of the Workload Running
PODS_NOT_READY = "PodsNotReady"  # PodsReady=False after it was True (WaitForRecovery): recoveryTimeout runs
EVICTED = "Evicted"  # admission withdrawn (reason PodsReadyTimeout or AdmissionCheck); requeued at `requeue_at`
REQUEUED = "Requeued"  # back in the queue: a new admission cycle starts
DEACTIVATED = "Deactivated"  # spec.active=false (a check Rejected, or the requeuing limit reached): never again
WORKLOAD_STATES = (ADMITTED, PODS_READY, PODS_NOT_READY, EVICTED, REQUEUED, DEACTIVATED)


class KueueWorkloadUpdated(Event, tag="KueueWorkloadUpdated", frozen=True):
    """One transition of a Kueue Workload ("namespace/name", core/kube/kueue.workload_of)."""

    workload: str
    state: str  # one of WORKLOAD_STATES
    reason: str = ""  # Evicted / Deactivated: PodsReadyTimeout | AdmissionCheck | RequeuingLimitExceeded
    count: int = 0  # status.requeueState.count after this transition (Evicted, Deactivated)
    requeue_at: int = -1  # Evicted: cluster ms at which the Workload is requeued (status.requeueState.requeueAt)
    message: str = ""

    def touched(self) -> tuple[str, ...]:
        return (f"kueue-workload/{self.workload}",)


class PodDeleted(Event, tag="PodDeleted", frozen=True):
    """A pod deleted by a controller at once (Kueue stopping an evicted or deactivated Workload of plain pods: its
    pod integration's Stop deletes every pod of the group, pkg/controller/jobs/pod/pod_controller.go). Unlike
    PodEvicted it may be pending (admitted but never scheduled, what waitForPodsReady evicts): it leaves the
    pending set. Either way it ends Failed, kept for the metrics."""

    pod: str
    reason: str = ""

    def touched(self) -> tuple[str, ...]:
        return (self.pod,)
