"""DynamicResources' PreBind wait for device binding conditions (KEP-5007; gates DRADeviceBindingConditions and
DRAResourceClaimDeviceStatus, beta and on from 1.36).

Upstream (pkg/scheduler/framework/plugins/dynamicresources/dynamicresources.go, PreBind): after writing the pod's
claims (allocation, reservedFor, allocationTimestamp), when an allocated device has `bindingConditions` the
binding goroutine polls the claims every 5 s (`wait.PollUntilContextTimeout`, first check at once) until every
binding condition of every such device is True in the claim's `status.devices[].conditions`; a
`bindingFailureConditions` condition True, or the plugin's `bindingTimeout` (DynamicResourcesArgs, default
600 s), ends it with an error: Unreserve, the pod back to the queue; the next cycle's Filter finds the claim
unavailable and PostFilter deallocates it (or the resourceclaim controller does, once nothing reserves it).
The pod is not bound meanwhile; the scheduler cache keeps it assumed on its node, so it holds the node's
resources, and its claims (allocated in the API) hold the devices.

dralab: the scheduler's decision writes the claims and `PodBindingStarted` instead of `PodBound`; each later
decision checks the waits at upstream's poll ticks (`since` + k·5 s, from the times the drivers wrote the
conditions: ClaimDeviceConditionSet) and ends each with `PodBindingEnded` + `PodBound`, or on failure with
the claims released (deallocated when the pod was their only consumer: the PostFilter / controller step folded
into the same record) and the pod's condition `SchedulerError` with dralab cause `binding-conditions`.
Only for release profiles (the legacy profile binds at once, as it always did).

PodGroup members (1.36, 1.37) wait as any pod: upstream runs each placed member's own binding cycle once the
group's cycle succeeds (schedule_one_podgroup.go, runBindingCycle per pod), so each waits, binds or fails alone
(the reactor's `_place`; a failed member goes back to the queue and its group's next cycle places it again).
Not modelled: 1.35 gang members (Workload API, GangCycle.finish) with binding conditions bind at Permit.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ...dra.allocated import AllocatedState
from ...dra.model import DeviceID
from ...kube.durations import format_duration
from ...kube.fields import FieldError, expect_duration, join
from ...kube.versions import LEGACY_PROFILE, Profile, same_profile
from ...log.events import ClaimReleased, PodBindingEnded, PodBindingStarted, PodBound, PodUnschedulable
from ...state.cluster import PENDING, ClusterState, PodState
from ...state.dra import BindingWait, device_ref
from ...state.gangs import Reservation
from ..framework import Code, ExtensionPoint, Status

NAME = "DynamicResources"
EXTENSION_POINTS = (ExtensionPoint.PRE_BIND,)
POLL_MS = 5_000  # PreBind's poll interval (wait.PollUntilContextTimeout(ctx, 5*time.Second, ...))
DEFAULT_BINDING_TIMEOUT_MS = 600_000  # DynamicResourcesArgs.bindingTimeout default (pkg/scheduler/apis/config/v1)
DEFAULT_FILTER_TIMEOUT_MS = 10_000  # DynamicResourcesArgs.filterTimeout default (not modelled: no wall clock)
CAUSE = "binding-conditions"
WAITING_MESSAGE = "waiting for binding conditions"
UNAVAILABLE = "resourceclaim not available on the node"
ARGS = ("filterTimeout", "bindingTimeout")


def check_args(args: dict[str, Any], path: str) -> dict[str, int]:
    """DynamicResourcesArgs of a scenario's pluginConfig (ValidateDynamicResourcesArgs): `bindingTimeout` a
    positive duration, `filterTimeout` zero (off) or positive. Returns them in ms, defaults filled in."""
    unknown = sorted(set(args) - set(ARGS))
    if unknown:
        raise FieldError(join(path, unknown[0]), f"not a DynamicResources argument (known: {', '.join(ARGS)})")
    out = {"bindingTimeout": DEFAULT_BINDING_TIMEOUT_MS, "filterTimeout": DEFAULT_FILTER_TIMEOUT_MS}
    if args.get("bindingTimeout") is not None:
        out["bindingTimeout"] = expect_duration(args["bindingTimeout"], join(path, "bindingTimeout"), positive=True)
    if args.get("filterTimeout") is not None:
        timeout = expect_duration(args["filterTimeout"], join(path, "filterTimeout"))
        # Upstream aborts a node's allocation after filterTimeout of wall time; dralab's allocator has no wall
        # clock and never aborts, which is what 0 (off) asks for and what the default almost always amounts to.
        # Any other value would change which pods fit on a slow allocation: refused, not silently ignored.
        if timeout not in (0, DEFAULT_FILTER_TIMEOUT_MS):
            raise FieldError(join(path, "filterTimeout"), "only 0 (off) or the default 10s: a Filter timeout on "
                             "allocation wall time is not modelled by dralab (its allocator has no wall clock)")
        out["filterTimeout"] = timeout
    return out


def waits_enabled(profile: Profile) -> bool:
    """Whether PreBind waits: both gates on (upstream's Features.DeviceBindingAndStatus), and a release profile
    (the legacy profile's logs must not change)."""
    return (profile.enabled("DRADeviceBindingConditions") and profile.enabled("DRAResourceClaimDeviceStatus")
            and not same_profile(profile, LEGACY_PROFILE))


def binding_devices(allocation: dict[str, Any]) -> list[dict[str, Any]]:
    """The allocation's results with binding conditions."""
    return [r for r in (allocation.get("devices") or {}).get("results") or [] if r.get("bindingConditions")]


def claim_binding(view: ClusterState, key: str, allocation: dict[str, Any]) -> tuple[str, int]:
    """One claim's binding state from its devices' conditions: ("bound", t) when every binding condition is
    True (t: when the last turned True), ("failed: <why>", t) when a failure condition is True, ("", -1)
    while waiting. Upstream checks failure conditions first (isClaimBound)."""
    conditions = view.dra.device_conditions.get(key, {})
    last = -1
    for result in binding_devices(allocation):
        conds = conditions.get(device_ref(str(result.get("driver")), str(result.get("pool")),
                                          str(result.get("device"))), {})
        for kind in result.get("bindingFailureConditions") or ():
            status, t = conds.get(kind, ("", -1))
            if status == "True":
                return f"failed: device {result.get('device')} has {kind}=True", t
    for result in binding_devices(allocation):
        conds = conditions.get(device_ref(str(result.get("driver")), str(result.get("pool")),
                                          str(result.get("device"))), {})
        for kind in result.get("bindingConditions") or ():
            status, t = conds.get(kind, ("", -1))
            if status != "True":
                return "", -1
            last = max(last, t)
    return "bound", last


def pod_binding(view: ClusterState, claims: tuple[str, ...]) -> tuple[str, int]:
    """All the pod's claims together: the first failure, else bound when all are (at the latest time), else
    waiting ("", -1)."""
    last = -1
    waiting = False
    for key in claims:
        state = view.dra.claims.get(key)
        if state is None or state.allocation is None:
            return f"failed: claim {key[6:]} is not allocated", -1
        outcome, t = claim_binding(view, key, state.allocation)
        if outcome.startswith("failed"):
            return outcome, t
        waiting = waiting or not outcome
        last = max(last, t)
    return ("", -1) if waiting else ("bound", last)


def next_poll(since: int, t: int) -> int:
    """The first of PreBind's polls (at `since`, then every 5 s) to see a state reached at `t`: the first
    poll, made as the wait begins, only sees what was there before (t < since); a driver's answer, written
    after, is seen by the first poll at or after it, 5 s later at the earliest."""
    if t < since:
        return since
    return since + max(1, -(-(t - since) // POLL_MS)) * POLL_MS


def needs_wait(allocations: dict[str, dict[str, Any]], allocated: list[tuple[str, dict[str, Any]]]) -> bool:
    """Whether any of the pod's claims (newly allocated or already allocated) has a device with binding
    conditions (upstream's PreBind then polls; a claim bound before is found bound at the first poll)."""
    return any(binding_devices(a) for a in allocations.values()) or any(binding_devices(a) for _, a in allocated)


@dataclass
class PreBindWaits:
    """This decision's view of the pods waiting in PreBind: their resources held in the cycle (the
    assumed pods), the waits that end now (their events), and when the next poll or timeout is due."""

    timeout_ms: int = DEFAULT_BINDING_TIMEOUT_MS
    busy: set[str] = field(default_factory=set)  # pods waiting or just ended: not in this decision's queue
    wake: int | None = None

    def run(self, cycle: Any, now: int) -> None:
        """Hold each waiting pod on its node in `cycle` (scheduler/cycle.py Cycle), end the waits that are
        due (bound, failed or timed out), and note the next poll."""
        view: ClusterState = cycle.view
        for wait in list(view.dra.binding.values()):
            self.busy.add(wait.pod)
            pod = view.pods.get(wait.pod)
            if pod is None or pod.phase != PENDING or pod.node is not None:
                cycle.events.append(PodBindingEnded(pod=wait.pod, bound=False, reason="the pod is gone"))
                continue
            if wait.node not in view.nodes:  # deleted under the waiting pod (e.g. a premature scale-down)
                self._fail(cycle, pod, wait, f"node {wait.node} was deleted")
                continue
            cycle.hold(pod, wait.node, {}, "")
            outcome, t = pod_binding(view, wait.claims)
            due = next_poll(wait.since, t) if outcome else None
            if due is not None and due < wait.deadline and now >= due:
                if outcome == "bound":
                    cycle.events.append(PodBindingEnded(pod=wait.pod, bound=True))
                    cycle.events.append(PodBound(pod=wait.pod, node=wait.node))
                else:
                    self._fail(cycle, pod, wait, outcome[len("failed: "):])
            elif now >= wait.deadline:
                self._fail(cycle, pod, wait, f"binding timeout ({format_duration(wait.deadline - wait.since)}) passed")
            else:
                later = due if due is not None and due < wait.deadline else wait.deadline
                self.wake = later if self.wake is None else min(self.wake, later)

    @staticmethod
    def _fail(cycle: Any, pod: PodState, wait: BindingWait, why: str) -> None:
        """PreBind's error: Unreserve (the pod leaves reservedFor), the claims only it used deallocated,
        the pod back to the queue with the error."""
        view: ClusterState = cycle.view
        for key in wait.claims:
            state = view.dra.claims.get(key)
            if state is None:
                continue
            only = set(state.reserved_for) - {""} <= {pod.key}  # "": a dump's claim reserved for nobody
            cycle.events.append(ClaimReleased(claim=key, pod=pod.key, deallocate=only and state.allocation is not None))
        cycle.events.append(PodBindingEnded(pod=pod.key, bound=False, reason=why))
        message = f"binding the pod to {wait.node} failed: {why}"
        cycle.events.append(PodUnschedulable(pod=pod.key, reason="SchedulerError", message=message, cause=CAUSE,
                                             detail=why))


def blocked(view: ClusterState, pod: PodState, claims: Any) -> str | None:
    """Why an already allocated claim of the pod is not available (a failure condition True while other
    consumers use it: Filter's "resourceclaim not available on the node"), else None. A failed claim only this
    pod uses is left to PreBind's first poll, which fails it and deallocates it (upstream: Filter, then
    PostFilter)."""
    for key, allocation in claims.allocated:
        outcome, _ = claim_binding(view, key, allocation)
        if outcome.startswith("failed") and set(view.dra.claims[key].reserved_for) - {"", pod.key}:
            return f"claim {key[6:]}: {outcome[len('failed: '):]}"
    return None


def prebind(cycle: Any, pod: PodState, node: str, claims: Any, allocations: dict[str, dict[str, Any]], now: int,
            timeout_ms: int, nominate: bool) -> None:
    """Reserve and PreBind a pod whose devices have binding conditions: the claims written as `Cycle.bind`
    writes them, then the wait (PodBindingStarted) in place of the binding. `nominate`: the scheduler sets
    status.nominatedNodeName for the binding cycle (KEP-5278, NominatedNodeNameForExpectation)."""
    why = blocked(cycle.view, pod, claims)
    if why is not None:
        cycle.pending(pod, "Unschedulable", UNAVAILABLE, CAUSE, why)
        return
    start = len(cycle.events)
    cycle.bind(pod, node, claims, allocations)
    bound = cycle.events.pop(start)
    assert isinstance(bound, PodBound), "Cycle.bind writes PodBound first"
    keys = tuple(dict.fromkeys([*allocations, *(k for k, _ in claims.allocated)]))
    cycle.events.append(PodBindingStarted(pod=pod.key, node=node, claims=keys, since=now, deadline=now + timeout_ms,
                                          nominated=nominate))


@dataclass(frozen=True)
class PreBind:
    """DynamicResources' PreBind as a profile plugin (scheduler/plain.py's loop): Wait when the pod's devices
    have binding conditions (the claims written and the wait started, `prebind`), else nothing to do here."""

    now: int
    timeout_ms: int
    nominate: bool
    enabled: bool

    def __call__(self, state: Any, pod: PodState, node: str) -> Status | None:
        if not self.enabled or state.gang is not None or not needs_wait(state.allocations, state.claims.allocated):
            return None
        prebind(state.cycle, pod, node, state.claims, state.allocations, self.now, self.timeout_ms, self.nominate)
        return Status(Code.WAIT, WAITING_MESSAGE, CAUSE, plugin=NAME)


def nominated_waits(view: ClusterState) -> dict[str, Reservation]:
    """The pods waiting in PreBind with status.nominatedNodeName set (KEP-5278), as the autoscaler takes
    nominated pods: placed on their node in its snapshot, the node occupied (core/autoscaler/reactor.py)."""
    return {w.pod: Reservation(w.pod, w.node, "", {}, w.deadline, view.pods[w.pod].requests, True)
            for w in view.dra.binding.values() if w.nominated and w.pod in view.pods}


def waiting_devices(view: ClusterState) -> set[DeviceID]:
    """The devices of the claims pods wait on in PreBind: allocated in the API, but their pods are on no node,
    so cluster-autoscaler's DRA utilization (the claims of the node's pods) does not count them."""
    held = AllocatedState()
    for wait in view.dra.binding.values():
        for key in wait.claims:
            state = view.dra.claims.get(key)
            if state is not None and state.allocation is not None and set(state.reserved_for) <= {wait.pod}:
                held.add_allocation(state.allocation)
    return held.devices
