"""The device taint eviction controller (kube-controller-manager, pkg/controller/devicetainteviction), as a reactor.

Upstream (device_taint_eviction.go): pods that use an allocated claim whose device has a NoExecute taint the
claim does not tolerate are deleted, after the pod's DisruptionTarget condition is set with reason
`DeletionByDeviceTaintManager`. When: for each tainted device of the claim, the taint's `timeAdded` plus the
`tolerationSeconds` of the allocation result's toleration that tolerates it (0 when none does; never when one
tolerates it without `tolerationSeconds`); the claim's time is the earliest of its devices'. Pods already done
are left alone. The tolerations are those the allocation result recorded for the device (core/dra/result.py).

dralab's model: the taints that evict are those of DeviceTaintRules (core/dra/taint_rules.py; their `timeAdded`
is when the rule was created in the run). An evicted pod gets `PodEvicted` with the reason (the fold writes the
pod Failed); the claim controller then takes it out of the claims' reservedFor and deallocates them, and its
workload controller makes a replacement, as for any eviction. A pod waiting for its time wakes this reactor then.

The rule's status (1.35+, where DeviceTaintRuleStatus exists): the EvictionInProgress condition as
maybeUpdateRuleStatus writes it: for a NoExecute rule True with reason PodsPendingEviction while pods wait for
eviction ("N pods need to be evicted in M namespaces."), else False with Completed (it evicted some) or
NotStarted; for effect None, NoEffect with how many pods would be evicted; other effects, OtherEffect. Each
message ends with the count evicted so far. Simplification: upstream rewrites the condition at most every 10 s
(ruleStatusPeriod); dralab writes it whenever it changes.

Taints a driver publishes in its ResourceSlice with effect NoExecute (not a rule) have no `timeAdded` in dralab's
model of slices: they do not evict here (documented in docs/scheduler.md "Device taints").
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from ..dra.checks import check_toleration
from ..dra.model import Taint, Toleration
from ..dra.prepare import tolerates
from ..dra.taint_rules import TaintRule
from ..engine.contract import Decision, Trigger
from ..kube.versions import profile_from_config
from ..log.events import AnyEvent, DeviceTaintRuleStatus, PodEvicted
from ..state.cluster import FAILED, SUCCEEDED, ClusterState

REASON = "DeletionByDeviceTaintManager"  # the pod's DisruptionTarget condition reason, upstream's
NEVER = -1


def taint_time(taint: Taint, added_ms: int, tolerations: Sequence[Toleration]) -> int:
    """When a pod using a device with this NoExecute taint is evicted (NEVER: tolerated for good)."""
    matching = [t for t in tolerations if tolerates(t, taint)]
    if not matching:
        return added_ms
    if any(t.toleration_seconds is None for t in matching):
        return NEVER
    return added_ms + max(0, min(int(t.toleration_seconds or 0) for t in matching)) * 1000


def claim_eviction(allocation: dict[str, Any], rules: Sequence[tuple[TaintRule, int]]) -> tuple[int, list[str]] | None:
    """The earliest time the claim's pods are evicted for `rules` (NoExecute, with their times added), and the
    rules that evict at that time; None when no rule evicts them."""
    best: int | None = None
    names: list[str] = []
    for result in (allocation.get("devices") or {}).get("results") or []:
        tolerations = [check_toleration(t, "") for t in result.get("tolerations") or []]
        for rule, added in rules:
            if not rule.matches(result.get("driver", ""), result.get("pool", ""), result.get("device", "")):
                continue
            when = taint_time(rule.taint, added, tolerations)
            if when == NEVER:
                continue
            if best is None or when < best:
                best, names = when, [rule.name]
            elif when == best and rule.name not in names:
                names.append(rule.name)
    return None if best is None else (best, names)


def schedule(view: ClusterState, rules: Sequence[tuple[TaintRule, int]]) -> dict[str, tuple[int, list[str]]]:
    """Pod key -> (when it is evicted, the rules that evict it), for the running pods of allocated claims."""
    out: dict[str, tuple[int, list[str]]] = {}
    if not rules:
        return out
    for state in view.dra.claims.values():
        if state.allocation is None or not state.reserved_for:
            continue
        eviction = claim_eviction(state.allocation, rules)
        if eviction is None:
            continue
        for key in state.reserved_for:
            pod = view.pods.get(key)
            if pod is None or pod.node is None or pod.phase in (SUCCEEDED, FAILED):
                continue
            seen = out.get(key)
            if seen is None or eviction[0] < seen[0]:
                out[key] = eviction
            elif eviction[0] == seen[0]:
                out[key] = (seen[0], sorted({*seen[1], *eviction[1]}))
    return out


def _plural(n: int, one: str, many: str) -> str:
    return one if n == 1 else many.format(n)


def condition(rule: TaintRule, pending: dict[str, None], evicted: int, would: int = 0) -> dict[str, Any]:
    """The rule's EvictionInProgress condition (upstream maybeUpdateRuleStatus), without its times."""
    status, message = "False", ""
    if rule.taint.effect == "NoExecute":
        if pending:
            namespaces = len({p.split("/")[1] for p in pending})
            status, reason = "True", "PodsPendingEviction"
            message = (_plural(len(pending), "1 pod needs", "{} pods need") + " to be evicted in "
                       + _plural(namespaces, "1 namespace.", "{} different namespaces."))
        else:
            reason = "Completed" if evicted else "NotStarted"
    elif rule.taint.effect == "None":
        reason = "NoEffect"
        message = (_plural(would, "1 pod", "{} pods") + " would be evicted if the effect was NoExecute.")
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
        if not state.rules or not profile.enabled("DRADeviceTaints"):
            return Decision(())
        timed = [(r, state.rules[r.name].time_added_ms) for r in state.converted()]
        due = schedule(view, [(r, t) for r, t in timed if r.taint.effect == "NoExecute"])
        events: list[AnyEvent] = []
        wake: int | None = None
        evicted: dict[str, int] = {}
        pending: dict[str, dict[str, None]] = {}
        for key in sorted(due):
            when, names = due[key]
            if when <= now:
                events.append(PodEvicted(pod=key, node=str(view.pods[key].node),
                                         reason=f"{REASON}: NoExecute taint of DeviceTaintRule {', '.join(names)}"))
                for name in names:
                    evicted[name] = evicted.get(name, 0) + 1
            else:
                wake = when if wake is None else min(wake, when)
                for name in names:
                    pending.setdefault(name, {})[key] = None
        if profile.version != "1.34":  # rule status exists from 1.35
            events += self._status(view, timed, evicted, pending)
        return Decision(tuple(events), wake)

    @staticmethod
    def _status(view: ClusterState, timed: list[tuple[TaintRule, int]], evicted: dict[str, int],
                pending: dict[str, dict[str, None]]) -> list[AnyEvent]:
        out: list[AnyEvent] = []
        for rule, added in timed:
            state = view.dra.taint_rules.rules[rule.name]
            total = state.evicted + evicted.get(rule.name, 0)
            would = 0
            if rule.taint.effect == "None":  # upstream simulates the rule as NoExecute to count
                as_noexecute = replace(rule, taint=replace(rule.taint, effect="NoExecute"))
                would = len(schedule(view, [(as_noexecute, added)]))
            cond = condition(rule, pending.get(rule.name, {}), total, would)
            if cond != state.condition or total != state.evicted:
                out.append(DeviceTaintRuleStatus(name=rule.name, condition=cond, evicted=total))
        return out
