"""What `dralab audit -o html` draws: the cluster as nodes × devices, each device in one state, grouped the way
a pod's constraints group them, with the pending pods beside it. Pure data; core/analysis/audit_html.py renders.

Devices are those of complete pools (what the audit counts, core/analysis/audit_pods.py `device_totals`), each
in one state, the first that holds:

- ``used``: allocated to a claim (shared devices with one share too) — ``snap.in_use``;
- ``stranded``: free, and no pending pod can use it: the audit's own judgement (`stranded_devices`: matched by
  no pending pod's unallocated claims, or reachable only from nodes every such pod fails a non-DRA filter on),
  so the page's stranded squares are the report's ``devices.stranded``, whatever else holds of them;
- ``tainted``: free, with a device taint (published in its ResourceSlice or added by a DeviceTaintRule of the
  dump) of effect NoSchedule or NoExecute: only a claim tolerating it can have it;
- ``blocked``: free, but a partition whose shared counters (KEP-4815 ``sharedCounters``) are taken by its
  allocated siblings: the allocator cannot pick it while they hold them;
- ``free``: the rest — a pending pod wants it, or no pod is pending.

Domains: a constraint's ``matchAttribute`` names the attribute whose value must be shared (an NVLink domain, a
PCIe root, a NUMA node); the attributes the dump's claims and templates name, most used first, then upstream's
standard ``resource.kubernetes.io/pcieRoot`` (k8s.io/dynamic-resource-allocation/deviceattribute), group a
node's devices: the first of them a device carries is its domain. A partition (a device consuming a counter set)
is drawn inside its parent, the counter set (a physical GPU, for MIG), in the parent's domain.

Large clusters: at most ``max_nodes`` nodes are drawn, the ones that matter first (a pending pod's closest node,
then nodes with stranded, tainted, free devices), the others summarised by count and state; at most
``max_devices`` devices per node, ``max_pods`` pending pods listed.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from ..dra.model import Device, DeviceID, Slice
from .audit_pods import PodVerdict, stranded_devices
from .audit_snapshot import Snapshot, node_ready
from .gpu_units import is_gpu_resource

__all__ = ["STANDARD_DOMAINS", "STATES", "Cell", "NodeBox", "Parent", "Picture", "picture"]

STATES = ("used", "free", "stranded", "tainted", "blocked")
STANDARD_DOMAINS = ("resource.kubernetes.io/pcieRoot",)
MAX_NODES = 48
MAX_DEVICES = 128
MAX_PODS = 200
_BLOCKING = ("NoSchedule", "NoExecute")
NOT_SELECTED = "no pending pod's claim selects it"
SELECTED_ELSEWHERE = "pending pods select it, but each fails readiness, selector, taint or resources where it is"
States = tuple[dict[DeviceID, str], dict[DeviceID, str]]  # device -> state; stranded device -> why


@dataclass
class Cell:
    """One device: its name, state, and the tooltip's text (driver/pool/device, state, attributes, taints)."""

    name: str
    state: str
    title: str


@dataclass
class Parent:
    """A counter set and the partitions consuming it (MIG-like), drawn as one box."""

    name: str
    cells: list[Cell] = field(default_factory=list)


@dataclass
class NodeBox:
    name: str
    status: str  # Ready | NotReady | cordoned
    taints: list[str]
    domains: list[tuple[str, list[Cell | Parent]]]  # (label, items); label "" for devices of no domain
    counts: Counter[str]
    hidden_devices: int = 0
    extended: list[str] = field(default_factory=list)  # "nvidia.com/gpu: 3 of 8 requested"
    pending: list[tuple[str, str]] = field(default_factory=list)  # (ns/name, reason): the pods it is closest for


@dataclass
class Picture:
    nodes: list[NodeBox]
    hidden_nodes: int
    hidden_counts: Counter[str]
    shared: list[NodeBox]  # devices not local to one node, one box per pool
    pods: list[dict[str, Any]]  # pending pods that do not fit, as the report has them (capped)
    hidden_pods: int
    domain_attributes: list[str]
    totals: Counter[str]
    hidden_pools: int = 0  # pools not local to one node beyond the cap


