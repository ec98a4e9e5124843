"""Device capacity (with the consumable-capacity request policy) and shared counters of a ResourceSlice.

Checked as the 1.35 API server checks them (``validateRequestPolicy``, ``validateCounterSet``,
``validateDeviceCounterConsumption``); quantities become exact ``Fraction``s.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

from ..kube.fields import expect_map, index, join
from .model import Capacity, CapacityPolicy, CounterConsumption
from .validation import (
    CAPACITY_REQUEST_POLICY_DISCRETE_MAX_OPTIONS,
    RESOURCE_SLICE_MAX_COUNTER_SETS,
    RESOURCE_SLICE_MAX_COUNTERS_PER_COUNTER_SET,
    RESOURCE_SLICE_MAX_COUNTERS_PER_DEVICE_COUNTER_CONSUMPTION,
    RESOURCE_SLICE_MAX_DEVICE_COUNTER_CONSUMPTIONS_PER_DEVICE,
    check_dns_label,
    duplicate,
    fields,
    forbidden,
    invalid,
    obj_list,
    obj_map,
    quantity,
    required,
    required_str,
    text_of,
    too_many,
)

__all__ = ["check_capacity", "check_consumptions", "check_counter_sets"]


def check_capacity(value: object, path: str, multi: bool) -> Capacity:
    cap = expect_map(value, path)
    fields(cap, path, ("value", "requestPolicy"))
    if cap.get("value") is None:
        raise required(join(path, "value"))
    total = quantity(cap["value"], join(path, "value"))
    policy_raw = obj_map(cap, "requestPolicy", path)
    if policy_raw is None:
        return Capacity(total)
    policy_path = join(path, "requestPolicy")
    if not multi:
        raise forbidden(policy_path, "allowMultipleAllocations must be true")
    return Capacity(total, _policy(policy_raw, policy_path, total, text_of(cap["value"])))


def _policy(policy: dict[str, Any], path: str, total: Fraction, total_text: str) -> CapacityPolicy:
    fields(policy, path, ("default", "validValues", "validRange"))
    default_path = join(path, "default")
    default = None if policy.get("default") is None else quantity(policy["default"], default_path)
    default_text = text_of(policy.get("default"))
    values_path = join(path, "validValues")
    raw_values = obj_list(policy, "validValues", path)
    values = [quantity(v, index(values_path, i)) for i, v in enumerate(raw_values)]
    rng = obj_map(policy, "validRange", path)
    if values and rng is not None:
        raise forbidden(
            path, 'exactly one policy can be specified, cannot specify "validValues" and "validRange" at the same time'
        )
    if values:
        if default is None:
            raise required(default_path, "required when validValues is defined")
        for i in range(len(values) - 1):
            if values[i] > values[i + 1]:
                raise invalid(
                    index(values_path, i + 1), text_of(raw_values[i + 1]), "values must be sorted in ascending order"
                )
        if len(values) > CAPACITY_REQUEST_POLICY_DISCRETE_MAX_OPTIONS:
            raise too_many(values_path, len(values), CAPACITY_REQUEST_POLICY_DISCRETE_MAX_OPTIONS)
        for i, v in enumerate(values):
            if v > total:
                raise invalid(
                    index(values_path, i), text_of(raw_values[i]), f"option is larger than capacity value: {total_text}"
                )
            if v in values[:i]:
                raise duplicate(index(values_path, i), text_of(raw_values[i]))
        if default not in values:
            raise invalid(values_path, default_text, "default value is not valid according to the requestPolicy")
        return CapacityPolicy(default=default, valid_values=tuple(values))
    if rng is None:
        return CapacityPolicy(default=default)
    rng_path = join(path, "validRange")
    fields(rng, rng_path, ("min", "max", "step"))
    if default is None:
        raise required(default_path, "required when validRange is defined")
    if rng.get("min") is None:
        raise required(join(rng_path, "min"), "required when validRange is defined")
    low = quantity(rng["min"], join(rng_path, "min"))
    high = None if rng.get("max") is None else quantity(rng["max"], join(rng_path, "max"))
    step = None if rng.get("step") is None else quantity(rng["step"], join(rng_path, "step"))
    low_text, high_text, step_text = text_of(rng["min"]), text_of(rng.get("max")), text_of(rng.get("step"))
    if low > total:
        raise invalid(join(rng_path, "min"), low_text, f"min is larger than capacity value: {total_text}")
    if default < low:
        raise invalid(default_path, default_text, f"default is less than min: {low_text}")
    if high is not None:
        if low > high:
            raise invalid(join(rng_path, "max"), low_text, f"min is larger than max: {high_text}")
        if high > total:
            raise invalid(join(rng_path, "max"), high_text, f"max is larger than capacity value: {total_text}")
        if default > high:
            raise invalid(default_path, default_text, f"default is more than max: {high_text}")
    if step is not None:
        step_path = join(rng_path, "step")
        if step <= 0:
            raise invalid(step_path, step_text, "must be greater than zero")
        if low + step > total:
            raise invalid(
                step_path, step_text, f"one step {_plain(low + step)} is larger than capacity value: {total_text}"
            )
        for value, text in ((default, default_text), (high, high_text)):
            if value is not None and ((value - low) / step).denominator != 1:
                raise invalid(
                    step_path, text, f"value is not a multiple of a given step ({step_text}) from ({low_text})"
                )
    return CapacityPolicy(default=default, valid_range=(low, high, step))


def _plain(value: Fraction) -> str:
    return str(value.numerator) if value.denominator == 1 else str(float(value))


def _counters(value: object, path: str, limit: int) -> dict[str, Fraction]:
    counters = expect_map(value, path)
    if not counters:
        raise required(path)
    if len(counters) > limit:
        raise too_many(path, len(counters), limit)
    out: dict[str, Fraction] = {}
    for key, item in counters.items():
        key_path = join(path, key)
        check_dns_label(key, key_path)
        counter = expect_map(item, key_path)
        fields(counter, key_path, ("value",))
        if counter.get("value") is None:
            raise required(join(key_path, "value"))
        out[key] = quantity(counter["value"], join(key_path, "value"))
    return out


def check_counter_sets(items: list[Any], path: str) -> dict[str, dict[str, Fraction]]:
    if len(items) > RESOURCE_SLICE_MAX_COUNTER_SETS:
        raise too_many(path, len(items), RESOURCE_SLICE_MAX_COUNTER_SETS)
    out: dict[str, dict[str, Fraction]] = {}
    for i, item in enumerate(items):
        set_path = index(path, i)
        counter_set = expect_map(item, set_path)
        fields(counter_set, set_path, ("name", "counters"))
        name = check_dns_label(required_str(counter_set, "name", set_path), join(set_path, "name"))
        if counter_set.get("counters") is None:
            raise required(join(set_path, "counters"))
        counters = _counters(
            counter_set["counters"], join(set_path, "counters"), RESOURCE_SLICE_MAX_COUNTERS_PER_COUNTER_SET
        )
        if name in out:
            raise duplicate(set_path, name)
        out[name] = counters
    return out


def check_consumptions(device: dict[str, Any], path: str) -> tuple[CounterConsumption, ...]:
    items = obj_list(device, "consumesCounters", path, RESOURCE_SLICE_MAX_DEVICE_COUNTER_CONSUMPTIONS_PER_DEVICE)
    out: list[CounterConsumption] = []
    for i, item in enumerate(items):
        item_path = index(join(path, "consumesCounters"), i)
        consumption = expect_map(item, item_path)
        fields(consumption, item_path, ("counterSet", "counters"))
        counter_set = check_dns_label(required_str(consumption, "counterSet", item_path), join(item_path, "counterSet"))
        if consumption.get("counters") is None:
            raise required(join(item_path, "counters"))
        counters = _counters(
            consumption["counters"],
            join(item_path, "counters"),
            RESOURCE_SLICE_MAX_COUNTERS_PER_DEVICE_COUNTER_CONSUMPTION,
        )
        if any(c.counter_set == counter_set for c in out):
            raise duplicate(item_path, counter_set)
        out.append(CounterConsumption(counter_set=counter_set, counters=counters))
    return tuple(out)
