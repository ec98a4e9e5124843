"""Per-node preparation: candidate devices, counters, and the validated requests of the claims.

`NodeContext` is what GatherPools gives one node, flattened: every device of a complete, valid pool in
allocation order (`Cand`, with its counter consumption resolved to indexes into one array of available
counters), and the counters left once the devices already in use are accounted for.

`Preparer.prepare` validates the claims exactly in upstream's order (claims in order; for each, its
requests, subrequests in order; then the 32-results limit; then the constraints), so that the first
error is the one upstream reports, and builds one `ReqData` per request or subrequest.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Protocol

from .allocated import AllocatedState
from .consumable import published_capacity, request_fits
from .model import (
    Capacity,
    Claim,
    Constraint,
    Device,
    DeviceClass,
    DeviceID,
    Node,
    Slice,
    SubRequest,
    Taint,
    Toleration,
)
from .pools import Pool, SliceIndex, device_matches_node, gather_pools

MAX_RESULTS = 32  # AllocationResultsMaxSize


class SelectorMatcher(Protocol):
    def matches(self, expression: str, device: Device, origin: str) -> bool: ...


class AllocationError(Exception):
    """Invalid input the allocator detects (upstream `Allocate` returns an error)."""


class SelectorFailed(AllocationError):
    """A selector that fails to evaluate on a device the search reached (upstream `selectorsMatch` returns
    "claim <ns/name>: selector #<i>: CEL runtime error: <reason>", or "class <name>: ..." for a class
    selector; "CEL compile error" for one that does not compile). Carries what an explanation needs
    (core/dra/explain_errors.py); the message stays dralab's own."""

    def __init__(self, message: str, where: str, index: int, device: str, cause: BaseException) -> None:
        super().__init__(message)
        self.where = where  # "claim ns/name" or "class name", upstream's prefix
        self.index = index  # the selector's position in its list
        self.device = device  # driver/pool/device it failed on
        self.reason = str(getattr(cause, "reason", cause))  # the CEL library's words ("no such key: index")
        self.compile = getattr(cause, "kind", "runtime") == "compile"
        self.claim = ""  # the claim being allocated (set by Preparer.selectable)
        self.request = ""  # its request ("req" or "req/sub")


@dataclass(frozen=True)
class Features:
    """The allocator's optional features (upstream `structured.Features`); all on by default, the set
    dralab emulates. Turning one off reproduces a cluster with the feature gate disabled."""

    admin_access: bool = True  # DRAAdminAccess
    prioritized_list: bool = True  # DRAPrioritizedList (firstAvailable)
    partitionable_devices: bool = True  # DRAPartitionableDevices (sharedCounters, perDeviceNodeSelection)
    device_taints: bool = True  # DRADeviceTaints
    binding_conditions: bool = True  # DRADeviceBindingConditions + DRAResourceClaimDeviceStatus
    consumable_capacity: bool = True  # DRAConsumableCapacity
    # committed shares of multi-allocatable devices consume their counters; False reproduces kubernetes#139034
    # (core/kube/bugs.py): the allocator rebuilt a pool's counters from dedicated allocations only
    shared_counters: bool = True


@dataclass(eq=False)
class Cand:
    index: int  # position in allocation order
    device: Device
    slice: Slice
    pool: Pool
    multi: bool  # allowMultipleAllocations (with the consumable-capacity feature)
    node_ok: bool  # per-device node selection matches (always True for slice-level selection)
    counters: tuple[tuple[int, Fraction], ...]  # (counter index, amount consumed)
    committed_in_use: bool  # dedicated, in AllocatedState
    committed_shared: bool  # multi-allocatable with committed shares (its counters are already consumed)
    committed_capacity: dict[str, Fraction] | None
    caps: dict[str, Capacity]  # capacities by published name
    overdrawn: bool = False  # consumes counters of a pool whose committed devices overdraw a counter

    @property
    def id(self) -> DeviceID:
        return self.device.id


