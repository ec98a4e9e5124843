"""The Kubernetes Events cluster-autoscaler writes (issue 22), as log events (the tagged union and the codec are in
:mod:`.events`).

cluster-autoscaler records Events on pods (`TriggeredScaleUp`, `NotTriggerScaleUp`:
processors/status/eventing_scale_up_processor.go) and on its status ConfigMap `kube-system/cluster-autoscaler-status`
(`ClusterUnhealthy`, `MaxNodesTotalReached`: core/static_autoscaler.go, core/scaleup/orchestrator). Its event
recorder lets one event per reason and object through every 5 minutes (--record-duplicated-events=false,
utils/kubernetes/factory.go), which the autoscaler reactor applies from the fold's record of what it wrote
(ClusterIndexes.autoscaler_events). Only runs with a release profile write them: legacy logs read as before.
"""

from __future__ import annotations

from .event_base import Event

STATUS_CONFIGMAP = "configmap/kube-system/cluster-autoscaler-status"


class AutoscalerEvent(Event, tag="AutoscalerEvent", frozen=True):
    """One Event of cluster-autoscaler: `reason` and `message` as upstream writes them; `pod` the pod it is about,
    or empty for the status ConfigMap; `warning` for type Warning (else Normal). An Event is an object of its
    own upstream: it writes nothing of the cluster's (touched() is empty)."""

    reason: str
    message: str
    pod: str = ""
    warning: bool = False

    @property
    def involved(self) -> str:
        return self.pod or STATUS_CONFIGMAP
