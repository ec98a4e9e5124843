"""A dump's own evidence of why a pod waits, for the causes `dralab audit` cannot find by trying the pod on the
nodes itself (issue 21): `binding-conditions`, `preemption`, `spread`, `affinity`.

The audit's filters (core/analysis/audit_snapshot.py) check room, selectors, taints and DRA; they do not run
preemption, PodTopologySpread or InterPodAffinity, and a pod waiting in PreBind fits where its claims are
allocated. What the cluster itself wrote says more there, so a verdict is refined from it:

- a claim of the pod is allocated with devices whose ``bindingConditions`` are not all ``True`` in the claim's
  ``status.devices`` (KEP-5007: DynamicResources' PreBind waits for them): `binding-conditions`, whatever the
  filters said; a ``bindingFailureConditions`` entry ``True`` says the binding failed and will be retried;
- ``status.nominatedNodeName`` on a pod that does not fit for lack of room (resources, devices): it preempted
  pods there and waits for them to terminate (DefaultPreemption's PostFilter nominates it): `preemption`;
- a pod that fits by the audit's filters while its ``PodScheduled=False`` condition names upstream's
  PodTopologySpread or InterPodAffinity Filter messages (the FitError kube-scheduler wrote; the reason of the
  most nodes wins): `spread` or `affinity`, quoting kube-scheduler, since the audit did not check them.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any

from .audit_pods import PodVerdict

__all__ = ["FIT_ERROR_CAUSES", "refine"]

# Filter messages of pkg/scheduler/framework/plugins/podtopologyspread (ErrReasonConstraintsNotMatch, also with
# " (missing required label)") and interpodaffinity (ErrReasonAffinityRulesNotMatch,
# ErrReasonAntiAffinityRulesNotMatch, ErrReasonExistingAntiAffinityRulesNotMatch), as a FitError counts them
# ("0/3 nodes are available: 2 node(s) didn't match pod topology spread constraints, 1 Insufficient cpu.").
FIT_ERROR_CAUSES = {
    "node(s) didn't match pod topology spread constraints": "spread",
    "node(s) didn't match pod affinity rules": "affinity",
    "node(s) didn't match pod anti-affinity rules": "affinity",
    "node(s) didn't satisfy existing pods anti-affinity rules": "affinity",
}
_COUNTED = re.compile(r"(\d+) (node\(s\) didn't [^,.(]*)")
_ROOM = ("resources", "capacity", "fragmentation", "topology")
_UNCHECKED = {"spread": "topology spread constraints", "affinity": "inter-pod affinity"}


def refine(pod: dict[str, Any], verdict: PodVerdict) -> PodVerdict:
    """``verdict`` (of a pending pod, from the audit's filters) with the dump's evidence applied, if any."""
    if verdict.reason == "binding-conditions":  # already found (by evaluate, when it checks PreBind itself)
        return verdict
    waiting = _binding_conditions(verdict)
    if waiting is not None:
        return dataclasses.replace(verdict, reason="binding-conditions", message=waiting)
    status = pod.get("status") if isinstance(pod.get("status"), dict) else {}
    nominated = (status or {}).get("nominatedNodeName")
    if nominated and verdict.reason in _ROOM:
        return dataclasses.replace(verdict, reason="preemption", message=(
            f"nominated to node {nominated}: it preempted pods there and waits for them to terminate "
            f"(now: {verdict.message})"))
    if verdict.reason is None:
        found = _fit_error(status or {})
        if found is not None:
            cause, message = found
            return dataclasses.replace(verdict, reason=cause, message=(
                f"kube-scheduler: {message} (the audit does not check {_UNCHECKED[cause]}; by what it checks "
                f"the pod {verdict.message})"))
    return verdict


def _fit_error(status: dict[str, Any]) -> tuple[str, str] | None:
    """(cause, message) from a PodScheduled=False condition naming spread or affinity, else None."""
    for cond in status.get("conditions") or []:
        if not isinstance(cond, dict) or cond.get("type") != "PodScheduled" or cond.get("status") != "False":
            continue
        message = str(cond.get("message") or "")
        counts: dict[str, int] = {}
        for n, phrase in _COUNTED.findall(message):
            cause = FIT_ERROR_CAUSES.get(phrase.strip())
            if cause is not None:
                counts[cause] = counts.get(cause, 0) + int(n)
        if counts:
            return max(sorted(counts), key=lambda c: counts[c]), message
    return None


def _binding_conditions(verdict: PodVerdict) -> str | None:
    """Why the pod waits in PreBind (or failed there), from its allocated claims' devices, else None."""
    for _, claim in verdict.claims.claims:
        results = ((claim.allocation or {}).get("devices") or {}).get("results") or []
        statuses = {(d.get("driver"), d.get("pool"), d.get("device")): d
                    for d in ((claim.manifest.get("status") or {}).get("devices") or []) if isinstance(d, dict)}
        for r in results:
            if not isinstance(r, dict) or not (r.get("bindingConditions") or r.get("bindingFailureConditions")):
                continue
            entry = statuses.get((r.get("driver"), r.get("pool"), r.get("device"))) or {}
            true = {str(c.get("type")) for c in entry.get("conditions") or []
                    if isinstance(c, dict) and c.get("status") == "True"}
            device = f"{r.get('driver')}/{r.get('pool')}/{r.get('device')}"
            failed = sorted(true & {str(c) for c in r.get("bindingFailureConditions") or []})
            if failed:
                return (f"claim {claim.key}: device {device} reports binding failure {failed}: the scheduler "
                        "deallocates the claim and tries the pod again")
            left = [str(c) for c in r.get("bindingConditions") or [] if str(c) not in true]
            if left:
                return (f"claim {claim.key}: device {device} waits for binding conditions {left} "
                        "(DynamicResources PreBind)")
    return None
