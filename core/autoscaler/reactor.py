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
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from ..dra.features import allocator_features
from ..dra.model import Slice
from ..engine.contract import Decision, Trigger
from ..kube import defaults as flags
from ..kube.defaults import EXPANDER, MAX_NODE_PROVISION_TIME_MS, MAX_NODE_STARTUP_TIME_MS, SCAN_INTERVAL_MS
from ..kube.provreq import consumed_request
from ..kube.versions import profile_from_config
from ..log.events import AnyEvent, ScaleUpRequested, ScaleUpTimedOut
from ..scheduler.filters import ShapeMemo
from ..scheduler.plugins.dra_binding import nominated_waits
from ..scheduler.plugins.dynamic_resources import DraPlugin
from ..state.cluster import ClusterState, NodeGroupState, PodState
from ..state.gangs import Reservation
from ..state.object_changes import current_pdbs
from .disruption.cloud_deletions import failed_deletions
from .disruption.scale_down import ScaleDown, scale_down_bugs, scale_down_options
from .provisioning import scale_up_status as status
from .provisioning.backoff import Timeouts, backed_off
from .provisioning.balance import balance, joint_estimate, similar_groups
from .provisioning.expanders import EXPANDERS, Option, expand
from .provisioning.pod_age import all_pods_new, cluster_healthy, old_enough, unready_nodes
from .provisioning.provreq_broker import Broker, FakePods
from .provisioning.scale_up import atomic_option, pending_gangs, place_units, podgroup_units, scale_up_options
from .provisioning.target_revert import revert_timed_out
from .provisioning.template_source import clusterapi_dra, from_zero, template_group
from .provisioning.unregistered import unregistered_deletions
from .simulation.capacity import POLICIES, FitMemo, SimNode, Simulation, StaticMemo
from .simulation.loop_snapshot import absorb_placing, unschedulable_only
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
    # scale-down flags set as spec.autoscaler fields, ScaleDown's keywords (core/scenario/scale_down_flags.py)
    scale_down_flags: dict[str, Any] = field(default_factory=dict)
    # cluster-autoscaler's scale-up flags (issue 22; spec.autoscaler, core/scenario/autoscaler_flags.py), recorded in
    # the run config only when not their defaults (core/kube/defaults.py)
    new_pod_scale_up_delay_ms: int = flags.NEW_POD_SCALE_UP_DELAY_MS
    max_nodes_total: int = flags.MAX_NODES_TOTAL
    ok_total_unready_count: int = flags.OK_TOTAL_UNREADY_COUNT
    max_total_unready_percentage: float = flags.MAX_TOTAL_UNREADY_PERCENTAGE
    max_nodes_per_scale_up: int = flags.MAX_NODES_PER_SCALE_UP
    expander_priorities: Any = ()  # [(priority, [regex of group names, ...]), ...], highest first
    balance_similar_node_groups: bool = flags.BALANCE_SIMILAR_NODE_GROUPS
    initial_node_group_backoff_ms: int = flags.INITIAL_NODE_GROUP_BACKOFF_MS
    max_node_group_backoff_ms: int = flags.MAX_NODE_GROUP_BACKOFF_MS
    node_group_backoff_reset_timeout_ms: int = flags.NODE_GROUP_BACKOFF_RESET_TIMEOUT_MS
    # whether the run has a release profile (its run config a `kubernetes` entry: core/run/config.py build_reactors);
    # None: whether `kubernetes` is set. A legacy run whose scheduler sets feature gates gets a `kubernetes` entry
    # here too, so issue 22's behaviours (pod-age buffer, health, Events, bug switches) ask this, not `kubernetes`
    release: bool | None = None
    name: str = "autoscaler"
    trigger: Trigger = "interval"

    def __post_init__(self) -> None:
        for name in self.expander.split(","):  # one expander or upstream's comma-separated chain
            if name not in EXPANDERS:
                raise ValueError(f"unknown expander {name!r}; expected one of {list(EXPANDERS)}")
        self._regexes = tuple((int(p), tuple(str(r) for r in rs)) for p, rs in self.expander_priorities)
        self._backoff = (self.initial_node_group_backoff_ms, self.max_node_group_backoff_ms,
                         self.node_group_backoff_reset_timeout_ms)
        if self.policy not in POLICIES:
            raise ValueError(f"unknown autoscaler policy {self.policy!r}; expected one of {list(POLICIES)}")
        if self.provisioning_request_claims not in (MATERIALIZE, UNRESOLVED):
            raise ValueError(f"unknown provisioningRequestClaims {self.provisioning_request_claims!r}; "
                             f"expected {MATERIALIZE!r} or {UNRESOLVED!r}")
        if self.scan_interval_ms <= 0:
            raise ValueError("scan interval must be positive")
        self.profile = profile_from_config(self.kubernetes)
        # release profiles: upstream's pod-age buffer, health, Events, and the bugs of issue 22
        self._release = self.kubernetes is not None if self.release is None else self.release
        self._plain_ready = self._bug("autoscaler#7780")  # no DRA readiness (simulation/nodes.py)
        self._from_zero: set[str] | None = set() if self._bug("autoscaler#10199") else None
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
        # the run's own profile is a release (`_release`, above): scale-down as upstream's planner, its events, one
        # snapshot per loop (disruption/candidates.py, simulation/loop_snapshot.py)
        race |= scale_down_bugs(self.profile, self._release)  # autoscaler#8707, #5117 (scale_down.py)
        self._scale_down = ScaleDown(**{**self.scale_down, **race,
                                        **scale_down_options(self.scale_down_flags, self._release)})

    def react(self, view: ClusterState, now: int, rng: random.Random) -> Decision:
        wake = now + self.scan_interval_ms
        broker = Broker(view, now, self._fake) if view.provisioning.requests else None
        events: list[AnyEvent] = broker.expire(not self.profile.bug("autoscaler#9805")) if broker is not None else []
        # autoscaler#7780 (core/kube/bugs.py): before the DRA custom resources processor, Ready is ready
        ready = partial(node_ready_for, view, "count" if self._plain_ready else self.policy,
                        release=self.kubernetes is not None)
        # late nodes given up on: their groups back off (for `count`, only nodes never Ready can be late)
        timed_out = self._timeouts.check(view, now, ready, view.never_ready if self.policy == "count" else None)
        timed_out = revert_timed_out(view.cloud_ops.pending_instances, timed_out, self.profile, now)  # autoscaler#9120
        timed_out = unregistered_deletions(view, timed_out)  # through a cloud that may refuse (unregistered.py)
        events += timed_out
        events += failed_deletions(view)  # the cloud failed a deletion: its taint goes (disruption/cloud_deletions.py)
        given_up = {n for e in timed_out if isinstance(e, ScaleUpTimedOut) for n in e.nodes}
        # groups in backoff, and those that fail in this very decision (the view does not show it yet)
        blocked = {name for name, group in view.node_groups.items() if backed_off(group, now, *self._backoff)}
        blocked |= {e.group for e in timed_out if isinstance(e, ScaleUpTimedOut)}
        if self._release and not cluster_healthy(
                view, len(unready_nodes(view, now, ready, self.max_node_startup_time_ms)), self.ok_total_unready_count,
                self.max_total_unready_percentage):  # IsClusterHealthy: the loop stops here (pod_age.py)
            return Decision(tuple(events + status.configmap_event(view, now, "ClusterUnhealthy",
                                                                  "Cluster is unhealthy")), wake)
        nominated = {k: r for k, r in view.gang.reservations.items() if r.nominated}
        if view.dra.binding:  # pods waiting in PreBind with a nominated node (KEP-5007 + KEP-5278)
            nominated.update(nominated_waits(view))
        if self.profile.bug("autoscaler#9607"):  # binding-cycle nominations reach the snapshot only if Unschedulable
            nominated = unschedulable_only(view, nominated)
        if self.kubernetes is not None:  # release profiles: single pods waiting for their victims (nominated.py)
            nominated.update(waiting_for_preemption(view, nominated))
        # autoscaler#7683 (core/kube/bugs.py) off: those pods take their claims' devices in the snapshot (nominated.py)
        claims_with = self.kubernetes is not None and not self.profile.bug("autoscaler#7683")

        def snapshot() -> tuple[Simulation, list[SimNode]]:  # for scale-down's drain simulation
            sim = Simulation(view, self.policy, self._dra, self._templates, self._statics,
                             virtual_claims=self.provisioning_request_claims == MATERIALIZE, shapes=self._shapes,
                             release=self.kubernetes is not None, daemon_set_pods=self.daemon_set_pods)
            return sim, sim_ready_nodes(view, sim, nominated, claims_with, self._plain_ready)

        placed: set[str] = set()  # release profiles: nodes this loop's FilterOutSchedulable put pods on

        def scale_down(scaled_up: bool = False) -> list[AnyEvent]:
            pdbs = self.pdbs if self.kubernetes is None else current_pdbs(self.pdbs, view.pdbs)  # changed mid-run too
            return self._scale_down.decide(view, now, ready, occupied(nominated), snapshot, pdbs,
                                           release=self.kubernetes is not None, placed=placed, scaled_up=scaled_up,
                                           planner=self._release)
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
        ready_nodes = sim_ready_nodes(view, sim, nominated, claims_with, self._plain_ready)
        upcoming = sim_upcoming_nodes(view, sim, given_up, blocked, self._plain_ready)
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
                                                               self.priorities, self._regexes,
                                                               self.max_nodes_per_scale_up))
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
            fits = (absorb(sim, ready_nodes, unschedulable, memo) if not self._release
                    else absorb_placing(sim, ready_nodes, unschedulable, memo, placed))  # one snapshot (loop_snapshot)
            remaining, group_options = absorb(sim, upcoming, fits, memo), []
        if self._release or self.new_pod_scale_up_delay_ms:  # filterOutYoungPods (pod_age.py)
            remaining = old_enough(remaining, now, self.new_pod_scale_up_delay_ms)
        if not remaining and not group_options:
            return Decision(tuple(events + scale_down()), wake)
        if self._release and all_pods_new(remaining, now):  # ScaleUpInCooldown: no scale-up, no scale-down
            return Decision(tuple(events), wake)
        outcome = status.LoopOutcome(remaining, status.skipped_groups(view, blocked))
        if self.max_nodes_total and len(ready_nodes) >= self.max_nodes_total:  # shouldScaleUp: limit reached
            outcome.max_nodes_total = True
            events += status.configmap_event(view, now, "MaxNodesTotalReached",
                                             f"Max total nodes in cluster reached: {self.max_nodes_total}")
            events += status.events(view, now, sim, outcome) if self._release else []
            return Decision(tuple(events + scale_down()), wake)
        gangs = pending_gangs(view, remaining) if self.policy == "atomic" else None
        template_of = self._template_of(view)
        options = scale_up_options(view, sim, remaining, blocked, gangs, limit=self.max_nodes_per_scale_up,
                                   template_of=template_of) + group_options
        if options:
            best = expand(self.expander, self.priorities, options, rng, self._regexes)
            atomic = best.atomic or (self.policy == "atomic" and gangs is not None and bool(gangs))
            requests = self._requests(view, now, best, options, len(ready_nodes) + len(upcoming), atomic, events,
                                      (sim, remaining))
            events += requests
            outcome.infos = [status.ScaleUpInfo(r.group, view.node_groups[r.group].target_size,
                                                view.node_groups[r.group].target_size + r.delta,
                                                view.node_groups[r.group].max) for r in requests]
            outcome.triggered = best.pods if requests else ()
            if not requests:  # GetCappedNewNodeCount's error: a failed scale-up writes no pod Event
                return Decision(tuple(events), wake)
        if self._release:
            events += status.events(view, now, sim, outcome, template_of)
            # release profiles: scale-down runs in every loop, as RunOnce runs it (after the scale-up)
            events += scale_down(scaled_up=bool(options))
        return Decision(tuple(events), wake)

    def _template_of(self, view: ClusterState) -> Callable[[NodeGroupState], NodeGroupState] | None:
        """autoscaler#10199 (provisioning/template_source.py): cluster-api groups with no node are templated with
        an incomplete pool. The cached template slices of a group that starts or stops being such are dropped."""
        if self._from_zero is None:
            return None
        now_zero = {n for n, g in view.node_groups.items() if clusterapi_dra(g) and from_zero(view, g)}
        for name in now_zero ^ self._from_zero:
            for key in [k for k in self._templates if k[0] == name]:
                del self._templates[key]
        self._from_zero = now_zero
        return partial(template_group, view)

    def _requests(self, view: ClusterState, now: int, best: Option, options: list[Option], nodes: int, atomic: bool,
                  events: list[AnyEvent], estimate: tuple[Simulation, list[PodState]]) -> list[ScaleUpRequested]:
        """The scale-up of the expander's option: capped by --max-nodes-total (GetCappedNewNodeCount, counting the
        snapshot's nodes, upcoming ones included), split across similar groups with --balance-similar-node-groups
        (balance.py; without autoscaler#9150, estimated across them at once). Appends MaxNodesTotalReached to
        `events` when the cap bites."""
        similar = similar_groups(best, options) if self.balance_similar_node_groups and not atomic else []
        joint = joint_estimate(estimate[1], [best.group, *similar], estimate[0], self.max_nodes_per_scale_up) \
            if similar and not self._bug("autoscaler#9150") else None
        count = best.count if joint is None else sum(joint.values())
        if self.max_nodes_total and count + nodes > self.max_nodes_total:
            count = self.max_nodes_total - nodes
            events += status.configmap_event(view, now, "MaxNodesTotalReached",
                                             f"Max total nodes in cluster reached: {self.max_nodes_total}")
            if count < 1:
                return []
        split = {best.group.name: count}
        if joint is not None and sum(joint.values()) == count:
            split = joint
        elif similar:
            split = balance([best.group, *similar], count)
        return [ScaleUpRequested(group=g, delta=n, pods=best.pods if g == best.group.name else (), atomic=atomic)
                for g, n in split.items()]

    def _bug(self, name: str) -> bool:
        """An upstream bug switch (core/kube/bugs.py) of issue 22: never on in a legacy run."""
        return self._release and self.profile.bug(name)

    def _topology(self) -> bool:
        """Whether TopologyAwareWorkloadScheduling is on in the run's release (as the scheduler reads it)."""
        return self.profile.enabled("TopologyAwareWorkloadScheduling") \
            if "TopologyAwareWorkloadScheduling" in self.profile.gates else False