def picture(snap: Snapshot, verdicts: dict[str, PodVerdict], report: dict[str, Any], *,
            max_nodes: int = MAX_NODES, max_devices: int = MAX_DEVICES, max_pods: int = MAX_PODS) -> Picture:
    """The picture of an audited dump: ``snap`` and ``verdicts`` as `audit(..., view=...)` left them."""
    stranded = stranded_devices(snap, list(verdicts.values()))
    attrs = domain_attributes(snap)
    blocked = _blocked(snap)
    by_node: dict[str, list[tuple[Slice, Device]]] = {}
    shared: dict[str, list[tuple[Slice, Device]]] = {}
    for slc, d in snap.complete:
        local = slc.node_selection.node_name if slc.node_selection is not None else None
        if local and not slc.per_device_node_selection and local in snap.nodes:
            by_node.setdefault(local, []).append((slc, d))
        else:
            shared.setdefault(f"{slc.driver}/{slc.pool}", []).append((slc, d))
    pending = [p for p in report.get("pods") or [] if p.get("node") is None and p.get("reason")]
    closest: dict[str, list[tuple[str, str]]] = {}
    for p in pending:
        node = (p.get("closest") or {}).get("node")
        if node:
            closest.setdefault(str(node), []).append((f"{p['namespace']}/{p['name']}", str(p["reason"])))

    states = {d.id: _state(snap, d, blocked, stranded) for _, d in snap.complete}
    why = _why_stranded(snap, verdicts.values(), stranded)
    counts = {name: Counter(states[d.id] for _, d in by_node.get(name, [])) for name in snap.nodes}
    totals: Counter[str] = Counter(states.values())

    def rank(name: str) -> tuple[int, ...]:  # a pending pod's closest node first, then stranded, tainted, free
        c = counts[name]
        return (-len(closest.get(name, ())), -c["stranded"], -c["tainted"], -c["free"], -sum(c.values()),
                snap.node_index[name])

    chosen = sorted(sorted(snap.nodes, key=rank)[:max_nodes], key=lambda n: snap.node_index[n])
    shown = [_box(snap, name, by_node.get(name, []), attrs, (states, why), max_devices,
                  sorted(closest.get(name, ()))) for name in chosen]  # laid out only when drawn
    hidden: Counter[str] = Counter()
    for name in set(snap.nodes) - set(chosen):
        hidden.update(counts[name])
    pools = [_pool_box(name, devices, attrs, (states, why), max_devices)
             for name, devices in sorted(shared.items())[:max_nodes]]
    return Picture(shown, len(snap.nodes) - len(shown), hidden, pools, pending[:max_pods],
                   max(0, len(pending) - max_pods), attrs, totals, max(0, len(shared) - max_nodes))


def domain_attributes(snap: Snapshot) -> list[str]:
    """The attributes that define topology domains: the dump's ``matchAttribute`` names, most used first, then
    the standard ones."""
    uses: Counter[str] = Counter()
    for claim in snap.claims.values():
        uses.update(c.match_attribute for c in claim.constraints if c.match_attribute)
    for template in snap.inv.templates.values():
        devices = ((template.get("spec") or {}).get("spec") or {}).get("devices") or {}
        for c in devices.get("constraints") or []:
            if isinstance(c, dict) and isinstance(c.get("matchAttribute"), str):
                uses[c["matchAttribute"]] += 1
    named = sorted(uses, key=lambda a: (-uses[a], a))
    return named + [a for a in STANDARD_DOMAINS if a not in uses]


def _state(snap: Snapshot, d: Device, blocked: set[DeviceID], stranded: set[DeviceID]) -> str:
    if snap.in_use(d.id):
        return "used"
    if d.id in stranded:
        return "stranded"
    if any(t.effect in _BLOCKING for t in d.taints):
        return "tainted"
    if d.id in blocked:
        return "blocked"
    return "free"


def _blocked(snap: Snapshot) -> set[DeviceID]:
    """Free partitions some of whose counters are taken by allocated devices of the same counter set."""
    total: dict[tuple[str, str, str], dict[str, Fraction]] = {}
    for slc in snap.slices:  # with the devices, or (the 1.35 layout) in a slice of their own
        for name, counters in slc.shared_counters.items():
            total.setdefault((slc.driver, slc.pool, name), dict(counters))
    left = {k: dict(v) for k, v in total.items()}
    for _, d in snap.complete:
        if snap.in_use(d.id):
            for use in d.consumes_counters:
                room = left.get((d.id.driver, d.id.pool, use.counter_set))
                if room is not None:
                    for counter, amount in use.counters.items():
                        room[counter] = room.get(counter, Fraction(0)) - amount
    out: set[DeviceID] = set()
    for _, d in snap.complete:
        if snap.in_use(d.id):
            continue
        for use in d.consumes_counters:
            room = left.get((d.id.driver, d.id.pool, use.counter_set))
            if room is not None and any(room.get(c, Fraction(0)) < a for c, a in use.counters.items()):
                out.add(d.id)
    return out


