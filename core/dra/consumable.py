"""Consumable capacity (KEP-5075): how much of each device capacity a request consumes, and whether it fits.

Upstream: `structured/internal/experimental/consumable_capacity.go` (1.35).

- Capacity names are compared as published: a request's `capacity.requests` keys against the names the
  slice used for the device's capacities (`memory` and `gpu.example.com/memory` are different keys).
- A request names some capacities; a capacity it does not name consumes the policy's `default`, or else
  the capacity's full value.
- A named amount is rounded up by the device's `requestPolicy`: `validRange` (below `min` -> `min`; with
  `step` -> `min + ceil((amount - min) / step) * step`), or `validValues` (the smallest valid value that
  is at least the amount). An amount above `validRange.max`, not on a step, or not among the valid values
  violates the policy (the `default` never does).
- The device fits when, for every capacity, committed + being allocated in this call + this request is at
  most the capacity's value. A request naming a capacity the device lacks makes the device ineligible.

Amounts are exact fractions (upstream rounds the step arithmetic to whole units with `Value()`; the two
agree on every integral quantity, which is what drivers publish).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from fractions import Fraction

from .model import Capacity, CapacityPolicy, Device

ZERO = Fraction(0)


def published_capacity(device: Device) -> dict[str, Capacity]:
    """The device's capacities keyed by the names the slice published."""
    names = device.published_capacity_names
    if not names:
        return dict(device.capacity)
    return {names.get(q, q): cap for q, cap in device.capacity.items()}


def consumed_amount(requested: Fraction | None, cap: Capacity) -> Fraction:
    policy = cap.policy
    if requested is None:
        if policy is not None and policy.default is not None:
            return policy.default
        return cap.value
    if policy is None:
        return requested
    if policy.valid_range is not None:
        low, _high, step = policy.valid_range
        if requested < low:
            return low
        if step is None or step <= 0:
            return requested
        return low + math.ceil((requested - low) / step) * step
    for valid in policy.valid_values:
        if requested <= valid:
            return valid
    return requested


def violates_policy(amount: Fraction, policy: CapacityPolicy | None) -> bool:
    if policy is None:
        return False
    if policy.default is not None and amount == policy.default:
        return False
    if policy.valid_range is not None:
        low, high, step = policy.valid_range
        if high is not None and amount > high:
            return True
        return step is not None and step > 0 and (amount - low) % step != 0
    if policy.valid_values:
        return amount not in policy.valid_values
    return False


def consumed_capacity(caps: Mapping[str, Capacity], requests: Mapping[str, Fraction]) -> dict[str, Fraction]:
    """What one allocation of a device consumes, for every capacity of the device (the result's
    `consumedCapacity`)."""
    return {name: consumed_amount(requests.get(name), cap) for name, cap in caps.items()}


def request_fits(
    caps: Mapping[str, Capacity],
    requests: Mapping[str, Fraction],
    committed: Mapping[str, Fraction] | None,
    allocating: Mapping[str, Fraction] | None,
) -> bool | None:
    """True when the request fits the device; False when it does not (policy or remaining capacity);
    None when the request names a capacity the device does not have (upstream: an error that makes the
    device ineligible for this request)."""
    for name in requests:
        if name not in caps:
            return None
    for name, cap in caps.items():
        amount = consumed_amount(requests.get(name), cap)
        if violates_policy(amount, cap.policy):
            return False
        total = amount
        if committed:
            total += committed.get(name, ZERO)
        if allocating:
            total += allocating.get(name, ZERO)
        if total > cap.value:
            return False
    return True
