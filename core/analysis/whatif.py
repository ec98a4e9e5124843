"""`dralab whatif`: what each autoscaler policy would add for a real cluster's pending pods, and whether
they would then run.

The dump is folded into a :class:`~dralab.core.state.cluster.ClusterState` (:mod:`dralab.core.analysis.dump`) and
the real reactors run on it, so the answer is the one dralab's simulation would give, not a separate
model of it:

1. the claim controller creates the claims of pods whose templates have none yet, and the scheduler
   runs once: it binds the pods that fit the cluster as it is (``fits_now``) and marks the others
   ``PodScheduled=False/Unschedulable``, the only pods cluster-autoscaler acts on;
2. for each policy, from that same state, the autoscaler loops as it would over successive scan
   intervals: its scale-up is materialised at once as Ready nodes of the group with their
   ResourceSlices (the question is what it adds and whether the pods fit, not how long the cloud
   takes), then the claim controller and the scheduler run to a fixpoint; until the autoscaler asks
   for nothing more or :data:`MAX_LOOPS` loops have passed.

Time advances by the scan interval (at least the scheduler's maximum backoff) per loop, so every pod
the scheduler parked is tried again after each scale-up, as the real queue would once its backoff ends.
The nodes of the dump belong to no node group: a group's ``max`` bounds what it may add here.

Pure: no I/O, no clock; the seed fixes every random choice (:func:`dralab.core.engine.contract.decision_rng`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..autoscaler.provisioning.expanders import EXPANDERS
from ..autoscaler.reactor import Autoscaler
from ..autoscaler.simulation.capacity import POLICIES
from ..cluster.nodes import node_from_template, node_name, publish_slices, zone_of
from ..controllers.claims import ClaimController
from ..dra.model import Inventory
from ..engine.contract import Reactor, decide
from ..kube.fields import FieldError, check_fields, sanitize, type_name
from ..kube.versions import Profile, profile_from_config
from ..log.events import AnyEvent, NodeCreated, NodeGroupDefined, NodeReady, Record, ScaleUpRequested
from ..scenario.gates import check_group
from ..scenario.load import NodeGroup, _node_groups
from ..scheduler.config import default_config
from ..scheduler.queue import MAX_BACKOFF_MS
from ..scheduler.reactor import Scheduler
from ..state.cluster import ClusterState
from .audit import not_modelled
from .dump import dump_record

__all__ = ["EXPANDERS", "MAX_LOOPS", "POLICIES", "parse_node_groups", "whatif"]

MAX_LOOPS = 20  # autoscaler loops per policy: ample for one scale-up per group and a retry
MAX_SETTLE_ROUNDS = 50  # claim controller + scheduler rounds at one instant before giving up on a fixpoint
SOURCE = "whatif"
_PREFIX = "spec.nodeGroups"  # where the scenario's parser says the groups are


def parse_node_groups(data: object, profile: Profile | None = None) -> list[NodeGroup]:
    """Node groups from a loaded YAML document: a list of ``spec.nodeGroups[]`` entries, or a map
    ``{nodeGroups: [...]}``. Checked by the scenario's own parser (and, given the dump's release `profile`,
    its ResourceSlice templates' gated fields, core/scenario/gates.py); a :class:`FieldError` names the field
    from the top of this document (``nodeGroups[1].template.status.allocatable.cpu``, or ``[1]...``)."""
    if data is None:
        raise FieldError("", "the file is empty; expected a list of node groups or a map with `nodeGroups`")
    doc = sanitize(data)
    if isinstance(doc, dict):
        check_fields(doc, "", ("nodeGroups",), required=("nodeGroups",))
        items, prefix = doc["nodeGroups"], "nodeGroups"
    elif isinstance(doc, list):
        items, prefix = doc, ""
    else:
        raise FieldError("", f"expected a list of node groups or a map with `nodeGroups`, got {type_name(doc)}")
    try:
        groups = _node_groups(items)
        if profile is not None:
            for g, item in enumerate(items):
                check_group(item, f"{_PREFIX}[{g}]", profile)
        return groups
    except FieldError as e:
        rest = e.path[len(_PREFIX):] if e.path.startswith(_PREFIX) else e.path
        path = prefix + rest if prefix or rest.startswith("[") else rest.lstrip(".")
        raise FieldError(path, e.message) from None


def _groups_record(groups: Sequence[NodeGroup]) -> Record:
    events: tuple[AnyEvent, ...] = tuple(
        NodeGroupDefined(name=g.name, min=g.min, max=g.max, provision_delay_ms=g.provision_delay_ms,
                         template=g.template, cost_per_hour=g.cost_per_hour, resource_slices=tuple(g.resource_slices),
                         zones=tuple(g.zones))  # the cloud's other settings are about timing and failures
        for g in groups)
    return Record(id=f"{SOURCE}/node-groups", source=SOURCE, view=-1, t=0, events=events)


class _Log:
    """The log of one what-if run, folded as it grows; only the fold is kept."""

    def __init__(self, records: Sequence[Record], seed: int) -> None:
        self.state = ClusterState()
        self.seed = seed
        for record in records:
            self.append(record)

    def append(self, record: Record) -> None:
        self.state.apply(self.state.offset + 1, record)

    def decide(self, reactor: Reactor, now: int) -> Record | None:
        record, _ = decide(reactor, self.state, now, self.seed)
        if record is not None:
            self.append(record)
        return record

    def settle(self, now: int, claims: ClaimController, scheduler: Scheduler) -> list[Record]:
        """Claim controller, then scheduler, until neither has anything to do at `now`."""
        out: list[Record] = []
        for _ in range(MAX_SETTLE_ROUNDS):
            made = [r for r in (self.decide(claims, now), self.decide(scheduler, now)) if r is not None]
            if not made:
                break
            out += made
        return out

    def add_nodes(self, request: ScaleUpRequested, now: int) -> list[str]:
        """The cloud and the node's drivers, at once: the requested nodes exist, are Ready and have
        published their slices. Names are the lifecycle's, skipping any a dump node already has."""
        view = self.state
        group = view.node_groups[request.group]
        events: list[AnyEvent] = []
        names: list[str] = []
        i = group.created
        while len(names) < request.delta:
            name, zone = node_name(group.name, i), zone_of(group.zones, i)
            i += 1
            if name in view.nodes:
                continue
            names.append(name)
            node = node_from_template(group, name, zone)
            events.append(NodeCreated(name=name, group=group.name, node=node, ready_at=now))
            events.append(NodeReady(name=name))
            events += publish_slices(view, group.name, name)
        self.append(Record(id=f"{SOURCE}/nodes@{view.offset}", source=SOURCE, view=-1, t=now, events=tuple(events)))
        return names


