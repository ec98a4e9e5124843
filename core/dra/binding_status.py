"""Device binding conditions (KEP-5007) read from a ResourceClaim as the API server holds it: which allocated
devices still wait for a binding condition, or have a binding failure condition, in `status.devices[]`.

What `dralab audit` and `dralab schedule` say of a dumped pod that kube-scheduler holds in PreBind: its claims
are allocated and reserved for it, it has no node, and a device's bindingConditions are not all True.
"""

from __future__ import annotations

from typing import Any

from .model import Claim


def _conditions(claim: Claim) -> dict[tuple[str, str, str], dict[str, str]]:
    """(driver, pool, device) -> condition type -> status, from status.devices[] (shareID aside)."""
    out: dict[tuple[str, str, str], dict[str, str]] = {}
    for entry in ((claim.manifest.get("status") or {}).get("devices") or []):
        if not isinstance(entry, dict):
            continue
        ref = (str(entry.get("driver")), str(entry.get("pool")), str(entry.get("device")))
        for cond in entry.get("conditions") or []:
            if isinstance(cond, dict):
                out.setdefault(ref, {})[str(cond.get("type"))] = str(cond.get("status"))
    return out


def unmet_binding_conditions(claim: Claim) -> list[str]:
    """What an allocated claim's devices still wait for: "<device>: <condition>" per binding condition not
    True, "<device>: <condition>=True (failed)" per failure condition True; empty when bound or not allocated."""
    results: list[dict[str, Any]] = ((claim.allocation or {}).get("devices") or {}).get("results") or []
    have = _conditions(claim) if any(r.get("bindingConditions") for r in results) else {}
    out: list[str] = []
    for r in results:
        conds = have.get((str(r.get("driver")), str(r.get("pool")), str(r.get("device"))), {})
        out += [f"{r.get('device')}: {c}=True (failed)" for c in r.get("bindingFailureConditions") or []
                if conds.get(c) == "True"]
        out += [f"{r.get('device')}: {c}" for c in r.get("bindingConditions") or [] if conds.get(c) != "True"]
    return out


def waiting_for_binding(pod_name: str, claims: list[tuple[str, Claim]]) -> list[str]:
    """The unmet binding conditions of the pod's claims that are reserved for it (kube-scheduler's PreBind
    wait); empty when it is not waiting there."""
    out: list[str] = []
    for _, claim in claims:
        if claim.allocation is not None and any(r.get("name") == pod_name for r in claim.reserved_for):
            out += [f"{claim.name}/{u}" for u in unmet_binding_conditions(claim)]
    return out
