"""The cloud faults of `spec.faults` (core/scenario/faults.py), as the cloud reactor sees them.

The cloud (core/controllers/cloud.py) answers a scale-up at the time it decides; these helpers say how the
faults active at that time change its answer for a group, so the answer stays a function of the view
(`view.faults`) and the decision's time only:

- `cloud-stockout`: no stock at all (a stock window of 0: the nodes fail `out-of-stock`);
- `quota-cut`: the group's quota is the fault's `quota` (never raised: the lowest of the quotas applies);
- with a `zone`, `cloud-stockout` and `quota-cut` hit that zone of the group only: the cloud places the
  group's nodes in its other zones (core/controllers/cloud_zones.py);
- `partial-fulfilment`: of each request, only floor(nodes * `fraction`) nodes are delivered; the others
  fail `out-of-stock`. That is how a partially fulfilled resize shows upstream: a GCE MIG leaves the
  instances it cannot create in CREATING with error RESOURCE_POOL_EXHAUSTED / ZONE_RESOURCE_POOL_EXHAUSTED,
  which cluster-autoscaler maps to `cloudprovider.OutOfResourcesErrorClass`
  (kubernetes/autoscaler cluster-autoscaler/cloudprovider/gce/autoscaling_gce_client.go,
  `ErrorCodeResourcePoolExhausted`); an AWS ASG's unlaunched instances fail with
  InsufficientInstanceCapacity, the same class. So no new reason is needed.

A fault is active at `now` when `start_ms <= now` and (`until_ms < 0` or `now < until_ms`), whether or not
the chaos reactor has marked it yet (it only writes the markers).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

from ..state.cluster import ClusterState
from ..state.objects import FaultState

CLOUD_KINDS = ("cloud-stockout", "quota-cut", "partial-fulfilment")


def is_active(fault: FaultState, now: int) -> bool:
    """Whether a fault is in force at `now` (docs/scenario-format.md#faults)."""
    return fault.start_ms <= now and (fault.until_ms < 0 or now < fault.until_ms)


def active_faults(view: ClusterState, kinds: Iterable[str], target: str, now: int) -> list[FaultState]:
    """The faults of these kinds on `target` in force at `now`, in fault order."""
    wanted = set(kinds)
    return [f for f in view.faults.values() if f.kind in wanted and f.target == target and is_active(f, now)]


@dataclass(frozen=True)
class CloudFaults:
    """What the active cloud faults do to one group's answers at one time (nothing, by default)."""

    stockout: bool = False
    quota: int = -1  # the cut quota (-1: no cut)
    fraction: float = 1.0  # the share of each request delivered
    zones_out: frozenset[str] = frozenset()  # zones of the group stocked out (a cloud-stockout with a `zone`)
    zone_quota: tuple[tuple[str, int], ...] = ()  # (zone, quota) of quota-cuts with a `zone`

    def quota_of(self, group_quota: int) -> int:
        """The group's quota under a cut: the lower of the two (-1: unlimited)."""
        if self.quota < 0:
            return group_quota
        return self.quota if group_quota < 0 else min(group_quota, self.quota)

    def deliverable(self, nodes: int) -> int:
        """How many nodes of a request of `nodes` the cloud may deliver (floor(nodes * fraction))."""
        return nodes if self.fraction >= 1 else math.floor(nodes * self.fraction)


NO_FAULTS = CloudFaults()


def cloud_faults(view: ClusterState, group: str, now: int) -> CloudFaults:
    """The cloud faults in force on `group` at `now`, combined: the tightest of each kind wins."""
    if not view.faults:
        return NO_FAULTS
    faults = active_faults(view, CLOUD_KINDS, group, now)
    if not faults:
        return NO_FAULTS
    quotas = [int(f.params.get("quota", 0)) for f in faults if f.kind == "quota-cut" and "zone" not in f.params]
    fractions = [float(f.params.get("fraction", 1.0)) for f in faults if f.kind == "partial-fulfilment"]
    return CloudFaults(stockout=any(f.kind == "cloud-stockout" and "zone" not in f.params for f in faults),
                       quota=min(quotas) if quotas else -1,
                       fraction=min(fractions) if fractions else 1.0,
                       zones_out=frozenset(str(f.params["zone"]) for f in faults
                                           if f.kind == "cloud-stockout" and "zone" in f.params),
                       zone_quota=tuple((str(f.params["zone"]), int(f.params.get("quota", 0))) for f in faults
                                        if f.kind == "quota-cut" and "zone" in f.params))