@dataclass(frozen=True)
class _Base:
    records: tuple[Record, ...]  # the dump, the node groups, the first settle
    pending: tuple[str, ...]  # pod keys pending in the dump
    fits_now: tuple[str, ...]  # pod keys the first settle bound
    pdbs: tuple[dict[str, Any], ...] = ()  # the dump's PodDisruptionBudgets (preemption; scale-down's drains)
    # the groups' nodeGroups[].daemonSetPods, which the autoscaler places on each template node
    daemon_set_pods: tuple[tuple[str, tuple[dict[str, Any], ...]], ...] = ()


def _short(key: str) -> str:
    return key.split("/", 1)[1]


def _scheduler(kubernetes: dict[str, Any] | None, pdbs: list[dict[str, Any]]) -> Scheduler:
    """The scheduler a what-if runs: in a release profile, kube-scheduler's default configuration of that release
    (scoring as a real cluster's default profile does: core/scheduler/config.py); under the legacy model, dralab's
    most-allocated as before."""
    config = default_config(profile_from_config(kubernetes).version) if kubernetes is not None else None
    return Scheduler(kubernetes=kubernetes, pdbs=pdbs, config=config)


def _base(inv: Inventory, groups: Sequence[NodeGroup], seed: int, kubernetes: dict[str, Any] | None) -> _Base:
    dump = dump_record(inv)
    records = [dump.record, _groups_record(groups)]
    log = _Log(records, seed)
    pdbs = [o for o in inv.other if o.get("kind") == "PodDisruptionBudget"]
    records += log.settle(0, ClaimController(), _scheduler(kubernetes, pdbs))
    fits = tuple(k for k in dump.pending if log.state.pods[k].node is not None)
    return _Base(tuple(records), dump.pending, fits, tuple(pdbs),
                 tuple((g.name, g.daemon_set_pods) for g in groups if g.daemon_set_pods))


