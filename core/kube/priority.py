"""Priority admission for Pods (plugin/pkg/admission/priority, admission.go `admitPod`), and the pod fields
preemption reads: `priorityClassName` resolves to `spec.priority` and `spec.preemptionPolicy` from the
scenario's PriorityClasses (scheduling.k8s.io/v1, checked by podgroups.py `check_priority_class`).

As the admission plugin on create:
- `priorityClassName` must name a class (the two system classes always exist), else "no PriorityClass with
  name <n> was found";
- without a name, the globalDefault class is used (its name written into the pod), else priority 0;
- a `priority` given in the pod must equal the computed one, a `preemptionPolicy` given must equal the class's
  ("must not be provided in pod spec; priority admission controller computed ...").

One difference, kept on purpose: a pod that names no class and carries `spec.priority` is taken as already
admitted (dralab's scenarios set `spec.priority` directly, as dumps show it), unless a globalDefault class
exists, which then applies as upstream.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from .fields import FieldError, expect_enum, expect_int, expect_str, join
from .podgroup_fields import PREEMPTION_POLICIES
from .podgroups import _classes, _global_default

DEFAULT_POLICY = "PreemptLowerPriority"


def check_preemption_fields(spec: Mapping[str, Any], spec_path: str) -> None:
    """The pod fields of preemption: `preemptionPolicy` (PreemptLowerPriority | Never),
    `terminationGracePeriodSeconds` (an int >= 0, the grace a preemption victim gets), `priorityClassName`."""
    if spec.get("preemptionPolicy") is not None:
        expect_enum(spec["preemptionPolicy"], join(spec_path, "preemptionPolicy"), PREEMPTION_POLICIES)
    if spec.get("terminationGracePeriodSeconds") is not None:
        expect_int(spec["terminationGracePeriodSeconds"], join(spec_path, "terminationGracePeriodSeconds"),
                   minimum=0)
    if spec.get("priorityClassName") is not None:
        expect_str(spec["priorityClassName"], join(spec_path, "priorityClassName"))


def admit_pod(spec: dict[str, Any], spec_path: str, priority_classes: Iterable[Mapping[str, Any]]) -> None:
    """Resolve a pod spec's priority in place, as the priority admission plugin does (see the module's text)."""
    check_preemption_fields(spec, spec_path)
    classes = list(priority_classes)
    by_name = _classes(classes)
    name = spec.get("priorityClassName")
    if name:
        if name not in by_name:
            raise FieldError(join(spec_path, "priorityClassName"), f"no PriorityClass with name {name} was found")
    else:
        default = _global_default(classes)
        if default is None:
            return  # priority 0 (or the pod's own, taken as admitted), PreemptLowerPriority: read as defaults
        name = str(default["metadata"]["name"])
    value, policy = by_name[name]
    if spec.get("priority") is not None and spec["priority"] != value:
        raise FieldError(join(spec_path, "priority"),
                         f"the integer value of priority ({spec['priority']}) must not be provided in pod spec; "
                         f"priority admission controller computed {value} from the given PriorityClass name")
    if spec.get("preemptionPolicy") not in (None, policy):
        raise FieldError(join(spec_path, "preemptionPolicy"),
                         f"the string value of PreemptionPolicy ({spec['preemptionPolicy']}) must not be provided in "
                         f"pod spec; priority admission controller computed {policy} from the given PriorityClass "
                         "name")
    spec["priorityClassName"], spec["priority"], spec["preemptionPolicy"] = name, value, policy
