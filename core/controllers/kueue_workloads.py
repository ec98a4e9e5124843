"""Kueue's Workload lifecycle per release, for the broker (core/controllers/kueue_broker.py): what differs between
Kueue 0.14 and 0.19, waitForPodsReady, and how an evicted Workload of plain pods is stopped and comes back.

Per release (kubernetes-sigs/kueue, tags v0.14.0..v0.19.2):

- **Retry counting.** 0.14 counts an admission check's retries in the Workload's `status.requeueState.count`, the
  counter waitForPodsReady uses too (provisioning/controller.go: `workload.UpdateRequeueState`), and retries only
  when the failed request's attempt is above it; the backoff's exponent is that shared count. From 0.15 (KEP-3258,
  kueue PR #7620) each check keeps its own `retryCount` and `requeueAfterSeconds`
  (`workload.UpdateAdmissionCheckRequeueState`), the exponent is the check's retry count + 1, and the next
  attempt is named `retryCount + 1`.
- **Cleanup on eviction.** From 0.17.7 / 0.18.3 / 0.19.0 (gate CleanupProvisioningRequestsOnEviction, beta, on)
  an evicted Workload's ProvisioningRequests are deleted; before, they stay and answer for the requeued Workload
  (bug kueue#11677, core/kube/bugs.py).
- **waitForPodsReady** defaults by API version and release (core/kube/kueue_config.py; on by default from 0.19).
- **PodsReady of a pod group**: every pod Ready; a Succeeded pod is not (bug kueue#15734, in every release here).

Eviction (pkg/workload/evict, pkg/controller/core/workload_controller.go): the Workload's admission is withdrawn,
its checks reset to Pending, and it is requeued at `requeueAt`; with waitForPodsReady, after the timeout
(`PodsReadyTimeout`, measured from the Admitted condition) or the recovery timeout (measured from PodsReady=False),
`requeueState.count` + 1 and `requeueAt` = now + backoff (base·2^(count-1), at most max; wait.Backoff with
jitter 0.0001, which dralab leaves out); once count + 1 would exceed `backoffLimitCount` the Workload is
deactivated instead (`RequeuingLimitExceeded`). Kueue's pod integration stops plain pods by deleting them (Stop,
pkg/controller/jobs/pod); a pod group needs its pods again: dralab re-creates them at once, gated, as their owner
would (`<group>-xxxxx`, annotated with the pod each replaces). A single plain pod is deleted and not re-created
(nothing owns it), so its Workload ends there.

Here: the release's switches (:class:`KueueRelease`), PodsReady, Stop, and what happens to an admitted Workload
(:func:`watch`: CapacityRevoked, the two timeouts, :func:`evict_not_ready`, :func:`cleanup`); the admission cycle
itself is the broker's.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

from ..cluster.workload_controllers import replacement_manifest
from ..kube.kueue import (
    CLASS_ANNOTATION,
    CONSUME_ANNOTATION,
    GROUP_LABEL,
    WORKLOAD_ANNOTATION,
    gate_pod,
    is_queued,
    request_name,
    workload_of,
)
from ..kube.kueue_config import pods_ready_settings
from ..kube.versions import Profile
from ..log.events import (
    AdmissionCheckUpdated,
    AnyEvent,
    KueueWorkloadUpdated,
    PodCreated,
    PodDeleted,
    ProvisioningRequestDeleted,
)
from ..log.events_kueue import DEACTIVATED, EVICTED, PODS_NOT_READY, PODS_READY
from ..state.cluster import PENDING, RUNNING, SUCCEEDED, ClusterState, PodState
from ..state.provreq import KueueWorkload

PENDING_STATE, REJECTED = "Pending", "Rejected"  # AdmissionCheckState (kueue_broker.py has them all)


@dataclass(frozen=True)
class KueueRelease:
    """What the broker does differently per Kueue release (and per upstream-bug switch)."""

    version: str
    shared_requeue_count: bool  # 0.14: admission check retries count in status.requeueState
    cleanup_on_eviction: bool  # not kueue#11677
    succeeded_is_ready: bool  # not kueue#15734
    pods_ready: dict[str, Any] | None  # effective waitForPodsReady (core/kube/kueue_config.py), None: off

    @staticmethod
    def of(profile: Profile, configuration: dict[str, Any] | None) -> KueueRelease:
        minor = int(profile.kueue.split(".")[1])
        return KueueRelease(profile.kueue, minor < 15, not profile.bug("kueue#11677"),
                            not profile.bug("kueue#15734"), pods_ready_settings(configuration, profile.kueue))


def requeue_delay_ms(count: int, base_s: int, max_s: int) -> int:
    """wait.Backoff's n-th step (kueue pkg/util/wait.NewBackoff(base, max, 2, 0.0001).WaitTime(n)): base after the
    first, doubling, capped at max; the jitter (at most 0.01 % of a step) is left out."""
    delay = base_s * 1000
    for _ in range(1, count):
        delay *= 2
        if delay >= max_s * 1000:
            return max_s * 1000
    return min(delay, max_s * 1000)


def current_workloads(view: ClusterState) -> dict[str, list[PodState]]:
    """Every Kueue Workload's current pods, in creation order: those no replacement stands for (an evicted
    generation is replaced), whatever their phase."""
    out: dict[str, list[PodState]] = {}
    for pod in view.pods.values():  # the fold adds pods as they are created: creation order
        if not pod.replaced_by and is_queued(pod.manifest):
            out.setdefault(workload_of(pod.manifest)[0], []).append(pod)
    return out


def pods_ready(pods: list[PodState], total: int, succeeded_is_ready: bool) -> bool:
    """The pod integration's PodsReady: the group complete and every pod Ready (Running in dralab, which models no
    readiness probes); Succeeded counts only without kueue#15734."""
    ok = (RUNNING, SUCCEEDED) if succeeded_is_ready else (RUNNING,)
    return len(pods) >= total and all(p.phase in ok for p in pods)


