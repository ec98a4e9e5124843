"""The device taint eviction controller (kube-controller-manager, pkg/controller/devicetainteviction), as a reactor.

Upstream (device_taint_eviction.go): pods that use an allocated claim whose device has a NoExecute taint the
claim does not tolerate are deleted, after the pod's DisruptionTarget condition is set with reason
`DeletionByDeviceTaintManager`. When: for each tainted device of the claim, the taint's `timeAdded` plus the
`tolerationSeconds` of the allocation result's toleration that tolerates it (0 when none does; never when one
tolerates it without `tolerationSeconds`); the claim's time is the earliest of its devices'. Pods already done
are left alone. The tolerations are those the allocation result recorded for the device (core/dra/result.py). A
pod uses a claim as podEvictionTime finds it: starting from the pod (`pod_claims`: its spec entries resolved as
resourceclaim.Name does, through its status for template claims, then its extended-resource claim), the claim
allocated, controlled by the pod if it was generated for it (IsForPod), and reserved for the pod or, KEP-5729, for
its PodGroup (IsReservedForPod). Upstream matches reservedFor by uid; dralab's fold keeps reservedFor as pod keys,
so a pod recreated under the same name counts as the claim's consumer (upstream's no-evict-wrong-pod). An eviction
is attributed to every rule that would evict the pod, the later ones too (upstream's multiple-claims-different-rules
cases).

dralab's model: the taints that evict are those of DeviceTaintRules (core/dra/taint_rules.py; their `timeAdded`
is when the rule was created in the run). Upstream deletes the pod (addConditionAndDeletePod: `Delete` with empty
DeleteOptions, so the pod's own terminationGracePeriodSeconds applies) and remembers its uid so that it never
deletes it twice. So, in release profiles, an evicted pod gets `PodTerminating` with its grace period and the
DisruptionTarget reason DeletionByDeviceTaintManager (core/state/termination.py): it keeps its node and devices
until the grace period is over, then the lifecycle reactor ends it; a pod already terminating is left alone. The
legacy model (logs without a release) evicts at once with `PodEvicted`. Either way the claim controller then
takes the pod out of the claims' reservedFor and deallocates them, and its workload controller makes a
replacement, as for any eviction. A pod waiting for its time wakes this reactor then.

The rule's status (1.35+, where DeviceTaintRuleStatus exists): the EvictionInProgress condition as
maybeUpdateRuleStatus writes it: for a NoExecute rule True with reason PodsPendingEviction while pods wait for
eviction ("N pods need to be evicted in M namespaces."), else False with Completed (it evicted some) or
NotStarted; for effect None, NoEffect with the devices it selects and how many pods it would evict, written once;
other effects, OtherEffect. Each message ends with the count evicted so far. As upstream, a condition is rewritten at
most every 10 s (ruleStatusPeriod) and 10 s after the rule evicted pods, and the first update of a new rule sees the
pods it is about to evict as pending (its work item runs before the pods').

Taints a driver publishes in its ResourceSlice evict the same way, their timeAdded being when the fold first saw
the slice publish them (core/state/device_taints.py; a dump's slices: the dump's time). Upstream also ignores
slices of an older pool generation; dralab looks at every slice it has.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from ..cluster.pod_claims import group_claims, same_source
from ..dra.checks import check_toleration
from ..dra.extended import POD_CLAIM
from ..dra.model import Taint, Toleration
from ..dra.prepare import tolerates
from ..dra.taint_rules import TaintRule
from ..engine.contract import Decision, Trigger
from ..kube.versions import profile_from_config
from ..log.events import AnyEvent, DeviceTaintRuleStatus, PodEvicted, PodTerminating
from ..state.cluster import FAILED, SUCCEEDED, ClusterState, PodState
from ..state.device_taints import taint_key
from ..state.dra import ClaimState
from ..state.objects import controller_ref
from ..state.termination import grace_ms, terminating

REASON = "DeletionByDeviceTaintManager"  # the pod's DisruptionTarget condition reason, upstream's
SLICE = "\x00slice/"  # the name prefix of a slice's own taint as a rule (no rule name can start so)
NEVER = -1
STATUS_PERIOD_MS = 10_000  # ruleStatusPeriod: the shortest time between two updates of a rule's status


def taint_time(taint: Taint, added_ms: int, tolerations: Sequence[Toleration]) -> int:
    """When a pod using a device with this NoExecute taint is evicted (NEVER: tolerated for good)."""
    matching = [t for t in tolerations if tolerates(t, taint)]
    if not matching:
        return added_ms
    if any(t.toleration_seconds is None for t in matching):
        return NEVER
    return added_ms + max(0, min(int(t.toleration_seconds or 0) for t in matching)) * 1000


def claim_eviction(allocation: dict[str, Any], rules: Sequence[tuple[TaintRule, int]]) -> tuple[int, list[str]] | None:
    """The earliest time the claim's pods are evicted for `rules` (NoExecute, with their times added), and every
    rule that would evict them, sooner or later (upstream attributes the eviction to all of them, "the second rule
    would have caused eviction eventually"); None when no rule evicts them."""
    best: int | None = None
    names: dict[str, None] = {}
    for result in (allocation.get("devices") or {}).get("results") or []:
        tolerations = [check_toleration(t, "") for t in result.get("tolerations") or []]
        for rule, added in rules:
            if not rule.matches(result.get("driver", ""), result.get("pool", ""), result.get("device", "")):
                continue
            when = taint_time(rule.taint, added, tolerations)
            if when == NEVER:
                continue
            best = when if best is None else min(best, when)
            names[rule.name] = None
    return None if best is None else (best, sorted(names))


def _controlled_by(claim: ClaimState, pod: PodState) -> bool:
    """Whether the claim's controlling owner is the pod (upstream resourceclaim.IsForPod, metav1.IsControlledBy:
    the controller ownerReference's uid is the pod's). dralab's own pods may carry no uid (nor, then, do the
    claims made for them, core/cluster/pod_claims.py): where either side has none, the Pod's name stands in."""
    ref = controller_ref(claim.claim.manifest)
    if ref is None or ref.get("kind") != "Pod":
        return False
    uid = str((pod.manifest.get("metadata") or {}).get("uid") or "")
    if uid and ref.get("uid"):
        return str(ref["uid"]) == uid
    return ref.get("name") == pod.key.rsplit("/", 1)[1]


def pod_claims(view: ClusterState, pod: PodState, extended: bool = True) -> list[tuple[str, bool]]:
    """The claims the pod uses as upstream's controller resolves them (podEvictionTime: resourceclaim.Name per
    `spec.resourceClaims` entry, then `status.extendedResourceClaimStatus`): (claim key, whether the claim must
    be controlled by the pod). An entry naming a claim uses it as is; an entry naming a template uses the claim
    its status entry names (dralab: `dra.pod_claims`, the fold's record of `status.resourceClaimStatuses`; no
    status entry, or one without a claim name, is no claim); the extended-resource claim is the one the scheduler
    recorded (`pod_claims`' `<extended-resources>`) or, in a dump, the one `status.extendedResourceClaimStatus`
    names. Generated claims must be the pod's own (mustCheckOwner). A PodGroup member's entry that matches a
    group entry (KEP-5729 same_source) is the group's claim, owned by the group. `extended` False: the
    extended-resource claim is not looked at (kubernetes#141290, open: podEvictionTime reads spec.resourceClaims
    only, so such a pod is never evicted)."""
    namespace = pod.key.split("/")[1]
    made = view.dra.pod_claims.get(pod.key, {})
    groups = group_claims(view, pod)
    out: list[tuple[str, bool]] = []
    for entry in (pod.manifest.get("spec") or {}).get("resourceClaims") or []:
        if not isinstance(entry, dict):
            continue
        name = str(entry.get("name"))
        consumer, group_entry = groups.get(name, ("", {}))
        if consumer and same_source(group_entry, entry):
            claim = (f"claim/{namespace}/{entry['resourceClaimName']}" if entry.get("resourceClaimName")
                     else view.dra.pod_claims.get(consumer, {}).get(name))
            if claim is not None:
                out.append((claim, False))
        elif entry.get("resourceClaimName"):
            out.append((f"claim/{namespace}/{entry['resourceClaimName']}", False))
        elif name in made:
            out.append((made[name], True))
    if not extended:  # kubernetes#141290
        return out
    claim = made.get(POD_CLAIM)
    if claim is None:
        named = ((pod.manifest.get("status") or {}).get("extendedResourceClaimStatus") or {}).get("resourceClaimName")
        claim = f"claim/{namespace}/{named}" if named else None
    if claim is not None:
        out.append((claim, True))
    return out


def uses(view: ClusterState, pod: PodState, claim: str, extended: bool = True) -> bool:
    """Whether the pod uses the claim as upstream's controller sees it: resolved from the pod (pod_claims), and
    for a generated claim controlled by the pod; the caller has the claim reserved for the pod or its group."""
    state = view.dra.claims.get(claim)
    return state is not None and any(
        key == claim and (not owned or _controlled_by(state, pod)) for key, owned in pod_claims(view, pod, extended))


def _consumers(view: ClusterState, claim: str, reserved_for: Iterable[str], extended: bool = True) -> list[str]:
    """The pods using a claim (upstream IsReservedForPod and podEvictionTime both): those in its reservedFor, and
    the members of a PodGroup in it (KEP-5729), that use it (`uses`: a member that does not name the claim,
    upstream's no-evict-pod-in-podgroup-without-claim, or a pod whose status names no claim, is left alone)."""
    out: list[str] = []
    for consumer in reserved_for:
        keys = (list(view.gang.group_members.get(consumer[len("podgroup/"):], {}))
                if consumer.startswith("podgroup/") else [consumer])
        for key in keys:
            pod = view.pods.get(key)
            if pod is not None and uses(view, pod, claim, extended):
                out.append(key)
    return out


def schedule(view: ClusterState, rules: Sequence[tuple[TaintRule, int]],
             extended: bool = True) -> dict[str, tuple[int, list[str]]]:
    """Pod key -> (when it is evicted, the rules that evict it), for the running pods of allocated claims
    (`extended` False: not through their extended-resource claims, kubernetes#141290)."""
    out: dict[str, tuple[int, list[str]]] = {}
    if not rules:
        return out
    for key, state in view.dra.claims.items():
        if state.allocation is None or not state.reserved_for:
            continue
        eviction = claim_eviction(state.allocation, rules)
        if eviction is None:
            continue
        for pod_key in _consumers(view, key, state.reserved_for, extended):
            pod = view.pods.get(pod_key)
            if pod is None or pod.node is None or pod.phase in (SUCCEEDED, FAILED):
                continue
            seen = out.get(pod_key)
            out[pod_key] = eviction if seen is None else (min(seen[0], eviction[0]),
                                                          sorted({*seen[1], *eviction[1]}))
    return out


def selected_devices(view: ClusterState, rule: TaintRule) -> tuple[int, int]:
    """(published devices the rule selects, allocated devices it selects): upstream countTaintedDevices."""
    published = sum(1 for slc in view.dra.slices.values() for d in slc.devices
                    if rule.matches(slc.driver, slc.pool, d.id.device))
    allocated = sum(1 for c in view.dra.claims.values() if c.allocation is not None
                    for r in (c.allocation.get("devices") or {}).get("results") or []
                    if rule.matches(r.get("driver", ""), r.get("pool", ""), r.get("device", "")))
    return published, allocated


def slice_taints(view: ClusterState) -> list[tuple[TaintRule, int]]:
    """The NoExecute taints the drivers publish in their slices, each as a rule of one device (named
    `SLICE<slice name>`) with the time the fold first saw it (core/state/device_taints.py `no_execute_since`)."""
    out: list[tuple[TaintRule, int]] = []
    for name, since in view.dra.taint_rules.no_execute_since.items():
        slc = view.dra.slices.get(name)
        if slc is None:
            continue
        for device in slc.devices:
            for taint in device.taints:
                added = since.get(taint_key(device.id.device, taint)) if taint.effect == "NoExecute" else None
                if added is not None:
                    out.append((TaintRule(SLICE + name, taint, slc.driver, slc.pool, device.id.device), added))
    return out


def _reason(names: Sequence[str]) -> str:
    """The PodEvicted reason: upstream's DisruptionTarget reason, and where the taints come from."""
    rules = [n for n in names if not n.startswith(SLICE)]
    slices = sorted({n[len(SLICE):] for n in names if n.startswith(SLICE)})
    parts = ([f"DeviceTaintRule {', '.join(rules)}"] if rules else []) + \
        ([f"ResourceSlice {', '.join(slices)}"] if slices else [])
    return f"{REASON}: NoExecute taint of {'; '.join(parts)}"


def _plural(n: int, one: str, many: str) -> str:
    return one if n == 1 else many.format(n)


def _namespaces(pods: Iterable[str], would: bool = False) -> str:
    n = len({p.split("/")[1] for p in pods})
    if would:  # upstream's NoEffect wording: "... in 1 namespace if the effect was NoExecute."
        return _plural(n, "1 namespace ", "{} different namespaces ")
    return _plural(n, "1 namespace.", "{} different namespaces.")


def condition(rule: TaintRule, pending: Iterable[str], evicted: int, would: Iterable[str] = (),
              devices: tuple[int, int] = (0, 0)) -> dict[str, Any]:
    """The rule's EvictionInProgress condition (upstream maybeUpdateRuleStatus), without its times: `pending`
    the pods waiting for eviction by it, `evicted` how many it evicted, and for effect None the pods it `would`
    evict and the (published, allocated) `devices` it selects."""
    pending, would = list(pending), list(would)
    status, message = "False", ""
    if rule.taint.effect == "NoExecute":
        if pending:
            status, reason = "True", "PodsPendingEviction"
            message = (_plural(len(pending), "1 pod needs", "{} pods need") + " to be evicted in "
                       + _namespaces(pending))
        else:
            reason = "Completed" if evicted else "NotStarted"
    elif rule.taint.effect == "None":
        reason = "NoEffect"
        message = (_plural(devices[0], "1 published device", "{} published devices") + " selected. "
                   + _plural(devices[1], "1 allocated device", "{} allocated devices") + " selected. "
                   + _plural(len(would), "1 pod", "{} pods") + " would be evicted in " + _namespaces(would, True)
                   + "if the effect was NoExecute. This information will not be updated again. Recreate the "
                   "DeviceTaintRule to trigger an update.")
    else:
        reason, message = "OtherEffect", "Eviction only happens for the NoExecute effect."
    if evicted:
        message = (message + " " if message else "") + _plural(evicted, "1 pod", "{} pods") + \
            " evicted since starting the controller."
    return {"type": "EvictionInProgress", "status": status, "reason": reason, "message": message}


@dataclass
class DeviceTaintEviction:
    name: str = "device-taint-eviction"
    trigger: Trigger = "events"
    kubernetes: dict[str, Any] | None = None  # the release (core/kube/versions.py): run config's entry

    def react(self, view: ClusterState, now: int, rng: random.Random) -> Decision:
        state = view.dra.taint_rules
        profile = profile_from_config(self.kubernetes)
        if not (state.rules or state.no_execute_since) or not profile.enabled("DRADeviceTaints"):
            return Decision(())
        timed = [(r, state.rules[r.name].time_added_ms) for r in state.converted()]
        # kubernetes#141290 (open; core/kube/bugs.py): podEvictionTime skips status.extendedResourceClaimStatus
        extended = not profile.bug("kubernetes#141290")
        due = schedule(view, [(r, t) for r, t in timed if r.taint.effect == "NoExecute"] + slice_taints(view), extended)
        events: list[AnyEvent] = []
        wakes: list[int] = []
        evicted: dict[str, int] = {}
        pending: dict[str, dict[str, None]] = {}  # rule -> the pods it evicts, now or later, as the view has them
        graceful = self.kubernetes is not None  # release profiles; the legacy model deletes at once
        for key in sorted(due):
            when, names = due[key]
            pod = view.pods[key]
            if graceful and terminating(pod.manifest):
                continue  # deleted already: upstream remembers the pod's uid (evictedPods) and leaves it be
            for name in names:
                pending.setdefault(name, {})[key] = None
            if when <= now and graceful:  # a pod deletion: the pod's own grace period (DeleteOptions{})
                events.append(PodTerminating(pod=key, node=str(pod.node), grace_ms=grace_ms(pod.manifest),
                                             reason=_reason(names), condition=REASON))
            if when <= now:
                if not graceful:
                    events.append(PodEvicted(pod=key, node=str(pod.node), reason=_reason(names)))
                for name in names:
                    evicted[name] = evicted.get(name, 0) + 1
            else:
                wakes.append(when)
        if profile.version != "1.34":  # rule status exists from 1.35
            events += self._status(view, now, timed, evicted, pending, wakes, extended)
        return Decision(tuple(events), min(wakes) if wakes else None)

    @staticmethod
    def _status(view: ClusterState, now: int, timed: list[tuple[TaintRule, int]], evicted: dict[str, int],
                pending: dict[str, dict[str, None]], wakes: list[int], extended: bool = True) -> list[AnyEvent]:
        """The rules' conditions as maybeUpdateRuleStatus writes them: from the view the decision saw (pods evicted
        by this very decision still pending, as upstream's first update precedes the deletion), at most every
        STATUS_PERIOD_MS per rule, and again STATUS_PERIOD_MS after the rule evicted pods. Eviction counts are
        recorded at once (`evicted`), the condition that mentions them with the next update."""
        out: list[AnyEvent] = []
        for rule, added in timed:
            state = view.dra.taint_rules.rules[rule.name]
            total = state.evicted + evicted.get(rule.name, 0)
            if rule.name in evicted:
                wakes.append(now + STATUS_PERIOD_MS)  # upstream: a delayed status update after an eviction
            if rule.taint.effect == "None":  # upstream simulates the rule as NoExecute, once
                if state.condition is not None:
                    continue
                as_noexecute = replace(rule, taint=replace(rule.taint, effect="NoExecute"))
                cond = condition(rule, (), state.evicted, schedule(view, [(as_noexecute, added)], extended),
                                 selected_devices(view, rule))
            else:
                cond = condition(rule, pending.get(rule.name, {}), state.evicted)
            hold = max(state.status_ms, state.evicted_ms) + STATUS_PERIOD_MS
            if cond != state.condition and state.condition is not None and now < hold:
                wakes.append(hold)  # not quite yet
                cond = state.condition
            if cond != state.condition or total != state.evicted:
                out.append(DeviceTaintRuleStatus(name=rule.name, condition=cond, evicted=total))
        return out
