"""Pods kube-scheduler failed with an error rather than found unschedulable: cluster-autoscaler does not see them.

cluster-autoscaler lists as unschedulable only pods whose PodScheduled condition is False with reason
`Unschedulable` (ArrangePodsBySchedulability, cluster-autoscaler utils/kubernetes/listers.go). A DRA selector
that fails to evaluate on a device (a CEL runtime error such as "no such key") makes the DynamicResources Filter
return an Error status, which aborts the scheduling attempt: upstream's condition reason is then
`SchedulerError`, and no scale-up is ever considered for the pod (core/dra/explain_errors.py).

Under a release profile dralab's scheduler writes a single pod's selector error as upstream does (reason
`SchedulerError`, cause `selector-error`: core/scheduler/filter_errors.py), which the autoscaler's
`Unschedulable` filter already skips; this hook remains for the pods whose attempts do not run that check yet
(PodGroup members, pods with DRA-served extended resources), written `Unschedulable` with the cause
`selector-error`: here that cause is read as upstream's reason. Only runs with a release profile (legacy logs
stay as they were).
"""

from __future__ import annotations

from typing import Any

from ...state.cluster import PodState

SCHEDULER_ERROR_CAUSES = frozenset({"selector-error"})


def scheduler_error(pod: PodState, kubernetes: Any) -> bool:
    """Whether upstream would have written this pending pod's condition as SchedulerError (so the autoscaler
    ignores it), for a run with a release profile (`kubernetes` not None)."""
    return kubernetes is not None and pod.condition is not None and pod.condition.cause in SCHEDULER_ERROR_CAUSES
