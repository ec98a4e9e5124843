"""Physical GPUs as the metrics count them: one unit per dedicated device, and one per shared-counter
set for partitionable devices (the partitions of one GPU consume the same counter set, so the GPU is
counted once however it is split), plus the share of a device that consumable capacity hands out.

Kept apart from metrics.py because both the run's replay there and the template arithmetic (how many
GPUs a node group's node brings) need the same notion of "one GPU".
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from fractions import Fraction
from typing import Any

from ..dra.model import Device
from ..scenario.dra import render_slice_templates

ONE = Fraction(1)

Unit = tuple[str, str, str, str]  # one physical GPU: ("device" | "counters", driver, pool, device or counter set)


def is_gpu_resource(resource: str) -> bool:
    """Extended resources that are GPUs (`nvidia.com/gpu`, `amd.com/gpu`)."""
    return resource.endswith("/gpu")


def _units(driver: str, pool: str, device: str, counter_sets: Iterable[str]) -> list[Unit]:
    sets = list(dict.fromkeys(counter_sets))
    if sets:
        return [("counters", driver, pool, s) for s in sets]
    return [("device", driver, pool, device)]


def device_units(device: Device) -> list[Unit]:
    return _units(device.id.driver, device.id.pool, device.id.device,
                  (c.counter_set for c in device.consumes_counters))


def capacity_share(device: Device, consumed: dict[str, Fraction] | None) -> Fraction:
    """The share of a device shared through consumable capacity (KEP-5075) that its allocations consume:
    the most-consumed of its capacities (`consumedCapacity` is keyed by the names the slice published).
    A share that consumes no capacity, or a device without capacities, counts whole."""
    ratios = []
    for qualified, cap in device.capacity.items():
        if cap.value <= 0 or not consumed:
            continue
        amount = consumed.get(device.published_capacity_names.get(qualified, qualified), consumed.get(qualified))
        if amount is not None:
            ratios.append(amount / cap.value)
    return min(ONE, max(ratios)) if ratios else ONE


def template_gpus(templates: Sequence[dict[str, Any]], node_name: str) -> int:
    """Physical GPUs in the slices a group's templates render for one node (counter sets counted once)."""
    units: set[Unit] = set()
    for manifest in render_slice_templates(templates, node_name):
        spec = manifest.get("spec") or {}
        driver, pool = str(spec.get("driver", "")), str((spec.get("pool") or {}).get("name", ""))
        for device in spec.get("devices") or []:
            sets = (str(c.get("counterSet", "")) for c in device.get("consumesCounters") or [])
            units.update(_units(driver, pool, str(device.get("name", "")), sets))
    return len(units)
