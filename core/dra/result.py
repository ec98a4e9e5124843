"""The allocation result, as Kubernetes writes it in `ResourceClaim.status.allocation`.

Upstream (`Allocate`, 1.35, result assembly):

- `devices.results`: one entry per allocated device, in allocation order: `request` ("req" or
  "req/sub"), `driver`, `pool`, `device`; `adminAccess: true` for admin-access requests; the request's
  `tolerations`; the device's `bindingConditions` / `bindingFailureConditions`; for a device that allows
  multiple allocations a `shareID` and the `consumedCapacity` of every capacity of the device.
- `devices.config`: for each request (its chosen subrequest) the configs of its class once per class
  (`source: FromClass`; `requests` collects the requests that share that class), then the claim's
  configs that apply to every request or name a request or the chosen subrequest (`FromClaim`).
  Fixed behaviour: a claim config naming several requests is copied once (1.35 copies it once per
  request it names; fixed upstream for 1.37, "Fix duplicated configs reported in resourceclaim status").
- `nodeSelector`: `metadata.name In [node]` as soon as one device is node-local (`nodeName`, slice or
  per device) or `bindsToNode`; otherwise the requirements of the slices' single-term node selectors
  merged into one term; `allNodes` contributes nothing; no requirement at all: no `nodeSelector`.

`shareID` is a fresh random UUID upstream; dralab derives it from (claim uid or key, request, device,
position) with SHA-256 so that the same input always gives the same output.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from ..kube.quantity import format_quantity
from .model import Claim, Node, NodeSelection
from .prepare import AllocationError, ReqData

if TYPE_CHECKING:
    from .explain import Explanation
    from .search import Pick

Outcome = Literal["allocated", "unsatisfiable", "error"]


@dataclass
class AllocationOutcome:
    outcome: Outcome
    message: str
    allocations: dict[str, dict[str, Any]] = field(default_factory=dict)  # claim key -> status.allocation
    explanations: list[Explanation] = field(default_factory=list)
    stats: dict[str, int] = field(default_factory=dict)


# ---------------------------------------------------------------------- share IDs


def share_id(claim: Claim, request: str, device: str, position: int) -> str:
    """A UUID-formatted id (version 4 layout), derived rather than random."""
    seed = "\x00".join((claim.uid or claim.key, request, device, str(position))).encode()
    b = bytearray(hashlib.sha256(seed).digest()[:16])
    b[6] = (b[6] & 0x0F) | 0x40
    b[8] = (b[8] & 0x3F) | 0x80
    h = b.hex()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


# ---------------------------------------------------------------------- results


def device_result(claim: Claim, pick: Pick, position: int, binding: bool) -> dict[str, Any]:
    rd, cand = pick.rd, pick.cand
    dev = cand.device
    out: dict[str, Any] = {"request": rd.name, "driver": dev.id.driver, "pool": dev.id.pool, "device": dev.id.device}
    if rd.admin:
        out["adminAccess"] = True
    if rd.sub.tolerations:
        out["tolerations"] = [t.to_manifest() for t in rd.sub.tolerations]
    if binding and dev.binding_conditions:
        out["bindingConditions"] = list(dev.binding_conditions)
    if binding and dev.binding_failure_conditions:
        out["bindingFailureConditions"] = list(dev.binding_failure_conditions)
    if cand.multi:
        out["shareID"] = share_id(claim, rd.name, str(dev.id), position)
        if pick.consumed:
            out["consumedCapacity"] = {n: format_quantity(q) for n, q in pick.consumed.items()}
    return out


def configs(claim: Claim, chosen: list[ReqData]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    by_class: dict[str, tuple[int, int]] = {}
    for rd in chosen:
        cls = rd.device_class
        span = by_class.get(cls.name)
        if span is not None:
            for i in range(*span):
                out[i]["requests"].append(rd.name)
            continue
        start = len(out)
        for entry in cls.config:
            out.append({"source": "FromClass", "requests": [rd.name],
                        **{k: v for k, v in entry.items() if k != "requests"}})
        by_class[cls.name] = (start, len(out))
    names = {rd.base for rd in chosen} | {rd.name for rd in chosen}
    for entry in claim.config:
        wanted = list(entry.get("requests") or [])
        if wanted and not any(w in names for w in wanted):
            continue
        item: dict[str, Any] = {"source": "FromClaim"}
        if wanted:
            item["requests"] = wanted
        item.update({k: v for k, v in entry.items() if k != "requests"})
        out.append(item)
    return out


def _same_requirement(a: dict[str, Any], b: dict[str, Any]) -> bool:
    return (a.get("key") == b.get("key") and a.get("operator") == b.get("operator")
            and sorted(a.get("values") or []) == sorted(b.get("values") or []))


def node_selector(picks: list[Pick], node: Node) -> dict[str, Any] | None:
    exprs: list[dict[str, Any]] = []
    fields: list[dict[str, Any]] = []
    for pick in picks:
        slc, dev = pick.cand.slice, pick.cand.device
        sel: NodeSelection | None = dev.node_selection if slc.per_device_node_selection else slc.node_selection
        if (sel is not None and sel.node_name) or dev.binds_to_node:
            return {"nodeSelectorTerms": [{"matchFields": [
                {"key": "metadata.name", "operator": "In", "values": [node.name]}]}]}
        if sel is None or sel.node_selector is None:
            continue
        terms = sel.node_selector.get("nodeSelectorTerms") or []
        if len(terms) > 1:
            raise AllocationError(
                f"create NodeSelector: unsupported ResourceSlice.NodeSelector with {len(terms)} terms")
        if not terms:
            continue
        for src, dst in ((terms[0].get("matchExpressions") or [], exprs), (terms[0].get("matchFields") or [], fields)):
            for req in src:
                if not any(_same_requirement(req, have) for have in dst):
                    dst.append(dict(req))
    if not exprs and not fields:
        return None
    term: dict[str, Any] = {}
    if exprs:
        term["matchExpressions"] = exprs
    if fields:
        term["matchFields"] = fields
    return {"nodeSelectorTerms": [term]}


def allocation(claim: Claim, picks: list[Pick], chosen: list[ReqData], node: Node, binding: bool) -> dict[str, Any]:
    devices: dict[str, Any] = {"results": [device_result(claim, p, i, binding) for i, p in enumerate(picks)]}
    cfg = configs(claim, chosen)
    if cfg:
        devices["config"] = cfg
    out: dict[str, Any] = {"devices": devices}
    selector = node_selector(picks, node)
    if selector is not None:
        out["nodeSelector"] = selector
    return out
