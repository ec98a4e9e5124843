"""A node group's settings for a cloud that misbehaves (``spec.nodeGroups[]``), beside core/scenario/cloud.py's.

- ``deleteDelay`` (a duration or ``{min, max}``, drawn per deletion): the autoscaler's `DeleteNodes` call is
  answered by the cloud that much later, the node (and its bill) staying meanwhile;
- ``deleteFailureRate`` (0..1): the probability that a deletion fails; the node stays and the autoscaler
  sees a failed scale-down (core/autoscaler/disruption/cloud_deletions.py);
- ``retryStockouts`` (bool): nodes the cloud has no stock for are not reported failed (`out-of-stock`) but
  kept in the target size and retried in silence until stock returns, as an AWS Auto Scaling group or a
  Cluster API MachinePool does (kubernetes/autoscaler#9120);
- ``neverReadyRate`` (0..1): the probability that a new node registers and never turns Ready;
- ``zoneQuota`` (zone -> count): the most nodes of the group the cloud runs in that zone;
- ``preemptionRate`` (per node-hour) and ``preemptionNotice`` (default 2m, AWS's; GCE's is 30s): a spot group;
  each node the cloud makes is reclaimed after a time drawn from an exponential distribution of that rate
  (counted from when it turns Ready), with that notice (core/controllers/cloud_ops.py).

Any of them set makes the group's `NodeGroupCloudDefined` event (core/log/events_cloud.py): a group without
them writes the log it always wrote.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..kube.defaults import SPOT_INTERRUPTION_NOTICE_MS
from ..kube.fields import (
    FieldError,
    expect_bool,
    expect_duration,
    expect_int,
    expect_map,
    expect_number,
    join,
    label_value_error,
)
from ..kube.limits import MAX_NODE_COUNT
from ..log.events_cloud import NodeGroupCloudDefined

OPS_FIELDS = ("deleteDelay", "deleteFailureRate", "retryStockouts", "neverReadyRate", "zoneQuota", "preemptionRate",
              "preemptionNotice")
MAX_PREEMPTION_RATE = 1000.0  # per node-hour: beyond this a node would not live a few seconds


def _rate(value: object, path: str) -> float:
    rate = expect_number(value, path, minimum=0)
    if rate > 1:
        raise FieldError(path, f"must be a probability between 0 and 1, got {value}")
    return rate


def check_cloud_ops(m: dict[str, Any], path: str, zones: tuple[str, ...],
                    delay: Callable[[object, str], tuple[int, int]]) -> NodeGroupCloudDefined | None:
    """The group's misbehaviour settings at ``path`` (None: none set). ``zones``: the group's zones (a zone
    quota names one of them); ``delay`` reads a duration or ``{min, max}`` as ``provisionDelay`` does."""
    if all(m.get(name) is None for name in OPS_FIELDS):
        return None
    quota: dict[str, int] = {}
    if m.get("zoneQuota") is not None:
        q_path = join(path, "zoneQuota")
        for zone, count in expect_map(m["zoneQuota"], q_path).items():
            z_path = join(q_path, str(zone))
            error = label_value_error(str(zone))
            if error is not None:
                raise FieldError(z_path, error)
            if zone not in zones:
                known = ", ".join(f"`{z}`" for z in zones) or "none"
                raise FieldError(z_path, f"not one of the group's zones ({known})")
            quota[str(zone)] = expect_int(count, z_path, minimum=0, maximum=MAX_NODE_COUNT)
    return NodeGroupCloudDefined(
        group=str(m.get("name")),
        delete_delay_ms=delay(m.get("deleteDelay"), join(path, "deleteDelay")),
        delete_failure_rate=0.0 if m.get("deleteFailureRate") is None
        else _rate(m["deleteFailureRate"], join(path, "deleteFailureRate")),
        retry_stockouts=False if m.get("retryStockouts") is None
        else expect_bool(m["retryStockouts"], join(path, "retryStockouts")),
        never_ready_rate=0.0 if m.get("neverReadyRate") is None
        else _rate(m["neverReadyRate"], join(path, "neverReadyRate")),
        zone_quota=quota,
        preemption_rate=0.0 if m.get("preemptionRate") is None
        else _per_hour(m["preemptionRate"], join(path, "preemptionRate")),
        preemption_notice_ms=SPOT_INTERRUPTION_NOTICE_MS if m.get("preemptionNotice") is None
        else expect_duration(m["preemptionNotice"], join(path, "preemptionNotice"), positive=True),
    )


def _per_hour(value: object, path: str) -> float:
    rate = expect_number(value, path, minimum=0)
    if rate > MAX_PREEMPTION_RATE:
        raise FieldError(path, f"at most {MAX_PREEMPTION_RATE:g} per node-hour, got {value}")
    return rate
