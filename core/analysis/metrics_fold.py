"""The incremental fold behind :func:`~dralab.core.analysis.metrics.compute_metrics` (the definitions of what
it counts are in :mod:`.metrics`' docstring). Apart from the entry points because it is the bulk of the work:
per record, only what the record touched is recounted (see the docstring of :mod:`.metrics`).
"""

from __future__ import annotations

from collections import Counter, deque
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from ..dra.model import DeviceID, Slice
from ..log.events import NodeCreated, PodBound, Record, ResourceSlicePublished, ScaleUpRequested
from ..scheduler.plugins.fragmentation import pod_demand
from ..state.cluster import PENDING, ClusterState, NodeState
from .gpu_units import ONE, Unit, capacity_share, device_units, is_gpu_resource, template_gpus
from .run_metrics import RunMetrics, sample
from .stranded import StrandedFold
from .waits import pending_cause, schedule_waits, time_to_schedule

MS_PER_HOUR = 3_600_000
NO_GROUP = ""  # gpu_hours_paid_by_group key of nodes outside any group


@dataclass
class _Node:
    """What the replay keeps per node: its GPU count, how many are used, and its billing state."""

    name: str
    group: str
    template_gpus: int
    extended_gpus: int
    gpus: int = 0
    used: int = 0
    held: int = 0  # held by gang members waiting at Permit
    used_share: float = 0.0  # GPUs in use counting partitions by the share of the GPU they consume
    partial: int = 0  # used GPUs in use by a share below 1 (partitions, consumable-capacity shares)
    partial_free: float = 0.0  # the unused share of those: sum of (1 - share)
    ready: bool = False
    gone: bool = False
    creation: int = 0  # index of this creation (a deleted name may be created again)
    initial: bool = False
    counted: bool = False  # its contribution is in the totals


