"""DeviceTaintRule (KEP-5055): one taint put on every published device a selector picks, as if the driver had
published it in the ResourceSlice.

Why a module of its own: kube-scheduler does not read rules itself; its ResourceSlice lister returns slices
with the rules' taints added (staging/src/k8s.io/dynamic-resource-allocation/resourceslice/tracker,
`ListWithDeviceTaintRules`), and the allocator then treats them as any other device taint. dralab does the same
(:func:`patch_slices`), so the allocator's taint check (core/dra/prepare.py `untolerated`) is reused unchanged.

API versions and shapes, per release (staging/src/k8s.io/api/resource/*/types.go, `prerelease-lifecycle-gen`
tags, and the gates in core/kube/versions.py):

- 1.34: `resource.k8s.io/v1alpha3` only, behind DRADeviceTaints (DRADeviceTaintRules did not exist yet);
  `spec.deviceSelector` had `deviceClassName` and CEL `selectors` too: dralab does not model them (refused).
- 1.35: `v1alpha3`, behind DRADeviceTaintRules (split out); `deviceClassName` and `selectors` tombstoned;
  taint effect `None` added; `status.conditions` (EvictionInProgress) added.
- 1.36: `v1beta2` (the device taint eviction controller of that era reads rules through v1beta2) and `v1alpha3`
  [v1alpha3 still served in 1.36: not verified], both behind DRADeviceTaintRules (beta, off).
- 1.37: `v1` (GA) and `v1beta2`, DRADeviceTaintRules GA on.

Alpha and beta versions are served only when `--runtime-config` enables them (KEP-3136), as
:meth:`~dralab.core.kube.versions.Profile.check_api` checks for scheduling.k8s.io.

`spec.taint.timeAdded`: the API server sets it when it is left out; in a run dralab sets it to the time the rule
is created (the eviction controller counts `tolerationSeconds` from it), so a scenario may not give one. A dump's
`timeAdded` is kept in the manifest (an audit does not evict).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from ..kube.fields import FieldError, expect_map, join
from ..kube.versions import DEVICE_TAINT_RULE_API_VERSIONS, Profile
from .checks import check_metadata, check_taint
from .model import Device, Slice, Taint
from .validation import check_driver_name, check_pool_name, fields, obj_map, obj_str

KIND = "DeviceTaintRule"
GROUP = "resource.k8s.io"
# group/version -> the releases that serve DeviceTaintRule in it, and its stage
SERVED: dict[str, tuple[tuple[str, ...], str]] = {
    **{a.group_version: (a.releases, a.stage) for a in DEVICE_TAINT_RULE_API_VERSIONS},
    "resource.k8s.io/v1": (("1.37",), "ga"),
}
_SELECTOR_1_34 = ("deviceClassName", "selectors")  # tombstoned in 1.35


def rules_gate(profile: Profile) -> str:
    """The gate that serves DeviceTaintRules (and makes the scheduler apply them) in this release."""
    return "DRADeviceTaints" if profile.version == "1.34" else "DRADeviceTaintRules"


def rules_enabled(profile: Profile) -> bool:
    """Whether kube-scheduler applies DeviceTaintRules: both the rules' gate and device taints are on."""
    return profile.enabled("DRADeviceTaints") and profile.enabled(rules_gate(profile))


def check_served(api_version: str, path: str, profile: Profile) -> None:
    """Refuse a DeviceTaintRule in a version this release does not serve, or with its gate or runtime-config
    off, as the API server answers `no matches for kind` (naming what to turn on)."""
    where = join(path, "apiVersion")
    entry = SERVED.get(api_version)
    served = [v for v, (releases, _) in SERVED.items() if profile.version in releases]
    if entry is None or profile.version not in entry[0]:
        raise FieldError(where, f"Kubernetes {profile.version} does not serve {KIND} in `{api_version}`; it serves "
                                f"{', '.join(served)}")
    profile.require("DRADeviceTaints", where, f"{KIND} `{api_version}`")
    if profile.version != "1.34":
        profile.require("DRADeviceTaintRules", where, f"{KIND} `{api_version}`")
    if entry[1] != "ga" and api_version not in profile.runtime_config:
        raise FieldError(where, f"`{api_version}` is a {entry[1]} API, not enabled by default in Kubernetes "
                                f"{profile.version}; enable it in spec.kubernetes.runtimeConfig or --runtime-config "
                                f"(`{api_version}=true`)")


@dataclass(frozen=True)
class TaintRule:
    """A DeviceTaintRule as the allocator and the eviction controller need it: a device matches when every
    selector field that is set equals the device's (an empty selector matches every device)."""

    name: str
    taint: Taint
    driver: str = ""
    pool: str = ""
    device: str = ""
    manifest: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)

    def matches(self, driver: str, pool: str, device: str) -> bool:
        """Upstream `ruleMatchesDevice` (the 1.35+ selector: driver, pool, device)."""
        return ((not self.driver or self.driver == driver) and (not self.pool or self.pool == pool)
                and (not self.device or self.device == device))