@dataclass
class NodeContext:
    node: Node
    pools: list[Pool]
    cands: list[Cand]
    counter_available: list[Fraction]
    counter_names: list[str]  # "driver/pool/set/counter", for messages

    @classmethod
    def build(cls, index: SliceIndex, node: Node, allocated: AllocatedState, shared: set[DeviceID],
              features: Features) -> NodeContext:
        pools = gather_pools(index, node, features.partitionable_devices)
        cands: list[Cand] = []
        available: list[Fraction] = []
        names: list[str] = []
        for pool in pools:
            if pool.incomplete or pool.invalid:
                continue
            keys: dict[tuple[str, str], int] = {}
            if features.partitionable_devices:
                for set_name, set_counters in pool.counter_sets.items():
                    for counter, value in set_counters.items():
                        keys[(set_name, counter)] = len(available)
                        available.append(value)
                        names.append(f"{pool.id}/{set_name}/{counter}")
                for slc in pool.device_slices + pool.other_slices:
                    for device in slc.devices:
                        # kubernetes#139034 (fixed by #139040 in 1.37.0, 1.36 patch #139211): upstream's
                        # incubating/experimental allocators checked only AllocatedDevices here, so a committed
                        # share left the device's counters free for an overlapping partition
                        if device.id in allocated.devices or (device.id in shared and features.shared_counters):
                            for use in device.consumes_counters:
                                for counter, amount in use.counters.items():
                                    k = keys.get((use.counter_set, counter))
                                    if k is not None:
                                        available[k] -= amount
            # Upstream checks every counter of the pool, not only the device's: once committed devices
            # overdraw one counter (an inconsistent state), no counter-consuming device of the pool fits.
            overdrawn = any(available[k] < 0 for k in keys.values())
            for slc, device in pool.devices():
                counters: tuple[tuple[int, Fraction], ...] = ()
                if features.partitionable_devices and device.consumes_counters:
                    counters = tuple((keys[(u.counter_set, c)], amt) for u in device.consumes_counters
                                     for c, amt in u.counters.items() if (u.counter_set, c) in keys)
                multi = device.allow_multiple_allocations and features.consumable_capacity
                cands.append(Cand(
                    index=len(cands), device=device, slice=slc, pool=pool, multi=multi,
                    node_ok=device_matches_node(slc, device, node), counters=counters,
                    committed_in_use=device.id in allocated.devices,
                    committed_shared=device.id in shared,
                    committed_capacity=allocated.capacity.get(device.id),
                    caps=published_capacity(device),
                    overdrawn=overdrawn and bool(counters),
                ))
        return cls(node, pools, cands, available, names)


@dataclass(eq=False)
class ReqData:
    """One request (`exactly`) or one subrequest of `firstAvailable`, validated."""

    claim_index: int
    request_index: int
    sub_index: int | None  # None for `exactly`
    base: str  # the request's name
    name: str  # the result's `request`: "req" or "req/sub"
    sub: SubRequest
    device_class: DeviceClass
    all_mode: bool
    num: int
    admin: bool
    cands: list[Cand] = field(default_factory=list)
    errors: dict[int, AllocationError] = field(default_factory=dict)  # deferred selector errors by cand index
    built: bool = False

    @property
    def sub_name(self) -> str | None:
        return self.sub.name if self.sub_index is not None else None


@dataclass(eq=False)
class ClaimData:
    index: int
    claim: Claim
    choices: list[list[ReqData]]  # per request: [exactly] or one per subrequest
    has_subs: list[bool]
    constraints: list[Constraint]


def tolerates(toleration: Toleration, taint: Taint) -> bool:
    """Upstream `ToleratesTaint`."""
    if toleration.effect and toleration.effect != taint.effect:
        return False
    if toleration.key and toleration.key != taint.key:
        return False
    if toleration.operator in ("", "Equal"):
        return toleration.value == taint.value
    return toleration.operator == "Exists"


def untolerated(device: Device, tolerations: Sequence[Toleration]) -> list[Taint]:
    """The NoSchedule/NoExecute taints of the device that no toleration tolerates (other effects,
    None included, never prevent allocation)."""
    return [t for t in device.taints if t.effect in ("NoSchedule", "NoExecute")
            and not any(tolerates(tol, t) for tol in tolerations)]