def _pending_reason(view: ClusterState, key: str) -> tuple[str, str]:
    """(reason, message) of a pod still pending: the scheduler's cause and its evidence."""
    reservation = view.gang.reservations.get(key)
    if reservation is not None:
        return "gang", f"waiting at Permit on node {reservation.node} for the rest of its gang"
    cond = view.pods[key].condition
    if cond is None:
        return "waiting", "not tried by the scheduler (its claims are not created yet)"
    message = cond.message
    if cond.detail and cond.detail not in message:  # the FitError text says where, the detail why
        message += (" " if message.endswith(".") else ": ") + cond.detail
    return cond.cause or cond.reason, message


def _policy(base: _Base, policy: str, seed: int, expander: str, max_loops: int,
            kubernetes: dict[str, Any] | None) -> dict[str, Any]:
    log = _Log(base.records, seed)
    # budgets for the autoscaler in release profiles only, as a run's config records them (run/config.py)
    autoscaler = Autoscaler(policy=policy, expander=expander, kubernetes=kubernetes,
                            pdbs=list(base.pdbs) if kubernetes is not None else [],
                            daemon_set_pods={g: list(pods) for g, pods in base.daemon_set_pods})
    claims, scheduler = ClaimController(), _scheduler(kubernetes, list(base.pdbs))
    step = max(autoscaler.scan_interval_ms, MAX_BACKOFF_MS)
    now = 0
    scale_ups: list[dict[str, Any]] = []
    for _ in range(max_loops):
        now += step
        log.settle(now, claims, scheduler)
        record = log.decide(autoscaler, now)
        requests = [e for e in record.events if isinstance(e, ScaleUpRequested)] if record is not None else []
        if not requests:
            break
        for event in requests:
            log.add_nodes(event, now)
            scale_ups.append({"group": event.group, "nodes": event.delta, "pods": [_short(p) for p in event.pods]})
    else:
        log.settle(now + step, claims, scheduler)  # the last scale-up's nodes get their pods
    view = log.state
    added: Counter[str] = Counter()
    for s in scale_ups:
        added[s["group"]] += s["nodes"]
    cost = sum(view.node_groups[g].cost_per_hour * n for g, n in added.items())
    bound = [_short(k) for k in base.pending if view.pods[k].node is not None]
    still = []
    for key in base.pending:
        if view.pods[key].node is None:
            reason, message = _pending_reason(view, key)
            ns, name = _short(key).split("/", 1)
            still.append({"namespace": ns, "name": name, "reason": reason, "message": message})
    return {"policy": policy, "scale_ups": scale_ups, "nodes_added": dict(added),
            "cost_per_hour_added": round(cost, 6), "pods": {"bound": bound, "still_pending": still}}


def whatif(inv: Inventory, groups: Sequence[NodeGroup], *, policies: Sequence[str] = POLICIES, seed: int = 0,
           expander: str = "least-waste", max_loops: int = MAX_LOOPS,
           kubernetes: dict[str, Any] | None = None) -> dict[str, Any]:
    """The report: the dump's pending pods, those that fit as it is, and per policy what it adds and which
    pods would then run (see docs/whatif.md for the shape). `kubernetes`: the release the dump comes from
    (core/kube/versions.py profile_config; None: the legacy 1.35 model). Raises ValueError for an unknown
    policy or expander (the CLI offers only known ones)."""
    for policy in policies:
        if policy not in POLICIES:
            raise ValueError(f"unknown autoscaler policy {policy!r}; expected one of {list(POLICIES)}")
    if expander not in EXPANDERS:
        raise ValueError(f"unknown expander {expander!r}; expected one of {list(EXPANDERS)}")
    base = _base(inv, groups, seed, kubernetes)
    out = {
        "pending_before": len(base.pending),
        "fits_now": [_short(k) for k in base.fits_now],
        "policies": [_policy(base, p, seed, expander, max_loops, kubernetes) for p in dict.fromkeys(policies)],
    }
    unmodelled = not_modelled(inv)  # simulated as if absent: said, as `dralab audit` says it (issue 21)
    if unmodelled:
        out["not_modelled"] = unmodelled
    return out

