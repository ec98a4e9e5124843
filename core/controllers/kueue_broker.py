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
from ..log.events import AdmissionCheckUpdated, AnyEvent, PodTemplateCreated, PodUngated, ProvisioningRequestCreated
from ..state.cluster import PENDING, ClusterState, PodState
from ..state.provreq import RequestState

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

    def __init__(self, checks: list[dict[str, Any]]) -> None:
        self.checks = [CheckConfig(**c) for c in checks]

    def react(self, view: ClusterState, now: int, rng: random.Random) -> Decision:
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