def finished(pods: list[PodState], total: int) -> bool:
    """Every pod of the Workload Succeeded: the Workload is Finished and nothing times out."""
    return len(pods) >= total and all(p.phase == SUCCEEDED for p in pods)


def stop(view: ClusterState, pods: list[PodState], reason: str, rng: random.Random, *,
         replace: bool) -> list[AnyEvent]:
    """Kueue's Stop of a plain-pod Workload: every pod still pending or running deleted; with `replace` (an eviction
    that requeues a pod group) the group's pods re-created, gated, without the podSetUpdates Kueue had applied."""
    events: list[AnyEvent] = [PodDeleted(pod=p.key, reason=reason) for p in pods if p.phase in (PENDING, RUNNING)]
    if not replace:
        return events
    taken: set[str] = set()
    for pod in pods:  # every pod of the generation, also one that ended on its own: the group starts again whole
        group = ((pod.manifest.get("metadata") or {}).get("labels") or {}).get(GROUP_LABEL)
        if not group:
            continue  # a single plain pod: nothing re-creates it
        manifest = _fresh(replacement_manifest(pod, str(group), rng))
        while PodCreated(pod=manifest).key in view.pods or PodCreated(pod=manifest).key in taken:
            manifest = _fresh(replacement_manifest(pod, str(group), rng))
        taken.add(PodCreated(pod=manifest).key)
        events.append(PodCreated(pod=manifest, run_for_ms=pod.run_for_ms))
    return events


def _fresh(manifest: dict[str, Any]) -> dict[str, Any]:
    """A replacement as Kueue's webhook admits it: gated again, without the annotations of the last admission."""
    meta = dict(manifest.get("metadata") or {})
    annotations = {k: v for k, v in (meta.get("annotations") or {}).items()
                   if k not in (CONSUME_ANNOTATION, CLASS_ANNOTATION)}
    meta["annotations"] = annotations
    return gate_pod({**manifest, "metadata": meta})


