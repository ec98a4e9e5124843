"""A node group's `drivers[].bindingConditions` in a scenario: how its emulated drivers answer the binding
conditions of their devices (KEP-5007) once the scheduler's PreBind waits on them
(core/controllers/device_binding.py acts on it).

    drivers:
    - name: gpu.fabric.example.com
      bindingConditions:
        delay: 45s               # every device of the driver: its binding conditions True 45 s after PreBind began
        devices:                 # per device, first match wins (else the driver's `delay`, outcome `ready`)
        - {device: gpu-1, outcome: never}            # never attaches: the binding timeout ends the wait
        - {device: gpu-2, delay: 20s, outcome: fail} # its bindingFailureCondition True after 20 s (and tainted)

A driver with no `bindingConditions` sets a device's binding conditions True at once (when PreBind begins),
so a dump or scenario whose devices have binding conditions still binds (at PreBind's first 5 s poll).
"""

from __future__ import annotations

from typing import Any

from ..kube.fields import (
    FieldError,
    check_fields,
    expect_duration,
    expect_enum,
    expect_list,
    expect_map,
    expect_str,
    index,
    join,
)
from ..log.events import DeviceBindingRule

OUTCOMES = ("ready", "never", "fail")


def binding_rules(value: object, path: str, slices: list[dict[str, Any]]) -> tuple[DeviceBindingRule, ...]:
    """The rules of every driver entry of a node group (`drivers`, already checked by cloud.py) that has
    `bindingConditions`; per-device rules first, then the driver's default."""
    if value is None:
        return ()
    out: list[DeviceBindingRule] = []
    for i, item in enumerate(expect_list(value, path)):
        d = expect_map(item, index(path, i))
        spec = d.get("bindingConditions")
        if spec is None:
            continue
        b_path = join(index(path, i), "bindingConditions")
        b = expect_map(spec, b_path)
        check_fields(b, b_path, ("delay", "devices"))
        driver = str(d["name"])
        names = {str(dev.get("name")) for t in slices if t["spec"]["driver"] == driver
                 for dev in t["spec"].get("devices") or []}
        default = 0 if b.get("delay") is None else expect_duration(b["delay"], join(b_path, "delay"))
        for j, entry in enumerate(expect_list(b.get("devices") or [], join(b_path, "devices"))):
            e_path = index(join(b_path, "devices"), j)
            e = expect_map(entry, e_path)
            check_fields(e, e_path, ("device", "delay", "outcome"), required=("device",))
            device = expect_str(e["device"], join(e_path, "device"), nonempty=True)
            if device not in names:
                raise FieldError(join(e_path, "device"), f"no device `{device}` in this driver's resourceSlices")
            delay = default if e.get("delay") is None else expect_duration(e["delay"], join(e_path, "delay"))
            outcome = "ready" if e.get("outcome") is None else expect_enum(e["outcome"], join(e_path, "outcome"),
                                                                            OUTCOMES)
            out.append(DeviceBindingRule(driver=driver, device=device, delay_ms=delay, outcome=outcome))
        out.append(DeviceBindingRule(driver=driver, delay_ms=default))
    return tuple(out)
