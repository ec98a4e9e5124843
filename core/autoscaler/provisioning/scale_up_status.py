"""The Events cluster-autoscaler writes about one loop's scale-up, as its EventingScaleUpStatusProcessor does
(sigs.k8s.io/cluster-autoscaler pkg/processors/status/eventing_scale_up_processor.go, core/scaleup/orchestrator;
release profiles only, so legacy logs read as before):

- `TriggeredScaleUp` on each pod the chosen option takes: "pod triggered scale-up: [{group 1->3 (max: 10)}]"
  (nodegroupset.ScaleUpInfo's String: group, target size before and after, max size; one per group balanced to).
- `NotTriggerScaleUp`, only in a loop that asked no scale-up, on each pod left that no node group's template can
  take: "pod didn't trigger scale-up: " and, per reason, the number of node groups that gave it (ReasonsMessage):
  a group skipped before the simulation says why (`max node group size reached`, `in backoff after failed
  scale-up`), any other the scheduler filter that rejects the pod on its template node (`Insufficient
  nvidia.com/gpu`, `node(s) didn't match Pod's node affinity/selector`, `cannot allocate all claims`, ...). Upstream
  lists the reasons in Go map order (random); here they are sorted. With --max-nodes-total reached the message is
  "pod didn't trigger scale-up: max total nodes in cluster reached".
- Pods that fit some group's template but were not taken this loop get neither (upstream: "awaiting evaluation").

The recorder lets one event per reason and pod through every 5 minutes (--record-duplicated-events=false:
utils/kubernetes/factory.go's spam filter, burst 1, one more per 300 s): :func:`allowed` reads the last one from the
fold (ClusterIndexes.autoscaler_events), so a replay decides the same.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from ...kube.defaults import EVENT_SPAM_INTERVAL_MS
from ...log.events import AnyEvent
from ...log.events_autoscaler import STATUS_CONFIGMAP, AutoscalerEvent
from ...scheduler.filters import first_failure
from ...scheduler.plugins.dynamic_resources import DRA_FAILURE
from ...state.cluster import ClusterState, NodeGroupState, PodState
from ..simulation.capacity import TEMPLATE_FILTERS, Simulation

MAX_LIMIT_REACHED = "max node group size reached"  # orchestrator/skippedreasons.go MaxLimitReachedReason
BACKOFF = "in backoff after failed scale-up"  # BackoffReason
MAX_NODES_TOTAL = "max total nodes in cluster reached"  # ReasonsMessage for ScaleUpLimitedByMaxNodesTotal


@dataclass(frozen=True)
class ScaleUpInfo:
    """One group's part of a scale-up (nodegroupset.ScaleUpInfo)."""

    group: str
    current: int
    new: int
    max: int

    def __str__(self) -> str:
        return f"{{{self.group} {self.current}->{self.new} (max: {self.max})}}"


@dataclass
class LoopOutcome:
    """What one loop's scale-up did, for its events: the pods that needed a new node, the groups skipped (and
    why), the scale-up asked (its infos and the pods it takes), or the cluster-wide limit that stopped it."""

    remaining: list[PodState] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)
    infos: list[ScaleUpInfo] = field(default_factory=list)
    triggered: tuple[str, ...] = ()
    max_nodes_total: bool = False


def allowed(view: ClusterState, now: int, reason: str, involved: str) -> bool:
    """The event recorder's spam filter: one event per reason and object every 5 minutes."""
    last = view.autoscaler_events.get(f"{reason} {involved}")
    return last is None or now - last[0] >= EVENT_SPAM_INTERVAL_MS


def configmap_event(view: ClusterState, now: int, reason: str, message: str) -> list[AnyEvent]:
    """A Warning on the status ConfigMap (ClusterUnhealthy, MaxNodesTotalReached), through the same filter."""
    if not allowed(view, now, reason, STATUS_CONFIGMAP):
        return []
    return [AutoscalerEvent(reason=reason, message=message, warning=True)]


def skipped_groups(view: ClusterState, blocked: Iterable[str]) -> dict[str, str]:
    """filterValidScaleUpNodeGroups' skipped groups: in backoff, or at their max size."""
    out = {name: BACKOFF for name in blocked}
    for name, group in view.node_groups.items():
        if name not in out and group.target_size >= group.max:
            out[name] = MAX_LIMIT_REACHED
    return out


def rejection(sim: Simulation, pod: PodState, group: NodeGroupState,
              template_of: Callable[[NodeGroupState], NodeGroupState] | None = None) -> str | None:
    """Why the pod cannot go on a new node of the group (the first filter that rejects it on the template
    node, or the DRA allocator's failure), or None when it fits."""
    node = sim.template(group if template_of is None else template_of(group), f"template-{group.name}-status")
    if sim.fits(pod, node) is not None:
        return None
    reason = first_failure(TEMPLATE_FILTERS, pod, node.node, {})
    if reason is not None:
        return reason
    if sim.placement.rejects(pod, node.node):
        return "node(s) didn't match pod topology spread constraints"
    return DRA_FAILURE


def events(view: ClusterState, now: int, sim: Simulation | None, outcome: LoopOutcome,
           template_of: Callable[[NodeGroupState], NodeGroupState] | None = None) -> list[AnyEvent]:
    """The loop's pod Events (see the module docstring), each past the recorder's filter."""
    out: list[AnyEvent] = []
    if outcome.infos:
        message = "pod triggered scale-up: [" + " ".join(str(i) for i in outcome.infos) + "]"
        for key in outcome.triggered:
            if allowed(view, now, "TriggeredScaleUp", key):
                out.append(AutoscalerEvent(reason="TriggeredScaleUp", message=message, pod=key))
        return out  # a loop that scaled up writes no NotTriggerScaleUp
    for pod in outcome.remaining:
        if not allowed(view, now, "NotTriggerScaleUp", pod.key):
            continue
        if outcome.max_nodes_total:
            message = MAX_NODES_TOTAL
        else:
            if sim is None:
                continue
            reasons: Counter[str] = Counter()
            fits_somewhere = False
            for name in sorted(view.node_groups):
                skip = outcome.skipped.get(name)
                if skip is not None:
                    reasons[skip] += 1
                    continue
                reason = rejection(sim, pod, view.node_groups[name], template_of)
                if reason is None:
                    fits_somewhere = True  # awaiting evaluation upstream: no event
                    break
                reasons[reason] += 1
            if fits_somewhere:
                continue
            message = ", ".join(f"{n} {r}" for r, n in sorted(reasons.items()))
        out.append(AutoscalerEvent(reason="NotTriggerScaleUp", message=f"pod didn't trigger scale-up: {message}",
                                   pod=pod.key))
    return out
