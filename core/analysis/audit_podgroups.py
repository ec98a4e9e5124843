"""1.36/1.37 PodGroups (`scheduling.k8s.io` v1alpha2/v1alpha3/v1beta1, pods joined by
`spec.schedulingGroup.podGroupName`) in `dralab audit` and `dralab schedule` over a cluster dump.

The audit's placer places each PodGroup the way kube-scheduler's PodGroup cycle does
(core/scheduler/plugins/pod_group.py, KEP-4671 "Workload Scheduling Cycle"):

- PreEnqueue: the PodGroup must exist (`missing`) and at least `minCount` of its pods must exist, pending or
  running (`min-count`); then scheduling gates hold their own pods (`gated`); 1.37 (beta, KEP-5710) rejects a
  group whose pods' priority differs from the PodGroup's (`priority-mismatch`).
- The group's pending pods are placed one by one in queue order with the normal filters; a `gang` keeps them
  only if `bound + placed >= minCount` (all-or-nothing), a `basic` group keeps whatever fits (binding takes
  precedence; with a topology constraint at least one pod must fit, KEP-5732).
- Topology (KEP-5732): with `schedulingConstraints.topology[0].key` every value of that node label among the
  Ready nodes is a domain (only the domain of the group's bound pods, if any); the group is tried in each and the
  feasible domain with the most pods, then the tightest fit (least of the requested resources left free), wins.
  The scheduler breaks remaining ties with its seeded random source; the audit takes the first by name.
  A dump's PodGroup can only carry the field when the gate was on (the loader refuses it otherwise).
- Group claims (KEP-5729): a PodGroup's `spec.resourceClaims` entry is one claim for the whole group; a pod
  uses it when its own `spec.resourceClaims` entry matches exactly (same name, same claim or template name).
  The claim is the named ResourceClaim, or the one `status.resourceClaimStatuses` names, or (not generated yet)
  the one the resourceclaim controller would make from the template, named `<podgroup>-<entry>`. The first pod
  placed allocates it; the others must reach the same devices.
- CompositePodGroups (KEP-6012): a root composite is placed as one unit: its child PodGroups and composites
  (`spec.parentCompositePodGroupName`), each all-or-nothing, and the whole tree is rolled back unless at least
  `minGroupCount` children are satisfied.

Why a group is pending uses the words of core/analysis/podgroups.py (`explain`), in the order in which the
scheduler's cycle meets them (so that `explain` of the run would say the same): `missing`, `min-count`,
`gated`, `priority-mismatch`, `preemption` (pods of the group nominated to nodes where victims are
terminating or carry DisruptionTarget), then what the trial placement found: `group-claim` (the shared claim
cannot be allocated on any node, checked before `topology` because no domain can help then), `topology` (no
domain has room for `minCount`, though the cluster as a whole does), and `capacity` (or the pods' own cause,
e.g. `resources`, `taint`: fewer than `minCount` fit anywhere).
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..dra.api import ManifestError, claim_from_template, scheduling_objects
from ..kube.podgroups import COMPOSITE_POD_GROUP_KIND, POD_GROUP_KIND, group_min_count, pod_group_name, topology_key
from ..kube.resources import pod_requests
from .audit_pods import Placer, PodVerdict, gated, pod_names, queue_order
from .audit_snapshot import is_pending, node_ready, pod_key
from .podgroups import SCHEDULED as PG_SCHEDULED

if TYPE_CHECKING:
    from ..dra.model import Inventory
    from .audit_snapshot import Snapshot

__all__ = ["Group", "GroupIndex", "Outcome", "conditions"]

_DONE = ("Succeeded", "Failed")
SCHEDULED = (*PG_SCHEDULED, "CompositePodGroupInitiallyScheduled")


def conditions(obj: dict[str, Any] | None) -> list[dict[str, Any]]:
    """The object's `status.conditions` as the dump has them (the scheduler's own word)."""
    return [dict(c) for c in ((obj or {}).get("status") or {}).get("conditions") or [] if isinstance(c, dict)]


@dataclass
class Group:
    """A PodGroup (or a name pods point to that has none) with its live pods."""

    key: str  # <ns>/<name>
    obj: dict[str, Any] | None  # the hub PodGroup; None: missing
    pods: list[dict[str, Any]]  # not Succeeded/Failed
    pending: list[dict[str, Any]]  # in queue order
    claims: dict[str, dict[str, Any]] = field(default_factory=dict)  # entry name -> group entry
    claim_names: dict[str, str] = field(default_factory=dict)  # entry name -> ResourceClaim name

    @property
    def min_count(self) -> int | None:
        return group_min_count(self.obj) if self.obj is not None else None

    @property
    def topology(self) -> str | None:
        return topology_key(self.obj) if self.obj is not None else None

    @property
    def parent(self) -> str | None:
        name = ((self.obj or {}).get("spec") or {}).get("parentCompositePodGroupName")
        return f"{self.key.split('/', 1)[0]}/{name}" if name else None

    @property
    def bound(self) -> list[dict[str, Any]]:
        return [p for p in self.pods if not is_pending(p)]

    def policy(self) -> str:
        """As core/analysis/podgroups.py `policy_text` writes it."""
        if self.obj is None:
            return "unknown (no PodGroup)"
        text = f"gang minCount {self.min_count}" if self.min_count is not None else "basic"
        return f"{text}, one {self.topology} domain" if self.topology else text


@dataclass
class Outcome:
    """What placing a group found: ``kind`` None when it can be placed (then ``bindings``), else what is in
    the way (podgroups.py's words), ``why`` a sentence with the evidence, ``evidence`` the numbers."""

    group: str
    kind: str | None
    why: str
    evidence: dict[str, Any] = field(default_factory=dict)
    bindings: list[dict[str, Any]] = field(default_factory=list)
    domain: str | None = None
    pod_reason: str | None = None  # the reason given to members that fit on their own
    nodes: dict[str, str] = field(default_factory=dict)  # pod key -> node it took in the closest trial
    missing: list[str] = field(default_factory=list)  # what would unblock it (a member's closest.missing)


@dataclass
class _Trial:
    domain: str | None
    bindings: list[dict[str, Any]]
    left: dict[str, PodVerdict]
    leftover: float = 0.0


class GroupIndex:
    """The dump's PodGroups with pending pods, and CompositePodGroups. Building it puts each group claim that
    does not exist yet (a template entry) into ``snap.claims`` unallocated, so that pods share it."""

    def __init__(self, inv: Inventory, snap: Snapshot, version: str | None = None) -> None:
        self.snap = snap
        self.version = version
        self.objects = scheduling_objects(inv, POD_GROUP_KIND)
        self.composites = scheduling_objects(inv, COMPOSITE_POD_GROUP_KIND)
        members: dict[str, list[dict[str, Any]]] = {}
        for pod in inv.pods.values():
            name = pod_group_name(pod)
            if name is not None and (pod.get("status") or {}).get("phase") not in _DONE:
                members.setdefault(f"{pod_names(pod)[0]}/{name}", []).append(pod)
        self.groups: dict[str, Group] = {}
        for key, pods in sorted(members.items()):
            group = Group(key, self.objects.get(key), pods, queue_order(p for p in pods if is_pending(p)))
            self._group_claims(inv, group)
            self.groups[key] = group
        self.of_pod = {pod_key(p): g for g in self.groups.values() for p in g.pending}
        self._below: set[str] | None = None

    # ------------------------------------------------------------------ members as the scheduler sees them

    def _group_claims(self, inv: Inventory, group: Group) -> None:
        if group.obj is None:
            return
        ns, name = group.key.split("/", 1)
        statuses = {str(s.get("name")): s.get("resourceClaimName")
                    for s in (group.obj.get("status") or {}).get("resourceClaimStatuses") or [] if isinstance(s, dict)}
        for entry in (group.obj.get("spec") or {}).get("resourceClaims") or []:
            entry_name = str(entry["name"])
            group.claims[entry_name] = entry
            claim_name = entry.get("resourceClaimName") or statuses.get(entry_name) or f"{name}-{entry_name}"
            group.claim_names[entry_name] = str(claim_name)
            key = f"{ns}/{claim_name}"
            if key in self.snap.claims or entry.get("resourceClaimName"):
                continue  # exists, or missing (resolve_claims names it)
            template = inv.templates.get(f"{ns}/{entry.get('resourceClaimTemplateName')}")
            if template is None:
                continue  # the pods' own entries name the missing template
            try:
                self.snap.claims[key] = claim_from_template(template, str(claim_name))
            except ManifestError:
                continue

    def member(self, pod: dict[str, Any], domain: tuple[str, str] | None = None) -> dict[str, Any]:
        """The pod as its group's cycle tries it: entries matching a group claim point to that one claim, and
        with ``domain`` (key, value) it may only use nodes of that topology domain. A new object."""
        group = self.of_pod.get(pod_key(pod))
        if group is None or (not group.claims and domain is None):
            return pod
        spec = dict(pod.get("spec") or {})
        refs = []
        for ref in spec.get("resourceClaims") or []:
            entry = group.claims.get(str(ref.get("name")))
            shared = entry is not None and all(ref.get(k) == entry.get(k) for k in
                                               ("resourceClaimName", "resourceClaimTemplateName"))
            refs.append({"name": ref["name"], "resourceClaimName": group.claim_names[ref["name"]]} if shared else ref)
        if refs:
            spec["resourceClaims"] = refs
        if domain is not None:
            spec["nodeSelector"] = {**(spec.get("nodeSelector") or {}), domain[0]: domain[1]}
        return {**pod, "spec": spec}

    # ------------------------------------------------------------------ before any node is tried

    def held(self, group: Group) -> Outcome | None:
        """PreEnqueue and the checks before the cycle, in the scheduler's order (schedule_group: PreEnqueue's
        missing and min-count for every pod, then scheduling gates, then the priority check): missing, min-count,
        gated, priority-mismatch, then preemption under way."""
        n = len(group.pending)
        if group.obj is None:
            return Outcome(group.key, "missing", f"PodGroup {group.key} does not exist; its {n} pods wait for it",
                           {"missing": f"PodGroup {group.key}"}, pod_reason="missing")
        parent = group.parent
        if parent is not None and parent not in self.composites:
            return Outcome(group.key, "missing", f"CompositePodGroup {parent} does not exist; the {n} pods of "
                           f"PodGroup {group.key} wait for it", {"missing": f"CompositePodGroup {parent}"},
                           pod_reason="missing")
        need = group.min_count
        if need is not None and len(group.pods) < need:
            return Outcome(group.key, "min-count",
                           "waiting for minCount pods from a gang to appear in scheduling queue "
                           f"({len(group.pods)} of minCount {need} pods of PodGroup {group.key} exist)",
                           {"pods": len(group.pods), "minCount": need}, pod_reason="gang",
                           missing=[f"{need - len(group.pods)} more pod(s) of PodGroup {group.key}"])
        gated_pods = [p for p in group.pending if gated(p) is not None]
        if gated_pods and len(gated_pods) == len(group.pending):
            return Outcome(group.key, "gated", f"{len(gated_pods)} of its pods carry scheduling gates",
                           {"gated": [pod_key(p) for p in gated_pods]}, pod_reason="gated")
        priority = (group.obj.get("spec") or {}).get("priority")
        if self.version == "1.37" and priority is not None:
            odd = [pod_key(p) for p in group.pending if int((p.get("spec") or {}).get("priority") or 0) != priority]
            if odd:
                return Outcome(group.key, "priority-mismatch",
                               f"pods of pod group {group.key} must have its priority {priority}; {len(odd)} do not "
                               f"(e.g. {odd[0]})", {"priority": priority, "pods": odd}, pod_reason="gang")
        return self._preemption(group)

    def _preemption(self, group: Group) -> Outcome | None:
        """Workload-aware preemption under way: pods of the group nominated to nodes (status.nominatedNodeName)
        where victims are still there, terminating (deletionTimestamp) or marked DisruptionTarget."""
        nominated = {pod_key(p): str((p.get("status") or {}).get("nominatedNodeName"))
                     for p in group.pending if (p.get("status") or {}).get("nominatedNodeName")}
        if not nominated:
            return None
        nodes = set(nominated.values())
        victims = sorted(pod_key(p) for p in self.snap.inv.pods.values()
                         if (p.get("spec") or {}).get("nodeName") in nodes
                         and (p.get("status") or {}).get("phase") not in _DONE and _victim(p))
        if not victims:
            return None
        return Outcome(group.key, "preemption", f'pod group "{group.key}" is waiting for {len(victims)} preemption '
                       f"victims to terminate ({', '.join(victims)})",
                       {"nominated": dict(sorted(nominated.items())), "victims": victims}, pod_reason="preemption")

    # ------------------------------------------------------------------ the trial placement

    def domains(self, group: Group) -> list[str | None] | str:
        """As PodGroupCycle.domains: [None] without topology, else the label's values among Ready nodes
        (only that of the bound pods, if any); a string says why there is none."""
        key = group.topology
        if key is None:
            return [None]
        snap = self.snap
        values = {n.labels[key] for n in snap.nodes.values() if node_ready(n) and key in n.labels}
        held = {snap.nodes[str(p["spec"]["nodeName"])].labels.get(key) for p in group.bound
                if p["spec"]["nodeName"] in snap.nodes}
        if held:
            if len(held) > 1:
                return f"the pod group's running pods span {len(held)} values of {key}"
            values &= {v for v in held if v is not None}
        if not values:
            return f"no Ready node has the label {key}"
        out: list[str | None] = [*sorted(values)]
        return out

    def _trial(self, placer: Placer, group: Group, domain: str | None) -> _Trial:
        """Place the group's pending pods one by one (inside ``domain``); the caller rolls back or keeps."""
        where = (str(group.topology), domain) if domain is not None else None
        bindings: list[dict[str, Any]] = []
        left: dict[str, PodVerdict] = {}
        for pod in group.pending:
            if (held_back := gated(pod)) is not None:  # SchedulingGates still holds its own pods back
                left[pod_key(pod)] = held_back
                continue
            member = self.member(pod, where)
            verdict = placer.evaluate(member)
            if verdict.reason is None:
                binding = placer.bind(member, verdict)
                bindings.append({**binding, "pod_group": group.key})
            else:
                left[pod_key(pod)] = verdict
        return _Trial(domain, bindings, left, self._leftover(group, domain))

    def _leftover(self, group: Group, domain: str | None) -> float:
        """The share of the requested resources left free in the domain (less is a tighter fit)."""
        if domain is None:
            return 0.0
        snap = self.snap
        resources = {r for p in group.pending for r in pod_requests(p)}
        free = total = 0.0
        for name, node in snap.nodes.items():
            if node.labels.get(str(group.topology)) != domain:
                continue
            for r in resources:
                cap = snap.allocatable[name].get(r, 0)
                if cap:
                    free += max(cap - snap.used[name].get(r, 0), 0) / cap
                    total += 1
        return free / total if total else 0.0

    def need(self, group: Group) -> int:
        """Pods that must fit at once: minCount minus the bound ones; basic: 1 with topology, else 0."""
        if group.min_count is None:
            return 1 if group.topology else 0
        return group.min_count - len(group.bound)

    def place(self, placer: Placer, group: Group) -> Outcome:
        """Place a group that passed `held`: its bindings applied on the snapshot when it fits, nothing
        applied when it does not (then the Outcome says why)."""
        snap = self.snap
        need = self.need(group)
        domains = self.domains(group)
        if isinstance(domains, str):
            return Outcome(group.key, "topology", f"no placement for the pod group: {domains}",
                           {"key": group.topology}, pod_reason="topology")
        trials: list[_Trial] = []
        for domain in domains:
            cp = snap.checkpoint()
            trials.append(self._trial(placer, group, domain))
            snap.rollback(cp)
        feasible = [t for t in trials if len(t.bindings) >= need]
        if feasible:
            best = max(feasible, key=lambda t: (len(t.bindings), -t.leftover))  # first among equals (by name)
            cp = snap.checkpoint()
            placed = self._trial(placer, group, best.domain)
            snap.release(cp)
            return Outcome(group.key, None, f"{len(placed.bindings)} pods fit" +
                           (f" in {group.topology}={best.domain}" if best.domain is not None else ""),
                           bindings=placed.bindings, domain=best.domain)
        return self._why(placer, group, trials, need)

    def _why(self, placer: Placer, group: Group, trials: list[_Trial], need: int) -> Outcome:
        """What is in the way of a group no placement fits: group-claim, topology, or capacity/own cause."""
        closest = max(trials, key=lambda t: len(t.bindings))
        nodes = {f"{b['namespace']}/{b['name']}": b["node"] for b in closest.bindings}
        room: dict[str, Any] = {"room": len(closest.bindings) + len(group.bound), "minCount": group.min_count,
                                "bound": len(group.bound)}
        gated_pods = sorted(k for k, v in closest.left.items() if v.reason == "gated")
        if gated_pods:
            return Outcome(group.key, "gated", f"{len(gated_pods)} of its pods carry scheduling gates",
                           {"gated": gated_pods, **room}, pod_reason="gang", nodes=nodes)
        if group.claims:
            probe = self._claim_probe(placer, group)
            if probe is not None:
                why = f"the pod group's shared claim cannot be allocated: {probe.message}"
                return Outcome(group.key, "group-claim", why,
                               {"claims": dict(sorted(group.claim_names.items())), "explanation": probe.message,
                                "closest": probe.closest}, pod_reason=probe.reason, nodes=nodes)
        if group.topology is not None:
            snap = self.snap
            cp = snap.checkpoint()
            anywhere = self._trial(placer, group, None)
            snap.rollback(cp)
            key = group.topology
            domains = [{"domain": t.domain, "room": len(t.bindings) + len(group.bound)} for t in trials]
            evidence = {"key": key, "domains": domains, "closest": closest.domain, **room,
                        "cluster_room": len(anywhere.bindings) + len(group.bound)}
            if len(anywhere.bindings) >= need:
                why = (f"no {key} domain fits the pod group ({len(trials)} tried; at most {len(closest.bindings)} "
                       f"of {need} pods fit, in {closest.domain}; the cluster as a whole has room for "
                       f"{len(anywhere.bindings)})")
                return Outcome(group.key, "topology", why, evidence, pod_reason="topology", nodes=nodes)
            room = evidence
        own = Counter(v.reason for v in closest.left.values() if v.reason is not None)
        fits_alone = [k for k, v in closest.left.items() if self._alone(placer, group, k) is None]
        kind = "capacity" if fits_alone or not own else max(own.items(), key=lambda kv: (kv[1], kv[0]))[0]
        if kind == "capacity":
            why = (f"room for {len(closest.bindings)} of the {need} pods PodGroup {group.key} needs "
                   f"(minCount {group.min_count}, {len(group.bound)} bound)")
        else:
            why = next(v.message for v in closest.left.values() if v.reason == kind)
        return Outcome(group.key, kind, why, room, pod_reason="gang", nodes=nodes)

    def _alone(self, placer: Placer, group: Group, key: str) -> str | None:
        pod = next(p for p in group.pending if pod_key(p) == key)
        return placer.evaluate(self.member(pod)).reason

    def _claim_probe(self, placer: Placer, group: Group) -> PodVerdict | None:
        """The verdict of a pod that asks for nothing but the group's claims (the first member's tolerations),
        when it fits nowhere: the allocator's explanation of why the shared claim cannot be allocated."""
        first = group.pending[0]
        spec = first.get("spec") or {}
        refs = [r for r in spec.get("resourceClaims") or [] if str(r.get("name")) in group.claims]
        if not refs:
            return None
        probe = {"metadata": first.get("metadata") or {},
                 "spec": {"tolerations": spec.get("tolerations") or [], "resourceClaims": refs,
                          "containers": [{"name": "probe"}]}}
        verdict = placer.evaluate(self.member(probe) if pod_key(probe) in self.of_pod else probe)
        return verdict if verdict.reason is not None else None

    # ------------------------------------------------------------------ composites

    def children(self, composite: str) -> tuple[list[Group], list[str]]:
        """The PodGroups (with pending pods) and composites whose parent is ``composite``."""
        ns = composite.split("/", 1)[0]
        groups = [g for g in self.groups.values() if g.parent == composite and g.pending]
        subs = sorted(k for k, c in self.composites.items()
                      if k.startswith(f"{ns}/") and (c.get("spec") or {}).get("parentCompositePodGroupName")
                      == composite.split("/", 1)[1])
        return groups, subs

    def child_groups(self, composite: str) -> tuple[int, int]:
        """How many PodGroups and composites name ``composite`` as their parent, and how many of those with no
        pending pod are scheduled already (their InitiallyScheduled/Scheduled condition True)."""
        ns, name = composite.split("/", 1)
        total = done = 0
        for k, o in [*self.objects.items(), *self.composites.items()]:
            if k.startswith(f"{ns}/") and (o.get("spec") or {}).get("parentCompositePodGroupName") == name:
                total += 1
                pending = self.groups[k].pending if k in self.groups else []
                done += not pending and k not in self._pending_composites() and _scheduled(o)
        return total, done

    def _pending_composites(self) -> set[str]:
        """Composites with a pending PodGroup somewhere below them."""
        if self._below is not None:
            return self._below
        out: set[str] = set()
        for group in self.groups.values():
            key, seen = group.parent if group.pending else None, set()
            while key is not None and key in self.composites and key not in seen:
                seen.add(key)
                out.add(key)
                parent = (self.composites[key].get("spec") or {}).get("parentCompositePodGroupName")
                key = f"{key.split('/', 1)[0]}/{parent}" if parent else None
        self._below = out
        return out

    def root(self, group: Group) -> str | None:
        """The root composite above ``group``, or None (also when a parent is missing: `held` says so)."""
        key, seen = group.parent, set()
        while key is not None and key in self.composites and key not in seen:
            seen.add(key)
            parent = (self.composites[key].get("spec") or {}).get("parentCompositePodGroupName")
            if parent is None:
                return key
            key = f"{key.split('/', 1)[0]}/{parent}"
        return None

    def place_composite(self, placer: Placer, key: str) -> tuple[bool, list[Outcome]]:
        """Place a composite's tree all-or-nothing: (satisfied, the Outcome of every pending PodGroup below)."""
        snap = self.snap
        cp = snap.checkpoint()
        groups, subs = self.children(key)
        subs = [s for s in subs if s in self._pending_composites()]
        outcomes: list[Outcome] = []
        total, satisfied = self.child_groups(key)
        for group in groups:
            outcome = self.held(group) or self.place(placer, group)
            outcomes.append(outcome)
            satisfied += outcome.kind is None
        for sub in subs:
            ok, below = self.place_composite(placer, sub)
            outcomes += below
            satisfied += ok
        spec = self.composites[key].get("spec") or {}
        wanted = int(((spec.get("schedulingPolicy") or {}).get("gang") or {}).get("minGroupCount") or 0)
        if satisfied >= wanted:
            snap.release(cp)
            return True, outcomes
        snap.rollback(cp)
        kind, what = ("min-count", f"{total} child groups exist") if total < wanted else \
            ("capacity", f"{satisfied} of them fit at once")
        why = f"CompositePodGroup {key} needs minGroupCount {wanted} child groups; {what}"
        out = []
        for o in outcomes:
            if o.kind is None:
                o = dataclasses.replace(o, kind=kind, why=why, bindings=[], pod_reason="gang",
                                        evidence={"composite": key, "minGroupCount": wanted, "satisfied": satisfied,
                                                  "children": total},
                                        nodes={f"{b['namespace']}/{b['name']}": b["node"] for b in o.bindings})
            out.append(o)
        return False, out


def _scheduled(obj: dict[str, Any]) -> bool:
    return any(c.get("type") in SCHEDULED and c.get("status") == "True" for c in conditions(obj))


def _victim(pod: dict[str, Any]) -> bool:
    """A pod on its way out: terminating, or marked DisruptionTarget (the scheduler chose it as a victim)."""
    if (pod.get("metadata") or {}).get("deletionTimestamp"):
        return True
    return any(isinstance(c, dict) and c.get("type") == "DisruptionTarget" and c.get("status") == "True"
               for c in (pod.get("status") or {}).get("conditions") or [])
