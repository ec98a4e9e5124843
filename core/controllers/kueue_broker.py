"""The provisioning broker: Kueue's ProvisioningRequest admission check controller, as a reactor.

Kueue holds its pods back with a scheduling gate, asks cluster-autoscaler for their capacity with a
ProvisioningRequest, and admits them (removes the gate) once the request is Provisioned
(kubernetes-sigs/kueue pkg/controller/admissionchecks/provisioning, v0.14). What this reactor does, for
every Kueue workload whose pods all exist and are still gated (core/kube/kueue.py says which pods are Kueue's
and how they group into workloads), and for every AdmissionCheck of the scenario:

- no state yet: it makes attempt 1: PodTemplates `ppt-<request>-<podset>` and the ProvisioningRequest
  `<workload>-<check>-<attempt>` with the check's class and parameters, one pod set per distinct pod shape
  (only the pod sets asking for a `managedResources` resource, when the config lists some; none at all:
  the check is Ready at once); the check is Pending.
- Pending, and the request Failed, or its booking expired (the workload is not admitted yet), or its
  capacity was revoked: Retry at the failure's time plus the backoff (`backoffBaseSeconds` doubling per
  failure, at most `backoffMaxSeconds`: getRemainingTimeToRetry), or Rejected once `backoffLimitCount`
  retries are spent. Kueue tests these before Provisioned, as here.
- Pending, and the request Provisioned=True: Ready.
- Retry, and its time has come: the next attempt (new PodTemplates and a new request; the old request is
  left to the autoscaler's garbage collection).
- every check Ready: the workload is admitted: each pod's gate is removed and, for pods of a pod set in
  the request, the annotations that make it consume the request are added (the check's podSetUpdates),
  in one `PodUngated` per pod. A request whose booking expires after that is ignored (kueue#2445).
A Rejected workload's pods stay gated (Kueue deactivates the workload; its pods never start).

Every state the broker writes is an `AdmissionCheckUpdated` event, so the log shows each attempt, each
retry time and each rejection; the broker decides from the log alone (no memory of its own), which is
what lets its actor be killed and restarted at any point.

The above is the model every log without a release profile was made by. With one (or with Kueue's Configuration
in the scenario) the broker is Kueue's release `spec.kubernetes.kueue` (default 0.19; core/controllers/
kueue_workloads.py says what differs per release): a check's Retry evicts the Workload (a `KueueWorkloadUpdated`
Evicted, reason AdmissionCheck) until its requeue time, counted per check from 0.15 and in the Workload's requeue
count in 0.14, measured from when Kueue saw the failure; an evicted Workload's requests are deleted (unless
kueue#11677); CapacityRevoked rejects the check at once, also after admission (the Workload is deactivated and its
pods deleted); a Rejected check deactivates the Workload; a Ready check whose booking expires before admission
retries; and waitForPodsReady watches every admitted Workload: PodsReady, the timeout from admission, the recovery
timeout from PodsReady=False, eviction with its backoff, requeue, deactivation after `backoffLimitCount`, and
blockAdmission (no new Workload gets quota while an admitted one is not PodsReady yet).
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from typing import Any

from ..engine.contract import Decision, Trigger
from ..kube.kueue import (
    ADMISSION_GATE,
    CLASS_ANNOTATION,
    CONSUME_ANNOTATION,
    WORKLOAD_ANNOTATION,
    gates,
    is_queued,
    request_name,
    retry_delay_ms,
    template_name,
    workload_of,
)
from ..kube.provreq import PROVREQ_API_VERSION, PROVREQ_KIND
from ..kube.versions import profile_from_config
from ..log.events import (
    AdmissionCheckUpdated,
    AnyEvent,
    KueueWorkloadUpdated,
    PodTemplateCreated,
    PodUngated,
    ProvisioningRequestCreated,
)
from ..log.events_kueue import ADMITTED, DEACTIVATED, EVICTED, REQUEUED
from ..state.cluster import PENDING, ClusterState, PodState
from ..state.provreq import KueueWorkload, RequestState
from .kueue_workloads import KueueRelease, cleanup, current_workloads, finished, watch

PENDING_STATE, READY, RETRY, REJECTED = "Pending", "Ready", "Retry", "Rejected"


@dataclass(frozen=True)
class CheckConfig:
    """One AdmissionCheck and its ProvisioningRequestConfig (core/kueue.broker_config)."""

    name: str
    provisioning_class: str
    parameters: dict[str, str]
    managed_resources: list[str]
    backoff_limit_count: int
    backoff_base_s: int
    backoff_max_s: int


@dataclass(frozen=True)
class PodSet:
    name: str
    pods: list[PodState]
    template: dict[str, Any]  # the pod's metadata and spec, without Kueue's gate


class KueueBroker:
    name: str = "broker"
    trigger: Trigger = "events"

    def __init__(self, checks: list[dict[str, Any]], configuration: dict[str, Any] | None = None,
                 kubernetes: dict[str, Any] | None = None) -> None:
        self.checks = [CheckConfig(**c) for c in checks]
        # Kueue as a release (kueue_workloads.py) with a release profile or a Configuration; else the v0.14-era
        # model every earlier log was made by (which must read the same)
        self.release = (KueueRelease.of(profile_from_config(kubernetes), configuration)
                        if kubernetes is not None or configuration is not None else None)

    def react(self, view: ClusterState, now: int, rng: random.Random) -> Decision:
        if self.release is not None:
            return self._react_release(view, now, rng, self.release)
        events: list[AnyEvent] = []
        wake: int | None = None
        for key, pods in sorted(queued_workloads(view).items()):
            if len(pods) < workload_of(pods[0].manifest)[1]:
                continue  # Kueue makes a pod group's Workload once all its pods exist
            ready: dict[str, int] = {}  # check -> the attempt whose request admitted the workload (0: none)
            for check in self.checks:
                state, at, more = self._check(view, key, check, pods, now)
                events += more
                if state == READY:
                    ready[check.name] = at
                elif state == RETRY and at > now:
                    wake = at if wake is None else min(wake, at)
            if len(ready) == len(self.checks):
                events += self._admit(key, pods, ready)
        return Decision(tuple(events), wake)

    def _check(self, view: ClusterState, key: str, check: CheckConfig, pods: list[PodState],
               now: int) -> tuple[str, int, list[AnyEvent]]:
        """One check of one workload: its state after this decision, the attempt (Ready) or retry time
        (Retry) that goes with it, and the events that take it there."""
        state = view.provisioning.admission.get((key, check.name))
        if state is None:
            return self._attempt(view, key, check, pods, 1)
        if state.state == RETRY:
            if now >= state.retry_at:
                return self._attempt(view, key, check, pods, state.attempt + 1)
            return RETRY, state.retry_at, []
        if self.release is not None and state.state in (PENDING_STATE, READY):
            return self._check_release(view, key, check, pods, now, state.state, state.attempt)
        if state.state != PENDING_STATE:
            return state.state, state.attempt, []
        namespace = key.split("/", 1)[0]
        request = view.provisioning.requests.get(f"{namespace}/{request_name(key, check.name, state.attempt)}")
        if request is None:
            return PENDING_STATE, state.attempt, []
        failure = _failure(request)
        if failure is not None:
            failed_at, why = failure
            if state.attempt <= check.backoff_limit_count:
                retry_at = failed_at + retry_delay_ms(state.attempt, check.backoff_base_s, check.backoff_max_s)
                return RETRY, retry_at, [AdmissionCheckUpdated(
                    workload=key, check=check.name, state=RETRY, attempt=state.attempt, retry_at=retry_at,
                    message=f"{why}; retrying after backoff (retry {state.attempt} of {check.backoff_limit_count})")]
            return REJECTED, state.attempt, [AdmissionCheckUpdated(
                workload=key, check=check.name, state=REJECTED, attempt=state.attempt,
                message=f"{why}; the retry limit ({check.backoff_limit_count}) is reached")]
        if request.is_true("Provisioned"):
            reason = request.conditions["Provisioned"].reason
            return READY, state.attempt, [AdmissionCheckUpdated(
                workload=key, check=check.name, state=READY, attempt=state.attempt,
                message=f"ProvisioningRequest {request.key} is Provisioned ({reason})")]
        return PENDING_STATE, state.attempt, []

    def _attempt(self, view: ClusterState, key: str, check: CheckConfig, pods: list[PodState],
                 attempt: int) -> tuple[str, int, list[AnyEvent]]:
        sets = [s for s in pod_sets(pods) if _managed(s, check.managed_resources)]
        if not sets:
            return READY, 0, [AdmissionCheckUpdated(
                workload=key, check=check.name, state=READY, attempt=0,
                message="no pod set requests a managed resource: no ProvisioningRequest needed")]
        namespace = key.split("/", 1)[0]
        name = request_name(key, check.name, attempt)
        events: list[AnyEvent] = []
        for pod_set in sets:
            tmpl = template_name(name, pod_set.name)
            if f"{namespace}/{tmpl}" not in view.provisioning.templates:
                events.append(PodTemplateCreated(manifest={
                    "apiVersion": "v1", "kind": "PodTemplate", "metadata": {"name": tmpl, "namespace": namespace},
                    "template": pod_set.template}))
        spec: dict[str, Any] = {
            "provisioningClassName": check.provisioning_class,
            "podSets": [{"podTemplateRef": {"name": template_name(name, s.name)}, "count": len(s.pods)} for s in sets],
        }
        if check.parameters:
            spec["parameters"] = dict(check.parameters)
        events.append(ProvisioningRequestCreated(manifest={
            "apiVersion": PROVREQ_API_VERSION, "kind": PROVREQ_KIND,
            "metadata": {"name": name, "namespace": namespace, "annotations": {WORKLOAD_ANNOTATION: key}},
            "spec": spec}))
        events.append(AdmissionCheckUpdated(workload=key, check=check.name, state=PENDING_STATE, attempt=attempt,
                                            message=f"ProvisioningRequest {namespace}/{name} created"))
        return PENDING_STATE, attempt, events

    def _admit(self, key: str, pods: list[PodState], ready: dict[str, int]) -> list[AnyEvent]:
        """Remove the gate of every pod of the workload; pods of a pod set in a check's request consume it
        (with several checks, the last check by name wins: a pod consumes one request)."""
        annotations: dict[str, dict[str, str]] = {p.key: {} for p in pods}
        for check in self.checks:
            attempt = ready[check.name]
            if attempt == 0:
                continue
            name = request_name(key, check.name, attempt)
            for pod_set in pod_sets(pods):
                if _managed(pod_set, check.managed_resources):
                    for pod in pod_set.pods:
                        annotations[pod.key] = {CONSUME_ANNOTATION: name, CLASS_ANNOTATION: check.provisioning_class}
        return [PodUngated(pod=p.key, gates=(ADMISSION_GATE,), annotations=annotations[p.key]) for p in pods]

    # ------------------------------------------------------------ Kueue as a release (kueue_workloads.py)

    def _react_release(self, view: ClusterState, now: int, rng: random.Random, rel: KueueRelease) -> Decision:
        events: list[AnyEvent] = []
        wakes: list[int] = []
        status = view.provisioning.workloads
        current = current_workloads(view)
        blocked = bool(rel.pods_ready and rel.pods_ready["block_admission"]) and any(
            wl.admitted_t >= 0 and not wl.ready_once and key in current
            and not finished(current[key], workload_of(current[key][0].manifest)[1]) for key, wl in status.items())
        for key, pods in sorted(current.items()):
            total = workload_of(pods[0].manifest)[1]
            wl = status.get(key)
            if wl is not None and wl.state == DEACTIVATED:
                continue
            if wl is not None and wl.admitted_t >= 0:
                events += watch(view, key, pods, total, wl, now, rng, rel, [c.name for c in self.checks], wakes)
                continue
            gated = [p for p in pods if p.phase == PENDING and ADMISSION_GATE in gates(p.manifest)]
            if len(gated) < total:
                continue  # Kueue makes a pod group's Workload once all its pods exist
            if wl is not None and wl.state == EVICTED:
                if now < wl.requeue_at:
                    wakes.append(wl.requeue_at)
                    continue
                if blocked:
                    continue
                events.append(KueueWorkloadUpdated(workload=key, state=REQUEUED, count=wl.count,
                                                   message=f"requeued after {wl.reason}"))
            elif blocked and not any((key, c.name) in view.provisioning.admission for c in self.checks):
                continue  # blockAdmission: no quota for another Workload while an admitted one is not PodsReady
            events += self._cycle(view, key, gated, wl, now, rel, wakes)
        return Decision(tuple(events), min(wakes) if wakes else None)

    def _cycle(self, view: ClusterState, key: str, pods: list[PodState], wl: KueueWorkload | None, now: int,
               rel: KueueRelease, wakes: list[int]) -> list[AnyEvent]:
        """One pass of the admission checks of a Workload holding quota: admit it, evict it (a check Retry) or
        deactivate it (a check Rejected)."""
        events: list[AnyEvent] = []
        ready: dict[str, int] = {}
        retry_at: int | None = None
        rejected = ""
        for check in self.checks:
            state, at, more = self._check(view, key, check, pods, now)
            events += more
            written = [e for e in more if isinstance(e, AdmissionCheckUpdated)]
            if state == READY:
                ready[check.name] = at
            elif state == RETRY and at > now:
                if written and written[-1].state == RETRY:
                    retry_at = at if retry_at is None else max(retry_at, at)
                wakes.append(at)
            elif state == REJECTED and written:
                rejected = written[-1].message
        if rejected:
            return [*events, KueueWorkloadUpdated(workload=key, state=DEACTIVATED, reason="AdmissionCheck",
                                                  count=wl.count if wl else 0, message=f"Rejected: {rejected}"),
                    *cleanup(view, key, rel)]
        if retry_at is not None:
            count = (wl.count if wl else 0) + (1 if rel.shared_requeue_count else 0)
            resets: list[AnyEvent] = [  # resetChecksOnEviction: the Ready ones go back to Pending
                AdmissionCheckUpdated(workload=key, check=name, state=PENDING_STATE, attempt=attempt,
                                      message="Reset to Pending after eviction. Previously: Ready")
                for name, attempt in ready.items()]
            return [*events, KueueWorkloadUpdated(
                workload=key, state=EVICTED, reason="AdmissionCheck", count=count, requeue_at=retry_at,
                message="Evicted due to an AdmissionCheck in Retry state"), *resets, *cleanup(view, key, rel)]
        if len(ready) == len(self.checks):
            events += self._admit(key, pods, ready)
            events.append(KueueWorkloadUpdated(workload=key, state=ADMITTED, count=wl.count if wl else 0,
                                               message="every admission check Ready"))
        return events

    def _check_release(self, view: ClusterState, key: str, check: CheckConfig, pods: list[PodState], now: int,
                       current: str, attempt: int) -> tuple[str, int, list[AnyEvent]]:
        """A Pending or Ready check of a Workload not admitted, as syncCheckStates does: Failed, CapacityRevoked,
        BookingExpired (not admitted), Provisioned, in that order; a request deleted by the cleanup on eviction
        is made again (attempt retryCount + 1: the same number after a waitForPodsReady eviction)."""
        if attempt == 0:  # no request needed: Ready as it is, or again at once after a reset
            return (READY, 0, []) if current == READY else self._attempt(view, key, check, pods, 1)
        namespace = key.split("/", 1)[0]
        name = f"{namespace}/{request_name(key, check.name, attempt)}"
        request = view.provisioning.requests.get(name)
        if request is None:
            if name in view.provisioning.deleted and current == PENDING_STATE:
                return self._attempt(view, key, check, pods, attempt)
            return current, attempt, []
        if request.is_true("CapacityRevoked") and not request.is_true("Failed"):
            cond = request.conditions["CapacityRevoked"]
            return REJECTED, attempt, [AdmissionCheckUpdated(
                workload=key, check=check.name, state=REJECTED, attempt=attempt,
                message=f"ProvisioningRequest {request.key} CapacityRevoked ({cond.reason})")]
        for kind in ("Failed", "BookingExpired"):
            if request.is_true(kind):
                return self._failed(view, key, check, pods, now, attempt, kind, request)
        if current == PENDING_STATE and request.is_true("Provisioned"):
            reason = request.conditions["Provisioned"].reason
            return READY, attempt, [AdmissionCheckUpdated(
                workload=key, check=check.name, state=READY, attempt=attempt,
                message=f"ProvisioningRequest {request.key} is Provisioned ({reason})")]
        return current, attempt, []

    def _failed(self, view: ClusterState, key: str, check: CheckConfig, pods: list[PodState], now: int,
                attempt: int, kind: str, request: RequestState) -> tuple[str, int, list[AnyEvent]]:
        """Retry (with the release's backoff, from now: when Kueue saw it) or Rejected past backoffLimitCount."""
        why = f"ProvisioningRequest {request.key} {kind} ({request.conditions[kind].reason})"
        if attempt > check.backoff_limit_count:
            return REJECTED, attempt, [AdmissionCheckUpdated(
                workload=key, check=check.name, state=REJECTED, attempt=attempt,
                message=f"{why}; the retry limit ({check.backoff_limit_count}) is reached")]
        rel = self.release
        assert rel is not None
        if rel.shared_requeue_count:  # 0.14: the Workload's requeueState.count is the exponent and the guard
            wl = view.provisioning.workloads.get(key)
            count = wl.count if wl is not None else 0
            if attempt <= count:  # "We don't want to Retry on old ProvisioningRequests": the next attempt at once
                return self._attempt(view, key, check, pods, attempt + 1)
            delay = retry_delay_ms(count + 1, check.backoff_base_s, check.backoff_max_s)
        else:
            delay = retry_delay_ms(attempt, check.backoff_base_s, check.backoff_max_s)
        return RETRY, now + delay, [AdmissionCheckUpdated(
            workload=key, check=check.name, state=RETRY, attempt=attempt, retry_at=now + delay,
            message=f"{why}; retrying after backoff (retry {attempt} of {check.backoff_limit_count})")]


def queued_workloads(view: ClusterState) -> dict[str, list[PodState]]:
    """Kueue's pending pods that still carry its admission gate, by workload, in creation order."""
    out: dict[str, list[PodState]] = {}
    for key in view.pods_by_phase[PENDING]:
        pod = view.pods[key]
        if is_queued(pod.manifest) and ADMISSION_GATE in gates(pod.manifest):
            out.setdefault(workload_of(pod.manifest)[0], []).append(pod)
    return out


def pod_sets(pods: list[PodState]) -> list[PodSet]:
    """The workload's pods by shape (Kueue groups a plain pod group's pods by their role hash): `main`, or
    `main-<i>` when the pods differ. The template is the first pod's, without the admission gate."""
    by_shape: dict[str, list[PodState]] = {}
    for pod in sorted(pods, key=lambda p: p.created_offset):
        by_shape.setdefault(json.dumps(_template(pod), sort_keys=True), []).append(pod)
    groups = list(by_shape.values())
    return [PodSet("main" if len(groups) == 1 else f"main-{i}", group, _template(group[0]))
            for i, group in enumerate(groups)]


def _template(pod: PodState) -> dict[str, Any]:
    spec = {k: v for k, v in (pod.manifest.get("spec") or {}).items() if k not in ("schedulingGates", "nodeName")}
    left = [g for g in (pod.manifest.get("spec") or {}).get("schedulingGates") or [] if g.get("name") != ADMISSION_GATE]
    if left:
        spec["schedulingGates"] = left
    labels = (pod.manifest.get("metadata") or {}).get("labels")
    return {"metadata": {"labels": dict(labels)}, "spec": spec} if labels else {"spec": spec}


def _managed(pod_set: PodSet, managed: list[str]) -> bool:
    if not managed:
        return True
    requested = pod_set.pods[0].requests
    return any(requested.get(name) for name in managed)


def _failure(request: RequestState) -> tuple[int, str] | None:
    """When and why the request failed for Kueue (Failed, BookingExpired before admission, CapacityRevoked)."""
    for kind in ("Failed", "BookingExpired", "CapacityRevoked"):
        if request.is_true(kind):
            cond = request.conditions[kind]
            return cond.t, f"ProvisioningRequest {request.key} {kind} ({cond.reason})"
    return None
