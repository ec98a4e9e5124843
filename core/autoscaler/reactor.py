"""The autoscaler reactor: cluster-autoscaler's scale-up loop, over its own view of the log.

Like CA's StaticAutoscaler.RunOnce (cluster-autoscaler/core/static_autoscaler.go) it wakes every
scan interval (10 s by default), looks only at pods whose PodScheduled condition says
`Unschedulable` (what the scheduler wrote to the log, nothing else), first counts upcoming nodes
(requested or created but not Ready) as template nodes that will absorb pods, and then simulates
each node group's template node with the scheduler's own filters to pick one scale-up (an
expander chooses between groups; ties go to the seeded random source, as CA falls back to random).

What the simulation knows about devices is the policy (simulation/capacity.py): `count` treats them as
integer counts, `dra` runs the scheduler's allocator on the template node's slices and waits for drivers
to publish, `atomic` is `dra` with gangs scaled up whole (a gang's pending members all fit the new nodes
of one group, or none is counted) and a 1.36+ PodGroup placed as one unit: minCount less its running pods,
inside one topology domain, or nothing (provisioning/scale_up.py); `count` and `dra` see a PodGroup's pods
one by one, as cluster-autoscaler 1.37 does. Backoff, max-node-provision-time and scale-down come next.

This module is only the loop: the order of the steps and which one runs when. The steps live where the
real autoscalers keep them: the snapshot and FilterOutSchedulable in simulation/, scale-up (estimator,
expanders, options, backoff, ProvisioningRequests) in provisioning/, scale-down and drain in disruption/.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from ..dra.features import allocator_features
from ..dra.model import Slice
from ..engine.contract import Decision, Trigger
from ..kube.defaults import EXPANDER, MAX_NODE_PROVISION_TIME_MS, MAX_NODE_STARTUP_TIME_MS, SCAN_INTERVAL_MS
from ..kube.provreq import consumed_request
from ..kube.versions import profile_from_config
from ..log.events import AnyEvent, ScaleUpRequested, ScaleUpTimedOut
from ..scheduler.filters import ShapeMemo
from ..scheduler.plugins.dra_binding import nominated_waits
from ..scheduler.plugins.dynamic_resources import DraPlugin
from ..state.cluster import ClusterState
from ..state.gangs import Reservation
from ..state.object_changes import current_pdbs
from .disruption.cloud_deletions import failed_deletions
from .disruption.scale_down import ScaleDown
from .provisioning.backoff import Timeouts, backed_off
from .provisioning.expanders import EXPANDERS, expand
from .provisioning.provreq_broker import Broker, FakePods
from .provisioning.scale_up import atomic_option, pending_gangs, place_units, podgroup_units, scale_up_options
from .provisioning.target_revert import revert_timed_out
from .provisioning.unregistered import unregistered_deletions
from .simulation.capacity import POLICIES, FitMemo, SimNode, Simulation, StaticMemo
from .simulation.nodes import absorb, node_ready_for, sim_ready_nodes, sim_upcoming_nodes
from .simulation.nominated import expendable, waiting_for_preemption
from .simulation.scheduler_errors import scheduler_error
from .simulation.virtual_claims import MATERIALIZE, UNRESOLVED


def occupied(nominated: dict[str, Reservation]) -> set[str]:
    return {r.node for r in nominated.values()}


@dataclass
class Autoscaler:
    policy: str = "count"
    scan_interval_ms: int = SCAN_INTERVAL_MS
    max_node_provision_time_ms: int = MAX_NODE_PROVISION_TIME_MS
    max_node_startup_time_ms: int = MAX_NODE_STARTUP_TIME_MS
    expander: str = EXPANDER
    priorities: dict[str, int] = field(default_factory=dict)
    scale_down: dict[str, Any] = field(default_factory=dict)  # ScaleDown's fields (scenario: autoscaler.scaleDown)
    capacity_revoked: bool = False  # revoke bookings whose capacity is gone (provreq_broker.Broker.revoke)
    reserve_bookings: bool = False  # new nodes of an atomic request reserved for its consumers (a taint)
    provisioning_request_claims: str = MATERIALIZE  # or UNRESOLVED: autoscaler#10065 (virtual_claims.py)
    # the release emulated (core/kube/versions.py profile_config; None: legacy 1.35): its DRA gates decide the
    # allocator features the simulation uses, as the scheduler's do (autoscaler PR #10200)
    kubernetes: dict[str, Any] | None = None
    # PodDisruptionBudgets (kube/pdb.py) scale-down's drains respect (disruption/pdb.py); only when a scenario has
    # some, so other run configs read as before
    pdbs: list[dict[str, Any]] = field(default_factory=list)
    # node group -> the Pod manifests each of its new nodes runs (DaemonSets'), on every template node (capacity.py)
    daemon_set_pods: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    name: str = "autoscaler"
    trigger: Trigger = "interval"

    def __post_init__(self) -> None:
        if self.expander not in EXPANDERS:
            raise ValueError(f"unknown expander {self.expander!r}; expected one of {list(EXPANDERS)}")
        if self.policy not in POLICIES:
            raise ValueError(f"unknown autoscaler policy {self.policy!r}; expected one of {list(POLICIES)}")
        if self.provisioning_request_claims not in (MATERIALIZE, UNRESOLVED):
            raise ValueError(f"unknown provisioningRequestClaims {self.provisioning_request_claims!r}; "
                             f"expected {MATERIALIZE!r} or {UNRESOLVED!r}")
        if self.scan_interval_ms <= 0:
            raise ValueError("scan interval must be positive")
        self.profile = profile_from_config(self.kubernetes)
        # selectors cached; release profiles: claims the pod's status names (cluster/pod_claims.py status_claim)
        self._dra = DraPlugin(allocator_features(self.profile), status_claims=self.kubernetes is not None)
        self._templates: dict[tuple[str, str], list[Slice]] = {}  # rendered template slices, a cache
        self._statics: StaticMemo = {}  # static filter answers per pod shape and node, a cache (capacity.py)
        self._fake: FakePods = {}  # each ProvisioningRequest's pods, a cache (provreq_broker.py)
        self._shapes = ShapeMemo()  # static_shape per pod, a cache (filters.py)
        self._fits = FitMemo()  # resource fit on the view's usage across loops, a cache (capacity.py)
        self._timeouts = Timeouts(self.max_node_provision_time_ms, self.max_node_startup_time_ms)
        # autoscaler#3886 (core/kube/bugs.py): the bug is the missing re-check before delete
        race = {"recheck_before_delete": False} if self.profile.bug("autoscaler#3886") else {}
        self._scale_down = ScaleDown(**{**self.scale_down, **race})

    def react(self, view: ClusterState, now: int, rng: random.Random) -> Decision:
        wake = now + self.scan_interval_ms
        broker = Broker(view, now, self._fake) if view.provisioning.requests else None
        events: list[AnyEvent] = broker.expire(not self.profile.bug("autoscaler#9805")) if broker is not None else []
        ready = partial(node_ready_for, view, self.policy, release=self.kubernetes is not None)
        # late nodes given up on: their groups back off (for `count`, only nodes never Ready can be late)
        timed_out = self._timeouts.check(view, now, ready, view.never_ready if self.policy == "count" else None)
        timed_out = revert_timed_out(view.cloud_ops.pending_instances, timed_out, self.profile, now)  # autoscaler#9120
        timed_out = unregistered_deletions(view, timed_out)  # through a cloud that may refuse (unregistered.py)
        events += timed_out
        events += failed_deletions(view)  # the cloud failed a deletion: its taint goes (disruption/cloud_deletions.py)
        given_up = {n for e in timed_out if isinstance(e, ScaleUpTimedOut) for n in e.nodes}
        # groups in backoff, and those that fail in this very decision (the view does not show it yet)
        blocked = {name for name, group in view.node_groups.items() if backed_off(group, now)}
        blocked |= {e.group for e in timed_out if isinstance(e, ScaleUpTimedOut)}
        nominated = {k: r for k, r in view.gang.reservations.items() if r.nominated}
        if view.dra.binding:  # pods waiting in PreBind with a nominated node (KEP-5007 + KEP-5278)
            nominated.update(nominated_waits(view))
        if self.kubernetes is not None:  # release profiles: single pods waiting for their victims (nominated.py)
            nominated.update(waiting_for_preemption(view, nominated))
        # autoscaler#7683 (core/kube/bugs.py) off: those pods take their claims' devices in the snapshot (nominated.py)
        claims_with = self.kubernetes is not None and not self.profile.bug("autoscaler#7683")

        def snapshot() -> tuple[Simulation, list[SimNode]]:  # for scale-down's drain simulation
            sim = Simulation(view, self.policy, self._dra, self._templates, self._statics,
                             virtual_claims=self.provisioning_request_claims == MATERIALIZE, shapes=self._shapes,
                             release=self.kubernetes is not None, daemon_set_pods=self.daemon_set_pods)
            return sim, sim_ready_nodes(view, sim, nominated, claims_with)

        def scale_down() -> list[AnyEvent]:
            pdbs = self.pdbs if self.kubernetes is None else current_pdbs(self.pdbs, view.pdbs)  # changed mid-run too
            return self._scale_down.decide(view, now, ready, occupied(nominated), snapshot, pdbs,
                                           release=self.kubernetes is not None)
        unschedulable = sorted(
            (p for p in view.pending_pods()
             if p.condition is not None and p.condition.reason == "Unschedulable" and p.key not in nominated
             and (self.kubernetes is None or not expendable(p))  # --expendable-pods-priority-cutoff
             and not scheduler_error(p, self.kubernetes)  # upstream: SchedulerError, not listed (selector errors)
             and consumed_request(p.manifest) is None),  # consumers wait for their request's capacity
            key=lambda p: (-p.priority, p.created_offset),
        )
        request = broker.next_request() if broker is not None else None
        # WrapperOrchestrator: loops alternate between ProvisioningRequests and regular pods when both wait
        provreq_mode = request is not None and (not unschedulable or (now // self.scan_interval_ms) % 2 == 1)
        booked = broker.booked(self.profile.bug("autoscaler#9805")) if broker is not None else []
        watch_bookings = self.capacity_revoked and bool(booked)
        if not unschedulable and not provreq_mode and not watch_bookings:
            return Decision(tuple(events + scale_down()), wake)
        sim = Simulation(view, self.policy, self._dra, self._templates, self._statics,
                             virtual_claims=self.provisioning_request_claims == MATERIALIZE, shapes=self._shapes,
                             release=self.kubernetes is not None, daemon_set_pods=self.daemon_set_pods)
        ready_nodes = sim_ready_nodes(view, sim, nominated, claims_with)
        upcoming = sim_upcoming_nodes(view, sim, given_up, blocked)
        self._fits.sync(view, ready_nodes)
        memo = self._fits
        if broker is not None:
            unplaced = absorb(sim, ready_nodes + upcoming, booked, memo)  # bookings: in the snapshot only
            if unplaced and self.capacity_revoked:
                events += broker.revoke(unplaced)
        if not unschedulable and not provreq_mode:
            return Decision(tuple(events + scale_down()), wake)
        if provreq_mode:
            assert broker is not None and request is not None
            handled = broker.handle(request, lambda pods: absorb(sim, ready_nodes, pods, memo),
                                    lambda pods: atomic_option(view, sim, pods, rng, blocked, self.expander,
                                                               self.priorities))
            events.extend(handled.events)
            if handled.scale_up is not None:
                target, nodes = handled.scale_up
                events.append(ScaleUpRequested(group=target, delta=nodes, atomic=True,
                                               booking=request.key if self.reserve_bookings else ""))
            return Decision(tuple(events), wake)
        # PodGroups (1.36+): only `atomic` places them as units; `count` and `dra` see their pods one by one
        units = (podgroup_units(view, unschedulable, self._topology())
                 if self.policy == "atomic" and view.gang.podgroups else None)
        if units:
            remaining, group_options = place_units(view, sim, ready_nodes, upcoming, unschedulable, units, blocked,
                                                   memo)
        else:
            remaining, group_options = absorb(sim, upcoming, absorb(sim, ready_nodes, unschedulable, memo), memo), []
        if not remaining and not group_options:
            return Decision(tuple(events + scale_down()), wake)
        gangs = pending_gangs(view, remaining) if self.policy == "atomic" else None
        options = scale_up_options(view, sim, remaining, blocked, gangs) + group_options
        if options:
            best = expand(self.expander, self.priorities, options, rng)
            events.append(ScaleUpRequested(group=best.group.name, delta=best.count, pods=best.pods,
                                           atomic=best.atomic or (self.policy == "atomic" and gangs is not None
                                                                  and bool(gangs))))
        return Decision(tuple(events), wake)

    def _topology(self) -> bool:
        """Whether TopologyAwareWorkloadScheduling is on in the run's release (as the scheduler reads it)."""
        return self.profile.enabled("TopologyAwareWorkloadScheduling") \
            if "TopologyAwareWorkloadScheduling" in self.profile.gates else False