class Preparer:
    def __init__(self, ctx: NodeContext, classes: Mapping[str, DeviceClass], matcher: SelectorMatcher,
                 cache: dict[tuple[str, Device], bool], features: Features) -> None:
        self.ctx = ctx
        self.classes = classes
        self.matcher = matcher
        self.cache = cache
        self.features = features
        self._selectable: dict[tuple[ReqData, int], bool] = {}
        self._claim_keys: list[str] = []

    # ------------------------------------------------------------------ selectors

    def _match(self, expression: str, device: Device, origin: str, where: str, i: int) -> bool:
        key = (expression, device)
        hit = self.cache.get(key)
        if hit is not None:
            return hit
        try:
            result = self.matcher.matches(expression, device, origin)
        except AllocationError:
            raise
        except Exception as exc:  # the matcher's error (SelectorError): a clear message, upstream's prefix
            raise SelectorFailed(f"{where}: selector #{i}: {exc}", where, i, str(device.id), exc) from exc
        if not isinstance(result, bool):
            raise SelectorFailed(f"{where}: selector #{i}: expression {expression!r} did not return a bool", where, i,
                                 str(device.id), ValueError(f"expression {expression!r} did not return a bool"))
        self.cache[key] = result
        return result

    def selectable(self, rd: ReqData, cand: Cand) -> bool:
        """Upstream `isSelectable`: binding conditions supported, class selectors, request selectors,
        per-device node selection. Raises AllocationError for a selector that fails to evaluate."""
        key = (rd, cand.index)
        hit = self._selectable.get(key)
        if hit is not None:
            return hit
        try:
            ok = self._selectable_now(rd, cand)
        except SelectorFailed as exc:
            exc.claim, exc.request = exc.claim or self.claim_key(rd), exc.request or rd.name
            raise
        self._selectable[key] = ok
        return ok

    def _selectable_now(self, rd: ReqData, cand: Cand) -> bool:
        device = cand.device
        ok = True
        if device.binding_conditions and not self.features.binding_conditions:
            ok = False
        if ok:
            cls = rd.device_class
            for i, expr in enumerate(cls.selectors):
                if not self._match(expr, device, f"DeviceClass {cls.name}", f"class {cls.name}", i):
                    ok = False
                    break
        if ok:
            claim = self.claim_key(rd)
            for i, expr in enumerate(rd.sub.selectors):
                if not self._match(expr, device, f"ResourceClaim {claim} request {rd.name}", f"claim {claim}", i):
                    ok = False
                    break
        if ok and not cand.node_ok:
            ok = False
        return ok

    def claim_key(self, rd: ReqData) -> str:
        return self._claim_keys[rd.claim_index]

    def statically_usable(self, rd: ReqData, cand: Cand) -> bool:
        """Checks that do not depend on the search state: taints, counters feature, named capacities."""
        device = cand.device
        if self.features.device_taints and untolerated(device, rd.sub.tolerations):
            return False
        if device.consumes_counters and not self.features.partitionable_devices:
            return False
        if self.features.consumable_capacity:
            for name in rd.sub.capacity_requests:
                if name not in cand.caps:
                    return False
        return True

    def build_cands(self, rd: ReqData) -> None:
        """The devices an ExactCount request may take, in allocation order. A selector that fails on a
        device is remembered and raised only if the search reaches that device while it is free, which
        is when upstream evaluates it."""
        if rd.built:
            return
        rd.built = True
        if rd.all_mode:
            return
        for cand in self.ctx.cands:
            if cand.committed_in_use and not rd.admin:
                continue  # upstream checks "in use" before evaluating selectors
            try:
                ok = self.selectable(rd, cand)
            except AllocationError as exc:
                rd.errors[cand.index] = exc
                rd.cands.append(cand)
                continue
            if ok and self.statically_usable(rd, cand):
                rd.cands.append(cand)

    # ------------------------------------------------------------------ validation

    def prepare(self, claims: Sequence[Claim]) -> list[ClaimData]:
        self._claim_keys = [c.key for c in claims]
        out: list[ClaimData] = []
        f = self.features
        for ci, claim in enumerate(claims):
            cd = ClaimData(ci, claim, [], [], list(claim.constraints))
            min_devices = 0
            for ri, request in enumerate(claim.requests):
                has_subs = bool(request.first_available) and request.exactly is None
                where = f"claim {claim.key}, request {request.name}"
                if has_subs and not f.prioritized_list:
                    raise AllocationError(f"{where}: has subrequests, but the DRAPrioritizedList feature is disabled")
                if not f.consumable_capacity:
                    if request.exactly is not None and request.exactly.capacity_requests:
                        raise AllocationError(
                            f"{where}: has capacity requests, but the DRAConsumableCapacity feature is disabled")
                    for sub in request.first_available:
                        if sub.capacity_requests:
                            raise AllocationError(f"claim {claim.key}, subrequest {sub.name}: has capacity "
                                                  "requests, but the DRAConsumableCapacity feature is disabled")
                if has_subs:
                    rds = [self._validate(ci, ri, si, request.name, sub)
                           for si, sub in enumerate(request.first_available)]
                    min_devices += min(rd.num for rd in rds)
                elif request.exactly is not None:
                    rds = [self._validate(ci, ri, None, request.name, request.exactly)]
                    min_devices += rds[0].num
                else:
                    raise AllocationError(
                        f"{where}: neither exactly nor firstAvailable is set (unsupported request type?)")
                cd.choices.append(rds)
                cd.has_subs.append(has_subs)
            if min_devices > MAX_RESULTS:
                raise AllocationError(f"claim {claim.key}: number of requested devices {min_devices} "
                                      f"exceeds the claim limit of {MAX_RESULTS}")
            for i, constraint in enumerate(claim.constraints):
                if not constraint.match_attribute and not constraint.distinct_attribute:
                    raise AllocationError(f"claim {claim.key}, constraint #{i}: "
                                          "empty constraint (unsupported constraint type?)")
            out.append(cd)
        return out

    def _validate(self, ci: int, ri: int, si: int | None, base: str, sub: SubRequest) -> ReqData:
        claim = self._claim_keys[ci]
        where = f"claim {claim}, request {sub.name}"
        for i, expr in enumerate(sub.selectors):
            if not expr.strip():
                raise AllocationError(f"{where}, selector #{i}: CEL expression empty (unsupported selector type?)")
        if sub.admin_access and not self.features.admin_access:
            raise AllocationError(f"{where}: admin access is requested, but the feature is disabled")
        if not sub.device_class:
            raise AllocationError(f"{where}: missing device class name (unsupported request type?)")
        cls = self.classes.get(sub.device_class)
        if cls is None:
            raise AllocationError(f"{where}: could not retrieve device class {sub.device_class}")
        name = base if si is None else f"{base}/{sub.name}"
        rd = ReqData(ci, ri, si, base, name, sub, cls, sub.allocation_mode == "All", 0, sub.admin_access)
        if sub.allocation_mode == "ExactCount":
            rd.num = sub.count
        elif sub.allocation_mode == "All":
            pos = 0
            cands = self.ctx.cands
            for pool in self.ctx.pools:
                if pool.incomplete:
                    raise AllocationError(f"{where}: asks for all devices, but resource pool {pool.id} "
                                          "is currently being updated")
                if pool.invalid:
                    raise AllocationError(f"{where}: asks for all devices, but resource pool {pool.id} "
                                          "is currently invalid")
                while pos < len(cands) and cands[pos].pool is pool:
                    cand = cands[pos]
                    pos += 1
                    if not self.selectable(rd, cand):
                        continue
                    if self.features.consumable_capacity and request_fits(
                            cand.caps, sub.capacity_requests, cand.committed_capacity, None) is not True:
                        continue
                    rd.cands.append(cand)
            rd.num = len(rd.cands)
            rd.built = True
        else:
            raise AllocationError(f"{where}: unsupported count mode {sub.allocation_mode}")
        return rd