def watch(view: ClusterState, key: str, pods: list[PodState], total: int, wl: KueueWorkload, now: int,
          rng: random.Random, rel: KueueRelease, checks: list[str], wakes: list[int]) -> list[AnyEvent]:
    """An admitted Workload: CapacityRevoked deactivates it; waitForPodsReady times it out."""
    namespace = key.split("/", 1)[0]
    for check in checks:
        state = view.provisioning.admission.get((key, check))
        request = view.provisioning.requests.get(
            f"{namespace}/{request_name(key, check, state.attempt)}") if state and state.attempt else None
        if request is not None and request.is_true("CapacityRevoked") and not finished(pods, total):
            message = f"ProvisioningRequest {request.key} CapacityRevoked"
            attempt = state.attempt if state is not None else 0
            return [AdmissionCheckUpdated(workload=key, check=check, state=REJECTED, attempt=attempt,
                                          message=message),
                    KueueWorkloadUpdated(workload=key, state=DEACTIVATED, reason="AdmissionCheck",
                                         count=wl.count, message=message),
                    *cleanup(view, key, rel), *stop(view, pods, "kueue: Workload deactivated", rng, replace=False)]
    settings = rel.pods_ready
    if settings is None or finished(pods, total):
        return []
    ready = pods_ready(pods, total, rel.succeeded_is_ready)
    if ready:
        return [] if wl.ready_once and wl.not_ready_t < 0 else [
            KueueWorkloadUpdated(workload=key, state=PODS_READY, count=wl.count, message="all pods are ready")]
    if not wl.ready_once:
        deadline, cause = wl.admitted_t + settings["timeout_ms"], "WaitForStart"
    elif wl.not_ready_t < 0:
        if settings["recovery_timeout_ms"] > 0:
            wakes.append(now + settings["recovery_timeout_ms"])
        return [KueueWorkloadUpdated(workload=key, state=PODS_NOT_READY, reason="WaitForRecovery", count=wl.count,
                                     message="Not all pods are ready or succeeded")]
    elif settings["recovery_timeout_ms"] <= 0:
        return []
    else:
        deadline, cause = wl.not_ready_t + settings["recovery_timeout_ms"], "WaitForRecovery"
    if now < deadline:
        wakes.append(deadline)
        return []
    return evict_not_ready(view, key, pods, wl, now, rng, rel, checks, cause)


def evict_not_ready(view: ClusterState, key: str, pods: list[PodState], wl: KueueWorkload, now: int,
                    rng: random.Random, rel: KueueRelease, checks: list[str], cause: str) -> list[AnyEvent]:
    """reconcileNotReadyTimeout: deactivate past backoffLimitCount, else evict with the requeuing backoff."""
    settings = rel.pods_ready
    assert settings is not None
    limit = settings["backoff_limit_count"]
    if limit is not None and wl.count + 1 > limit:
        return [KueueWorkloadUpdated(workload=key, state=DEACTIVATED, reason="RequeuingLimitExceeded",
                                     count=wl.count, message="exceeding the maximum number of re-queuing retries"),
                *cleanup(view, key, rel),
                *stop(view, pods, "kueue: Workload deactivated (RequeuingLimitExceeded)", rng, replace=False)]
    count = wl.count + 1
    requeue_at = now + requeue_delay_ms(count, settings["backoff_base_s"], settings["backoff_max_s"])
    resets: list[AnyEvent] = []
    for check in checks:
        state = view.provisioning.admission.get((key, check))
        if state is not None and state.state != PENDING_STATE:
            resets.append(AdmissionCheckUpdated(
                workload=key, check=check, state=PENDING_STATE, attempt=state.attempt,
                message=f"Reset to Pending after eviction. Previously: {state.state}"))
    return [KueueWorkloadUpdated(workload=key, state=EVICTED, reason="PodsReadyTimeout", count=count,
                                 requeue_at=requeue_at, message=f"Exceeded the PodsReady timeout ({cause})"),
            *resets, *cleanup(view, key, rel),
            *stop(view, pods, "kueue: Workload evicted (PodsReadyTimeout)", rng, replace=True)]


def cleanup(view: ClusterState, key: str, rel: KueueRelease) -> list[AnyEvent]:
    """CleanupProvisioningRequestsOnEviction (absent with kueue#11677): the Workload's requests deleted."""
    if not rel.cleanup_on_eviction:
        return []
    return [ProvisioningRequestDeleted(request=k, reason=f"kueue: Workload {key} evicted")
            for k, r in view.provisioning.requests.items()
            if (r.manifest.get("metadata") or {}).get("annotations", {}).get(WORKLOAD_ANNOTATION) == key]