def _why_stranded(snap: Snapshot, verdicts: Iterable[PodVerdict], stranded: set[DeviceID]) -> dict[DeviceID, str]:
    """Why each stranded device is: no pending pod's unallocated claim selects it (class and selectors), or some
    does but every such pod fails a non-DRA filter on the nodes that reach it (`stranded_devices`' two ways)."""
    subs = {(sub.device_class, tuple(sub.selectors)) for v in verdicts if v.node is None
            for _, c in v.claims.claims if c.allocation is None for r in c.requests for sub in r.choices()}
    out = {}
    for _, d in snap.complete:
        if d.id in stranded:
            wanted = any(snap.devices.device_matches(d, cls, sels) for cls, sels in subs)
            out[d.id] = (SELECTED_ELSEWHERE if wanted else NOT_SELECTED)
    return out


def _title(d: Device, state: str) -> str:
    attrs = ", ".join(f"{k}={a.value}" for k, a in sorted(d.attributes.items()))
    taints = "; taints: " + ", ".join(f"{t.key}={t.value}:{t.effect}" for t in d.taints) if d.taints else ""
    return f"{d.id.driver}/{d.id.pool}/{d.id.device}: {state}" + (f" ({attrs})" if attrs else "") + taints


def _domain_of(d: Device, attrs: list[str]) -> str:
    for a in attrs:
        found = d.attributes.get(a)
        if found is not None:
            return f"{a}={found.value}"
    return ""


def _layout(devices: list[tuple[Slice, Device]], attrs: list[str], states: States, max_devices: int
            ) -> tuple[list[tuple[str, list[Cell | Parent]]], Counter[str], int]:
    """Devices into domains, partitions into their parents; the counts by state of all, drawn or not."""
    counts: Counter[str] = Counter()
    domains: dict[str, list[Cell | Parent]] = {}
    parents: dict[tuple[str, str, str], Parent] = {}
    drawn = 0
    for _, d in devices:
        st = states[0][d.id]
        counts[st] += 1
        if drawn >= max_devices:
            continue
        drawn += 1
        reason = states[1].get(d.id)
        cell = Cell(d.id.device, st, _title(d, f"{st}: {reason}" if reason else st))
        if d.consumes_counters:
            key = (d.id.driver, d.id.pool, d.consumes_counters[0].counter_set)
            parent = parents.get(key)
            if parent is None:
                parent = parents[key] = Parent(key[2])
                domains.setdefault(_domain_of(d, attrs), []).append(parent)
            parent.cells.append(cell)
        else:
            domains.setdefault(_domain_of(d, attrs), []).append(cell)
    ordered = sorted(domains.items(), key=lambda kv: (kv[0] == "", kv[0]))
    return ordered, counts, len(devices) - drawn


def _box(snap: Snapshot, name: str, devices: list[tuple[Slice, Device]], attrs: list[str],
         states: States, max_devices: int, pending: list[tuple[str, str]]) -> NodeBox:
    node = snap.nodes[name]
    spec = node.manifest.get("spec") or {}
    status = "cordoned" if spec.get("unschedulable") else ("Ready" if node_ready(node) else "NotReady")
    taints = [f"{t.get('key')}={t.get('value') or ''}:{t.get('effect')}" for t in spec.get("taints") or []
              if isinstance(t, dict)]
    domains, counts, hidden = _layout(devices, attrs, states, max_devices)
    extended = [f"{r}: {snap.used[name].get(r, 0)} of {n} requested"
                for r, n in sorted(snap.allocatable[name].items()) if n and is_gpu_resource(r)]
    return NodeBox(name, status, taints, domains, counts, hidden, extended, pending)


def _pool_box(name: str, devices: list[tuple[Slice, Device]], attrs: list[str], states: States,
              max_devices: int) -> NodeBox:
    domains, counts, hidden = _layout(devices, attrs, states, max_devices)
    return NodeBox(name, "pool", [], domains, counts, hidden)