def convert_rule(manifest: dict[str, Any], path: str = "", profile: Profile | None = None, *,
                 scenario: bool = False) -> TaintRule:
    """Check a DeviceTaintRule as the API server of `profile`'s release does on create (no profile: only the
    shape) and convert it. `scenario`: a scenario's rule, whose `timeAdded` dralab sets itself."""
    api_version = obj_str(manifest, "apiVersion", path)
    if profile is not None:
        check_served(api_version, path, profile)
    elif api_version not in SERVED:
        raise FieldError(join(path, "apiVersion"), f"expected one of {', '.join(SERVED)}, got `{api_version}`")
    fields(manifest, path, ("apiVersion", "kind", "metadata", "spec", "status"))
    name, _ = check_metadata(manifest, path, namespaced=False)
    spec_path = join(path, "spec")
    spec = expect_map(manifest.get("spec"), spec_path) if manifest.get("spec") is not None else None
    if spec is None:
        raise FieldError(spec_path, "Required value")
    fields(spec, spec_path, ("deviceSelector", "taint"))
    sel_path = join(spec_path, "deviceSelector")
    selector = obj_map(spec, "deviceSelector", spec_path) or {}
    old = profile is not None and profile.version == "1.34"
    fields(selector, sel_path, ("driver", "pool", "device", *(_SELECTOR_1_34 if old or profile is None else ())))
    for name_ in _SELECTOR_1_34:
        if selector.get(name_) not in (None, "", []):
            raise FieldError(join(sel_path, name_), "not modelled by dralab (a DeviceClass or CEL selector in a "
                                                    "DeviceTaintRule; Kubernetes 1.35 removed it): name the driver, "
                                                    "pool and device instead")
    driver = obj_str(selector, "driver", sel_path)
    if driver:
        check_driver_name(driver, join(sel_path, "driver"))
    pool = obj_str(selector, "pool", sel_path)
    if pool:
        check_pool_name(pool, join(sel_path, "pool"))
    device = obj_str(selector, "device", sel_path)
    taint_path = join(spec_path, "taint")
    if spec.get("taint") is None:
        raise FieldError(taint_path, "Required value")
    taint = check_taint(spec["taint"], taint_path)
    if old and taint.effect == "None":
        raise FieldError(join(taint_path, "effect"), "Kubernetes 1.34 has no device taint effect `None` (added in "
                                                     "1.35); supported values: \"NoExecute\", \"NoSchedule\"")
    if scenario and spec["taint"].get("timeAdded") is not None:
        raise FieldError(join(taint_path, "timeAdded"), "dralab sets it to the time the rule is created in the run "
                                                        "(as the API server does when it is left out); leave it out")
    return TaintRule(name=name, taint=taint, driver=driver, pool=pool, device=device, manifest=manifest)


def status_condition(manifest: Mapping[str, Any]) -> dict[str, Any] | None:
    """The rule's EvictionInProgress condition, if its status has one."""
    status = manifest.get("status")
    for cond in (status.get("conditions") or []) if isinstance(status, dict) else []:
        if isinstance(cond, dict) and cond.get("type") == "EvictionInProgress":
            return cond
    return None


def rule_taints(rules: Sequence[TaintRule], driver: str, pool: str, device: str) -> tuple[Taint, ...]:
    """The taints the rules add to one device, in rule-name order (as the tracker appends them)."""
    return tuple(r.taint for r in rules if r.matches(driver, pool, device))


def patch_slices(slices: Iterable[Slice], rules: Sequence[TaintRule]) -> list[Slice]:
    """The slices as kube-scheduler lists them with the rules applied: a device a rule selects gets the rule's
    taint after its own; slices no rule touches are the very same objects (rules are few, slices many, and the
    allocator caches per device object). `rules` sorted by name."""
    out: list[Slice] = []
    for slc in slices:
        relevant = [r for r in rules if (not r.driver or r.driver == slc.driver) and (not r.pool or r.pool == slc.pool)]
        if not relevant:
            out.append(slc)
            continue
        changed = False
        devices: list[Device] = []
        for d in slc.devices:
            extra = rule_taints(relevant, slc.driver, slc.pool, d.id.device)
            if extra:
                changed = True
                d = replace(d, taints=d.taints + extra)
            devices.append(d)
        out.append(replace(slc, devices=tuple(devices)) if changed else slc)
    return out


def fault_rule(name: str, params: Mapping[str, Any]) -> dict[str, Any]:
    """The DeviceTaintRule a `device-taint` fault creates (core/scenario/faults.py): its `driver`, `pool` and
    `device` as the selector, its `taint` as the taint. Written in the v1 shape (the hub: 1.35-1.37's rule
    versions all have this spec), whatever version the release serves it in."""
    selector = {k: params[k] for k in ("driver", "pool", "device") if params.get(k)}
    return {"apiVersion": "resource.k8s.io/v1", "kind": KIND, "metadata": {"name": name},
            "spec": {"deviceSelector": selector, "taint": dict(params.get("taint") or {})}}


def fault_rule_name(fault: str, params: Mapping[str, Any]) -> str:
    """The rule's name: the fault's `rule`, else `device-taint-<n>` for fault `fault/<n>`."""
    return str(params.get("rule") or f"device-taint-{fault.rsplit('/', 1)[-1]}")


def served_version(profile: Profile) -> str:
    """The most stable version this release serves DeviceTaintRule in (v1, else v1beta2, else v1alpha3)."""
    for version in reversed(SERVED):
        if profile.version in SERVED[version][0]:
            return version
    return next(iter(SERVED))


def inventory_rules(other: Iterable[Mapping[str, Any]]) -> list[TaintRule]:
    """The DeviceTaintRules among a dump's other objects (core/dra/api.py keeps them there, checked), by name."""
    rules = [convert_rule(dict(o), "") for o in other if o.get("kind") == KIND
             and str(o.get("apiVersion", "")).startswith(GROUP + "/")]
    return sorted(rules, key=lambda r: r.name)