class MetricsFold:
    """The incremental fold behind compute_metrics: totals kept per change, integrated per interval. Public
    because `dralab report` draws its time series from the same fold (replay/report/report_data.py), so its
    pictures and the summary's numbers cannot disagree."""

    def __init__(self) -> None:
        self.state = ClusterState()
        self.nodes: dict[str, _Node] = {}
        self.deleted: set[str] = set()
        # published node-local slices: node -> slice name -> slice; device -> node
        self.node_slices: dict[str, dict[str, Slice]] = {}
        self.slice_node: dict[str, str] = {}
        self.device_node: dict[DeviceID, str] = {}
        # totals over nodes, kept incrementally
        self.paid_nodes = 0
        self.paid_gpus = 0
        self.paid_by_group: Counter[str] = Counter()
        self.ready_gpus = 0
        self.ready_used = 0
        self.ready_held = 0
        self.ready_used_share = 0.0
        self.unready_gpus = 0
        self.free_hist: Counter[int] = Counter()  # free GPUs -> Ready nodes with that many free
        # room (free GPUs + partially used GPUs) -> Ready nodes with that room, and their unused GPUs
        self.room_hist: Counter[int] = Counter()
        self.room_unused: dict[int, float] = {}
        # pending pods: reason and device demand
        self.cause: dict[str, str] = {}
        self.by_cause: Counter[str] = Counter()
        self.demand: dict[str, int] = {}
        self.by_demand: Counter[int] = Counter()  # demand > 0 only
        self.final_demand: dict[str, int] = {}  # pending pods whose demand cannot change any more
        self.group_rejected: set[str] = set()  # pending pods whose PodGroup's cycle rejected the group (1.36+)
        # accumulators, in unit-milliseconds
        self.acc_pending: Counter[str] = Counter()
        self.acc_node_ms = 0
        self.acc_gpu_ms = 0
        self.acc_gpu_group_ms: Counter[str] = Counter()
        self.acc_used_ms = 0
        self.acc_idle_ms = 0.0
        self.acc_held_ms = 0
        self.acc_group_free_ms = 0
        self.acc_used_share_ms = 0.0
        self.acc_frag = 0.0
        self.acc_frag_ms = 0
        self.acc_unready_ms = 0
        self.acc_ratio = 0.0
        self.acc_ratio_ms = 0
        self.series: list[tuple[float, float | None]] = []
        # scale-up attribution
        self.scale_ups: list[str] = []  # group of each scale-up, in log order
        self.queue: dict[str, deque[list[int]]] = {}  # group -> [[scale-up index, nodes still owed]]
        self.creations: list[tuple[str, bool, int]] = []  # (group, initial, scale-up index or -1)
        self.provisioned: dict[str, int] = {}  # node provisioning, not registered yet -> its scale-up
        self.bound_creations: set[int] = set()
        # stranded GPUs: free GPUs no pending pod could use where they are, by cause (core/analysis/stranded.py)
        self.stranded = StrandedFold(self._free)
        self.acc_stranded_ms: Counter[str] = Counter()
        self.acc_wanted_ms = 0

    # ------------------------------------------------------------------ totals

    def _contribute(self, node: _Node, sign: int) -> None:
        if node.gone or node.counted == (sign > 0):
            return
        node.counted = sign > 0
        self.paid_nodes += sign
        self.paid_gpus += sign * node.gpus
        self.paid_by_group[node.group or NO_GROUP] += sign * node.gpus
        if node.ready:
            used = min(node.used, node.gpus)
            held = min(node.held, node.gpus - used)
            self.ready_gpus += sign * node.gpus
            self.ready_used += sign * used
            self.ready_used_share += sign * min(node.used_share, float(node.gpus))
            self.ready_held += sign * held
            free = node.gpus - used - held
            self.free_hist[free] += sign
            partial = min(node.partial, used)
            room = free + partial
            self.room_hist[room] += sign
            if self.room_hist[room]:
                self.room_unused[room] = self.room_unused.get(room, 0.0) + sign * (
                    free + min(node.partial_free, float(partial)))
            else:  # no node left with that room: drop the sum (no float residue)
                del self.room_hist[room]
                self.room_unused.pop(room, None)
        else:
            self.unready_gpus += sign * node.gpus

    def _idle_gpus(self) -> int:
        """Free (whole) GPUs of Ready nodes no pending pod could use (fragmentation)."""
        smallest = min(self.by_demand) if self.by_demand else None
        return sum(free * n for free, n in self.free_hist.items() if n and (smallest is None or free < smallest))

    def _idle_unused(self) -> float:
        """Unused GPUs of Ready nodes (free ones, and the unused share of partially used ones) on nodes
        whose room (free + partially used GPUs) is below every pending pod's demand."""
        smallest = min(self.by_demand) if self.by_demand else None
        return sum(self.room_unused.get(room, 0.0) for room, n in self.room_hist.items()
                   if n and (smallest is None or room < smallest))

    def _free(self, name: str) -> int:
        """Free (whole) GPUs of a Ready node as the totals count them; 0 for a node not Ready, gone or unknown."""
        node = self.nodes.get(name)
        if node is None or not node.counted or not node.ready:
            return 0
        used = min(node.used, node.gpus)
        return node.gpus - used - min(node.held, node.gpus - used)

    def ratio(self) -> float | None:
        return self.ready_used / self.ready_gpus if self.ready_gpus > 0 else None

    def integrate(self, dt: int) -> None:
        if dt <= 0:
            return
        for cause, n in self.by_cause.items():
            if n:
                self.acc_pending[cause] += n * dt
        self.acc_node_ms += self.paid_nodes * dt
        self.acc_gpu_ms += self.paid_gpus * dt
        for group, gpus in self.paid_by_group.items():
            self.acc_gpu_group_ms[group] += gpus * dt
        self.acc_used_ms += self.ready_used * dt
        self.acc_used_share_ms += self.ready_used_share * dt
        self.acc_unready_ms += self.unready_gpus * dt
        self.acc_idle_ms += (self._idle_unused() + self.ready_held) * dt
        self.acc_held_ms += self.ready_held * dt
        self.stranded.flush(self.state)
        for cause, n in self.stranded.by_cause.items():
            self.acc_stranded_ms[cause] += n * dt
        self.acc_wanted_ms += self.stranded.wanted * dt
        if self.group_rejected:  # a PodGroup waits, rejected whole: every free GPU waits with it
            self.acc_group_free_ms += sum(f * n for f, n in self.free_hist.items() if n) * dt
        if self.by_demand:  # fragmentation: the share of free GPUs no pending pod can use, while pods wait
            free = sum(f * n for f, n in self.free_hist.items() if n)
            if free > 0:
                self.acc_frag += self._idle_gpus() / free * dt
                self.acc_frag_ms += dt
        ratio = self.ratio()
        if ratio is not None:
            self.acc_ratio += ratio * dt
            self.acc_ratio_ms += dt

    # ------------------------------------------------------------------ per record

    def _nodes_of(self, key: str, out: set[str]) -> None:
        """The nodes whose GPUs a write of `key` may change, as the state stands now."""
        kind, _, rest = key.partition("/")
        if kind == "node":
            out.add(rest)
        elif kind == "pod":
            pod = self.state.pods.get(key)
            if pod is not None and pod.node is not None:
                out.add(pod.node)
            reservation = self.state.gang.reservations.get(key)
            if reservation is not None:
                out.add(reservation.node)
        elif kind == "claim":
            claim = self.state.dra.claims.get(key)
            if claim is not None and claim.allocation is not None:
                for result in (claim.allocation.get("devices") or {}).get("results") or []:
                    dev = DeviceID(str(result.get("driver", "")), str(result.get("pool", "")),
                                   str(result.get("device", "")))
                    node = self.device_node.get(dev)
                    if node is not None:
                        out.add(node)
        elif kind == "slice":
            node = self.slice_node.get(rest)
            if node is not None:
                out.add(node)

    def _index_slice(self, name: str) -> None:
        old = self.slice_node.pop(name, None)
        if old is not None:
            gone = self.node_slices.get(old, {}).pop(name, None)
            for device in gone.devices if gone is not None else ():
                self.device_node.pop(device.id, None)
        slc = self.state.dra.slices.get(name)
        node = slc.node_selection.node_name if slc is not None and slc.node_selection is not None else None
        if slc is None or not node:
            return
        self.slice_node[name] = node
        self.node_slices.setdefault(node, {})[name] = slc
        for device in slc.devices:
            self.device_node[device.id] = node

    def _held_devices(self) -> set[DeviceID]:
        """Devices in the allocations of gang members waiting at Permit (held, not yet allocated)."""
        held: set[DeviceID] = set()
        for reservation in self.state.gang.reservations.values():
            for allocation in reservation.allocations.values():
                for result in (allocation.get("devices") or {}).get("results") or []:
                    if result.get("adminAccess") is not True:
                        held.add(DeviceID(str(result.get("driver", "")), str(result.get("pool", "")),
                                          str(result.get("device", ""))))
        return held

    def _refresh_node(self, name: str, extra: tuple[set[DeviceID], set[DeviceID]] | None
                      ) -> tuple[set[DeviceID], set[DeviceID]] | None:
        """Recount one node's GPUs, used GPUs, readiness and billing. `extra` is (shared devices in use,
        devices held at Permit): small, built at most once per record and only
        when a touched node publishes devices; returned for the next node of the same record."""
        current = self.state.nodes.get(name)
        node = self.nodes.get(name)
        if node is None:
            if current is None:
                return extra
            node = self._new_node(current)
        self._contribute(node, -1)
        if current is None or name in self.deleted:
            node.gone = True
            return extra
        slices = self.node_slices.get(name, {})
        used = sum(current.used.get(r, 0) for r in current.allocatable if is_gpu_resource(r))
        held = sum(current.reserved.get(r, 0) for r in current.allocatable if is_gpu_resource(r))
        published: set[Unit] = set()
        if slices:
            dedicated = self.state.dra.allocated.devices
            if extra is None:
                extra = self.state.dra.allocated.shared_devices(), self._held_devices()
            shared, held_devices = extra
            taken: set[Unit] = set()
            waiting: set[Unit] = set()
            capacity: dict[tuple[str, str, str], dict[str, Any]] = {}
            consumed: dict[tuple[str, str, str], dict[str, Any]] = {}
            device_share: dict[Unit, Fraction] = {}  # taken devices consuming no counters -> share in use
            shared_capacity = self.state.dra.allocated.capacity
            for slc in slices.values():
                for name, counters in slc.shared_counters.items():
                    capacity[(slc.driver, slc.pool, name)] = counters
                for device in slc.devices:
                    units = device_units(device)
                    published.update(units)
                    if device.id in dedicated or device.id in shared:
                        taken.update(units)
                        f = (ONE if device.id in dedicated
                             else capacity_share(device, shared_capacity.get(device.id)))
                        if not device.consumes_counters:
                            for u in units:
                                device_share[u] = max(device_share.get(u, Fraction(0)), f)
                        for use in device.consumes_counters:
                            total = consumed.setdefault((slc.driver, slc.pool, use.counter_set), {})
                            for counter, amount in use.counters.items():
                                total[counter] = total.get(counter, 0) + amount * f
                    elif device.id in held_devices:
                        waiting.update(units)
            used += len(taken)
            held += len(waiting - taken)
            shares = [float(f) for f in device_share.values()]
            for key, total in consumed.items():  # a partitioned GPU is in use by the share consumed
                limits = capacity.get(key, {})
                shares.append(min(1.0, max((float(v / limits[c]) for c, v in total.items() if limits.get(c)),
                                           default=1.0)))
            node.used_share = sum(shares) + (used - len(taken))  # extended GPUs count whole
            node.partial = sum(1 for f in shares if f < 1.0)
            node.partial_free = sum(1.0 - f for f in shares if f < 1.0)
        node.gpus = node.extended_gpus + max(node.template_gpus, len(published))
        if not slices:
            node.used_share = float(used)
            node.partial, node.partial_free = 0, 0.0
        node.used = used
        node.held = held
        node.ready = current.ready
        self._contribute(node, +1)
        return extra

    def _new_node(self, current: NodeState) -> _Node:
        group = self.state.node_groups.get(current.group)
        templates = group.resource_slices if group is not None else ()
        node = _Node(
            name=current.name, group=current.group,
            template_gpus=template_gpus(templates, current.name) if templates else 0,
            extended_gpus=sum(a for r, a in current.allocatable.items() if is_gpu_resource(r)),
            creation=-1,
        )
        self.nodes[current.name] = node
        return node

    def _refresh_pod(self, key: str) -> None:
        """Recount one written pod's pending reason and device demand (a pod's demand is cached once it
        is final: a pod without claims asks for the same devices all its life)."""
        pod = self.state.pods.get(key)
        pending = pod is not None and pod.phase == PENDING
        cause = pending_cause(self.state, pod) if pod is not None and pending else None
        old = self.cause.get(key)
        if old != cause:
            if old is not None:
                self.by_cause[old] -= 1
                del self.cause[key]
            if cause is not None:
                self.cause[key] = cause
                self.by_cause[cause] += 1
        condition = pod.condition if pod is not None and pending else None
        if (condition is not None and condition.reason == "Unschedulable" and key in self.state.gang.group_of
                and condition.message.startswith('pod group "') and condition.cause != "preemption"):
            self.group_rejected.add(key)
        else:
            self.group_rejected.discard(key)
        demand = 0
        if pod is not None and pending and not pod.manifest.get("spec", {}).get("schedulingGates"):
            cached = self.final_demand.get(key)
            demand = pod_demand(self.state, pod) if cached is None else cached
            if cached is None and not pod.manifest.get("spec", {}).get("resourceClaims"):
                self.final_demand[key] = demand
        else:
            self.final_demand.pop(key, None)
        old_demand = self.demand.get(key, 0)
        if old_demand != demand:
            if old_demand:
                del self.demand[key]
                self.by_demand[old_demand] -= 1
                if not self.by_demand[old_demand]:
                    del self.by_demand[old_demand]
            if demand:
                self.demand[key] = demand
                self.by_demand[demand] += 1

    def _events_after(self, record: Record, touched: set[str]) -> None:
        """Event-level bookkeeping: node creations and deletions, slices, scale-ups, bindings."""
        for event in record.events:
            if isinstance(event, NodeCreated):
                if event.name not in self.state.nodes:
                    continue
                old = self.nodes.get(event.name)
                if old is not None and not old.gone:
                    continue  # created twice: the fold kept the first (an anomaly)
                if old is not None:
                    del self.nodes[event.name]  # a deleted name created again: a new node
                self.deleted.discard(event.name)
                node = self._new_node(self.state.nodes[event.name])
                node.creation, node.initial = len(self.creations), event.initial
                self.creations.append((event.group, event.initial, self._attribute(event)))
            elif isinstance(event, ResourceSlicePublished):
                name = str((event.manifest.get("metadata") or {}).get("name") or "")
                self._index_slice(name)
                if name in self.slice_node:
                    touched.add(self.slice_node[name])
            elif isinstance(event, ScaleUpRequested):
                self.scale_ups.append(event.group)
                if event.delta > 0:
                    self.queue.setdefault(event.group, deque()).append([len(self.scale_ups) - 1, event.delta])
            elif isinstance(event, PodBound):
                bound = self.state.pods.get(event.pod)
                target = self.nodes.get(event.node)
                if bound is not None and bound.node == event.node and target is not None and target.creation >= 0:
                    self.bound_creations.add(target.creation)
            else:
                self._cloud_event(event, touched)

    def _cloud_event(self, event: object, touched: set[str]) -> None:
        """Node events recognised by name and fields, so that this module does not depend on them existing:
        `NodeDeleted(name)` stops a node's billing; `NodeProvisioning(name, group)` (a VM the cloud is making
        for a scale-up) and `ScaleUpFailed(group, delta)` (nodes that will not come) answer scale-ups in
        order, as the cloud answers them."""
        kind = type(event).__name__
        name, group = getattr(event, "name", None), getattr(event, "group", None)
        if kind == "NodeDeleted" and isinstance(name, str):
            self.deleted.add(name)
            touched.add(name)
            for slice_name in self.node_slices.pop(name, {}):  # its slices go with it
                self.slice_node.pop(slice_name, None)
        elif kind == "NodeProvisioning" and isinstance(name, str) and isinstance(group, str):
            self.provisioned[name] = self._answer(group, 1)
        elif kind == "ScaleUpFailed" and isinstance(group, str):
            delta = getattr(event, "delta", 0)
            self._answer(group, delta if isinstance(delta, int) else 0)

    def _attribute(self, event: NodeCreated) -> int:
        """The scale-up a new node belongs to: the one its provisioning answered, else its group's oldest
        scale-up still owed nodes (-1: none, e.g. a starting node)."""
        if event.initial or not event.group:
            return -1
        provisioned = self.provisioned.pop(event.name, None)
        return self._answer(event.group, 1) if provisioned is None else provisioned

    def _answer(self, group: str, nodes: int) -> int:
        """Take `nodes` nodes off the group's scale-ups, oldest first; the scale-up of the last one (-1: none)."""
        queue = self.queue.get(group)
        taken = -1
        while queue and nodes > 0:
            if queue[0][1] <= 0:
                queue.popleft()
                continue
            used = min(queue[0][1], nodes)
            queue[0][1] -= used
            nodes -= used
            taken = queue[0][0]
        return taken

    def step(self, offset: int, record: Record, t: int) -> None:
        writes = record.writes()
        touched: set[str] = set()
        for key in writes:
            self._nodes_of(key, touched)
        if not self.state.apply(offset, record):
            return
        self._events_after(record, touched)
        for key in writes:
            self._nodes_of(key, touched)
        extra: tuple[set[DeviceID], set[DeviceID]] | None = None
        for name in sorted(touched):
            extra = self._refresh_node(name, extra)
        for key in writes:
            if key.startswith("pod/"):
                self._refresh_pod(key)
        self.stranded.step(self.state, touched, writes, self.demand)
        ratio = self.ratio()
        point = (t / 1000, None if ratio is None else round(ratio, 4))
        if self.series and self.series[-1][0] == point[0]:
            self.series.pop()  # records at one instant: the state after the last of them is what holds
        if not self.series or self.series[-1][1] != point[1]:
            self.series.append(point)

    def result(self, end: int) -> RunMetrics:
        """The run's metrics from this fold, integrated up to `end` (ms): compute_metrics' answer, and the
        report's (replay/report/report_data.py folds once for its series and its table)."""
        state = self.state
        without_pod = set(range(len(self.scale_ups)))
        for creation, (_, _, scale_up) in enumerate(self.creations):
            if scale_up >= 0 and creation in self.bound_creations:
                without_pod.discard(scale_up)
        hours = MS_PER_HOUR
        return RunMetrics(
            end_s=end / 1000,
            time_to_schedule_s=time_to_schedule(schedule_waits(state)),
            pending_pod_seconds_by_reason={k: v / 1000 for k, v in sorted(self.acc_pending.items()) if v},
            node_hours_paid=self.acc_node_ms / hours,
            gpu_hours_paid=self.acc_gpu_ms / hours,
            gpu_hours_paid_by_group={g: v / hours for g, v in sorted(self.acc_gpu_group_ms.items())},
            gpu_hours_used=self.acc_used_ms / hours,
            gpu_hours_idle=self.acc_idle_ms / hours,
            gpu_hours_held=self.acc_held_ms / hours,
            gpu_hours_used_share=self.acc_used_share_ms / hours,
            gpu_hours_unready=self.acc_unready_ms / hours,
            gpu_allocation_ratio_mean=self.acc_ratio / self.acc_ratio_ms if self.acc_ratio_ms else None,
            gpu_fragmentation_mean=self.acc_frag / self.acc_frag_ms if self.acc_frag_ms else None,
            gpu_fragmentation_s=self.acc_frag_ms / 1000,
            gpu_allocation_ratio_series=sample([p for p in self.series if p[0] * 1000 <= end]),
            scale_ups=len(self.scale_ups),
            scale_ups_without_pod=len(without_pod),
            nodes_never_used=sum(1 for i, (group, initial, _) in enumerate(self.creations)
                                 if group and not initial and i not in self.bound_creations),
            nodes_added={name: g.created - g.initial for name, g in sorted(state.node_groups.items())},
            gpu_hours_free_while_groups_wait=self.acc_group_free_ms / hours,
            gpu_hours_stranded=sum(self.acc_stranded_ms.values()) / hours,
            gpu_hours_stranded_by_cause={c: v / hours for c, v in sorted(self.acc_stranded_ms.items()) if v},
            gpu_hours_wanted=self.acc_wanted_ms / hours,
        )
