"""A scale-up that timed out, for nodes the cloud has not even created: kubernetes/autoscaler#9120.

When a scale-up request's nodes have not come `--max-node-provision-time` after it, cluster-autoscaler's
clusterstate registry gives up on it (`updateScaleRequests`: event ScaleUpTimedOut, RegisterFailedScaleUp,
backoff). Instances the cloud lists but that never registered are deleted as long-unregistered
(`removeOldUnregisteredNodes`): that is backoff.py's `NodeDeleted` for a VM still provisioning. A node the
cloud accepted into the target size but has not created (a stockout it retries in silence, as a Cluster API
MachinePool or an Auto Scaling group does: core/controllers/cloud_ops.py, `InstancePending`) is not an
instance: nothing lists it, nothing deletes it.

- Before 1.36 (autoscaler#9120, "Autoscaler does not scale down after failed scale-up and workload
  disappears"): the target size is left raised, so the cloud keeps retrying and the node arrives late, after
  the autoscaler gave up on it; it joins as an ordinary node, idle and billed until scale-down removes it.
- From 1.36 (PR #9132, "undo Scale operation when a scaleUpRequest times out", in cluster-autoscaler-1.36.0):
  `DecreaseTargetSize(-increase)` reverts the request, and the cloud stops making it.
"""

from __future__ import annotations

from ...kube.versions import Profile
from ...log.events import AnyEvent, NodeDeleted

BUG = "autoscaler#9120"
REVERTED = "scale-up timed out: target size decreased"


def revert_timed_out(view_pending: dict[str, int], timed_out: list[AnyEvent], profile: Profile,
                     now: int) -> list[AnyEvent]:
    """The timeout's events with the deletions of not-yet-created instances (`view_pending`: node -> until
    when it is only a target, -1 forever) dropped (the bug: nothing is reverted) or told as the revert."""
    if not view_pending:
        return timed_out
    bug = profile.bug(BUG)
    out: list[AnyEvent] = []
    for event in timed_out:
        if not isinstance(event, NodeDeleted):
            out.append(event)
            continue
        until = view_pending.get(event.name)
        if until is None or 0 <= until <= now:
            out.append(event)
        elif not bug:
            out.append(NodeDeleted(name=event.name, reason=REVERTED))
    return out
