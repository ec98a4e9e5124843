"""The ProvisioningRequest processing of the autoscaler (cluster-autoscaler pkg/processors/provreq and
pkg/provisioningrequest, as of 1.35), as a part of the autoscaler's loop.

- Loops alternate between ProvisioningRequest mode and regular pods (WrapperOrchestrator), unless one
  side has nothing to do. In ProvisioningRequest mode one request is handled per loop: the oldest that
  is neither provisioned nor failed and not in its retry backoff (1 min doubling to 10 min).
- `check-capacity`: the request's pods (made from its PodTemplates) are tried on the ready nodes of the
  snapshot; all fit: Provisioned=True (CapacityIsFound); else Provisioned=False (CapacityIsNotFound), or
  Failed=True with parameter `noRetry: "true"`.
- `best-effort-atomic-scale-up`: the pods that fit existing capacity are placed; if none is left,
  Provisioned=True (CapacityIsFound); else one node group must take all the rest (binpacking,
  all-or-nothing) and is asked for that many nodes with an atomic request: Provisioned=True
  (CapacityIsProvisioned) right after the request, not when nodes are Ready ("best effort").
- Upstream learns that an atomic scale-up failed from the resize call itself; here the cloud answers in
  a later record, so a request whose group's scale-up failed after it was provisioned goes back to
  Provisioned=False (CapacityIsNotFound) and is retried.
- Booking: a provisioned request's pods are placed into the autoscaler's own snapshot in every later
  loop for 10 minutes, so other scale-ups do not count on that capacity. The scheduler does not see
  the booking (upstream: any pod can take the capacity). BookingExpired=True when all its consumer pods
  are bound (CapacityBookingConsumed) or the 10 minutes are over (CapacityReservationTimeExpired).
- Pods that consume a request (annotation) do not trigger regular scale-ups.
- Lifetime (upstream's provReqProcessor.refresh and DeleteOldProvReqs, at the start of every loop): a
  request neither Provisioned=True nor finished (BookingExpired/Failed) 7 days after its creation gets
  Failed=True (`Expired`); at most 20 such failures and reservation-time expiries per loop. A request
  whose Provisioned or Failed condition was last written more than 7 days ago is deleted
  (`ProvisioningRequestDeleted`), whatever the condition's status; its consumer pods still never
  trigger regular scale-ups (the pods filter reads only the annotation).
Fake pods with DRA claims are not simulated yet (their claims do not exist): such requests never fit.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ...cluster.nodes import set_taints
from ...kube.manifests import pod_requests
from ...kube.provreq import (
    BEST_EFFORT_ATOMIC,
    BOOKING_MS,
    BOOKING_TAINT,
    EXPIRATION_MS,
    EXPIRED_MSG,
    EXPIRED_REASON,
    MAX_UPDATED,
    TERMINAL_TTL_MS,
    booking_value,
    consumed_request,
    fake_pods,
    retry_backoff_ms,
)
from ...log.events import AnyEvent, ProvisioningRequestCondition, ProvisioningRequestDeleted
from ...state.cluster import RUNNING, SUCCEEDED, ClusterState, PodState
from ...state.provreq import RequestState

CLOUD_ANSWER_MS = 60_000  # a failure of the group this soon after the request is the request's


def _pod_state(manifest: dict[str, Any]) -> PodState:
    meta = manifest["metadata"]
    return PodState(key=f"pod/{meta['namespace']}/{meta['name']}", manifest=manifest,
                    requests=pod_requests(manifest), priority=int(manifest["spec"].get("priority") or 0),
                    created_t=0, created_offset=0, run_for_ms=-1)


@dataclass
class Handled:
    """What ProvisioningRequest mode decided in one loop."""

    events: list[AnyEvent]
    scale_up: tuple[str, int] | None = None  # (group, nodes) for an atomic request


# request key -> (what its pods were made from: the request's and its PodTemplates' objects; its pods or why none)
FakePods = dict[str, tuple[tuple[object, ...], list[PodState] | str]]


class Broker:
    """One loop's view of the requests; `pods` caches each request's fake pods across loops."""

    def __init__(self, view: ClusterState, now: int, pods: FakePods) -> None:
        self.view = view
        self.now = now
        self._pods = pods
        self._owner: dict[str, str] = {}  # fake pod key -> its request's key (filled by `booked`)
        self._finished: set[str] = set()  # requests failed or deleted by this loop (not handled again)

    def fake(self, state: RequestState) -> list[PodState] | str:
        """The request's pods, made again when the request or one of its PodTemplates is another object than when
        they were cached (created again, or changed during the run: upstream reads the templates every loop)."""
        templates = self.view.provisioning.templates
        namespace = state.key.split("/", 1)[0]
        deps = (state.manifest, *(templates.get(f"{namespace}/{s['podTemplateRef']['name']}")
                                  for s in state.manifest["spec"]["podSets"]))
        hit = self._pods.get(state.key)
        if hit is None or len(hit[0]) != len(deps) or any(a is not b for a, b in zip(hit[0], deps, strict=True)):
            made = fake_pods(state.manifest, templates)
            hit = self._pods[state.key] = (deps, made if isinstance(made, str) else [_pod_state(m) for m in made])
        return hit[1]

    def consumers(self, key: str) -> list[PodState]:
        return [p for p in self.view.pods.values() if consumed_request(p.manifest) == key]

    def expire(self, consumed: bool = True) -> list[AnyEvent]:
        """BookingExpired for provisioned requests whose consumers all run, or whose 10 minutes are over;
        Failed=True (Expired) for requests not provisioned 7 days after their creation; then the
        deletion of old finished requests (`collect`). `consumed` False: autoscaler#9805 (core/kube/bugs.py), before
        kubernetes/autoscaler#9806 added CapacityBookingConsumed: only the 10 minutes end a booking."""
        events: list[AnyEvent] = []
        expired = failures = 0  # upstream's refresh updates at most MAX_UPDATED requests per loop
        for state in self.view.provisioning.requests.values():
            if "BookingExpired" in state.conditions or state.is_true("Failed"):
                continue
            provisioned = state.conditions.get("Provisioned")
            if provisioned is None or provisioned.status != "True":
                # refresh: `created.Add(defaultExpirationTime).Before(now)` (strictly after)
                if failures < MAX_UPDATED - expired and self.now > state.created_t + EXPIRATION_MS:
                    failures += 1
                    self._finished.add(state.key)
                    events.append(_condition(state, "Failed", "True", EXPIRED_REASON, EXPIRED_MSG))
                continue
            group = self.view.node_groups.get(provisioned.group)
            failed = group is not None and any(provisioned.t <= t <= provisioned.t + CLOUD_ANSWER_MS
                                               for t, _, _ in group.failures)
            started = sum(1 for p in self.consumers(state.key) if p.phase in (RUNNING, SUCCEEDED))
            if failed and provisioned.reason == "CapacityIsProvisioned" and started < state.count:
                # the atomic request failed at the cloud (upstream learns it from the resize call): retry
                events.append(_condition(state, "Provisioned", "False", "CapacityIsNotFound",
                                         f"the atomic scale-up of node group {provisioned.group} failed"))
            elif consumed and started >= state.count:
                events.append(_condition(state, "BookingExpired", "True", "CapacityBookingConsumed",
                                         "all pods of the request are scheduled"))
                events += self.unreserve(state.key)
            elif self.now >= provisioned.t + BOOKING_MS and expired < MAX_UPDATED:
                expired += 1
                events.append(_condition(state, "BookingExpired", "True", "CapacityReservationTimeExpired",
                                         "the capacity booking expired"))
                events += self.unreserve(state.key)
        return events + self.collect()

    def collect(self) -> list[AnyEvent]:
        """Delete requests whose Provisioned or Failed condition was last written more than 7 days ago
        (upstream's DeleteOldProvReqs checks the conditions' presence, not their status, against
        `lastTransitionTime`, which its AddOrUpdateCondition stamps on every write: `written_t`)."""
        events: list[AnyEvent] = []
        for state in self.view.provisioning.requests.values():
            if any(c is not None and self.now > c.written_t + TERMINAL_TTL_MS
                   for c in (state.conditions.get("Provisioned"), state.conditions.get("Failed"))):
                self._finished.add(state.key)
                self._pods.pop(state.key, None)  # the fake-pod cache: a recreated request makes its own
                events += self.unreserve(state.key)  # a booking taint left behind, if any
                events.append(ProvisioningRequestDeleted(
                    request=state.key, reason="its Provisioned or Failed condition is older than 7 days"))
        return events

    def unreserve(self, key: str) -> list[AnyEvent]:
        """Lift the reservation taint of the request's nodes (only there with `reserveBookings`)."""
        value = booking_value(key)
        events: list[AnyEvent] = []
        for node in self.view.nodes.values():
            if any(t.get("key") == BOOKING_TAINT and t.get("value") == value for t in node.taints):
                events += set_taints(self.view, node.name, [t for t in node.taints if t.get("key") != BOOKING_TAINT])
        return events

    def booked(self, double_count: bool = False) -> list[PodState]:
        """The fake pods of requests whose booking holds (placed into every snapshot), less one for each
        consumer already running (its real pod holds that share of the capacity). `double_count`: autoscaler#9805
        (core/kube/bugs.py; fixed by kubernetes/autoscaler#9806, which expires the booking once all the request's
        pods are scheduled): every fake pod stays booked, running consumers or not, so their capacity counts twice."""
        out: list[PodState] = []
        for state in self.view.provisioning.requests.values():
            if (state.is_true("Provisioned") and "BookingExpired" not in state.conditions
                    and state.key not in self._finished):
                pods = self.fake(state)
                if not isinstance(pods, str):
                    started = 0 if double_count else sum(1 for p in self.consumers(state.key)
                                                         if p.phase in (RUNNING, SUCCEEDED))
                    out.extend(pods[started:])
                    self._owner.update((p.key, state.key) for p in pods)
        return out

    def revoke(self, unplaced: list[PodState]) -> list[AnyEvent]:
        """CapacityRevoked (an option: upstream defines the condition and never sets it): a request whose
        booked pods no longer fit the snapshot (its capacity was taken, or its nodes went away) is
        revoked and goes back to Provisioned=False, to be provisioned again."""
        keys = {self._owner[p.key] for p in unplaced}
        events: list[AnyEvent] = []
        for state in self.view.provisioning.requests.values():
            if state.key in keys and state.is_true("Provisioned") and "BookingExpired" not in state.conditions:
                events.append(_condition(state, "CapacityRevoked", "True", "CapacityNotAvailable",
                                         "the booked capacity is no longer available"))
                events.append(_condition(state, "Provisioned", "False", "CapacityIsNotFound",
                                         "the booked capacity was revoked; will provision again"))
        return events

    def next_request(self) -> RequestState | None:
        for state in self.view.provisioning.requests.values():
            if state.is_true("Provisioned") or state.is_true("Failed") or state.key in self._finished:
                continue
            tried = state.conditions.get("Provisioned")
            if tried is not None and self.now < tried.written_t + retry_backoff_ms(state.attempts):
                continue
            return state
        return None

    def handle(self, state: RequestState, fits_existing: Callable[[list[PodState]], list[PodState]],
               scale_up: Callable[[list[PodState]], tuple[str, int] | None]) -> Handled:
        """One request: `fits_existing(pods)` places what fits the ready nodes and returns the rest;
        `scale_up(pods)` finds one group that takes all of them (atomic), or None."""
        events: list[AnyEvent] = []
        if not state.is_true("Accepted"):
            events.append(_condition(state, "Accepted", "True", "Accepted", "the request was accepted"))
        pods = self.fake(state)
        if isinstance(pods, str):
            events.append(_condition(state, "Failed", "True", "FailedToCreatePods", pods))
            return Handled(events)
        rest = fits_existing(pods)
        if not rest:
            events.append(_condition(state, "Provisioned", "True", "CapacityIsFound",
                                     "the capacity is available in the cluster"))
            return Handled(events)
        if state.cls == BEST_EFFORT_ATOMIC:
            chosen = scale_up(rest)
            if chosen is not None:
                events.append(_condition(state, "Provisioned", "True", "CapacityIsProvisioned",
                                         f"asked node group {chosen[0]} for {chosen[1]} node(s)", chosen[0]))
                return Handled(events, chosen)
        no_retry = (state.manifest["spec"].get("parameters") or {}).get("noRetry") == "true"
        if no_retry and state.cls != BEST_EFFORT_ATOMIC:
            events.append(_condition(state, "Failed", "True", "CapacityIsNotFound",
                                     f"{len(rest)} of {len(pods)} pods do not fit"))
        else:
            events.append(_condition(state, "Provisioned", "False", "CapacityIsNotFound",
                                     f"{len(rest)} of {len(pods)} pods do not fit; will retry"))
        return Handled(events)


def _condition(state: RequestState, kind: str, status: str, reason: str, message: str,
               group: str = "") -> ProvisioningRequestCondition:
    return ProvisioningRequestCondition(request=state.key, condition=kind, status=status, reason=reason,
                                        message=message, group=group)
