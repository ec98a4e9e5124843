"""Kubernetes version profiles: which release a scenario or a dump emulates, its feature gates and the API
versions its API server serves.

A real cluster is one release with a set of feature gates: a gate off by default stays off unless the
operator turns it on, a GA gate may be locked on, and an API version is served only by the releases that
have it (alpha and beta API versions also only when `--runtime-config` enables them, KEP-3136). dralab
does the same: a scenario (`spec.kubernetes`) or a command (`--kubernetes-version`, `--feature-gates`,
`--runtime-config`) names a release, 1.34 to 1.37 (default: 1.37, the current one), and every check and
reactor asks the resulting :class:`Profile`.

Sources (see ../shared/reference/k8s-1.37.md for the citations): the versioned feature-gate specs of
kube-scheduler and kube-apiserver (pkg/features/kube_features.go, `versionedFeatureGates`), the KEPs named
per gate, and the API groups' `prerelease-lifecycle-gen` tags. Where the sources disagree the choice is
written next to the gate. The table in docs/versions.md shows it all per release.

Logs written before profiles existed carry no `kubernetes` entry in their run configuration: they were
made by dralab's model of 1.35 (:data:`LEGACY_VERSION`), and are read as such.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Literal

from .bugs import BUGS, DEFAULT_KUEUE_VERSION, KUEUE_VERSIONS, present
from .fields import FieldError, join

VERSIONS = ("1.34", "1.35", "1.36", "1.37")
DEFAULT_VERSION = "1.37"  # the current release
LEGACY_VERSION = "1.35"  # what a log without a `kubernetes` entry was made by

Stage = Literal["alpha", "beta", "ga", "locked", "removed"]


@dataclass(frozen=True)
class GateSpec:
    """A feature gate at one release: its stage and default (`locked`: GA and locked to its default;
    `removed`: the gate is gone, merged into `merged_into`, and naming it is an error)."""

    stage: Stage
    default: bool
    merged_into: str = ""


def _g(spec: str) -> GateSpec:
    """`A-` alpha off, `B+` beta on, `B-` beta off, `GA+` GA on, `L+` GA locked on, `X:Gate` removed."""
    if spec.startswith("X:"):
        return GateSpec("removed", False, spec[2:])
    stage = {"A": "alpha", "B": "beta", "GA": "ga", "L": "locked"}[spec[:-1]]
    return GateSpec(stage, spec.endswith("+"))  # type: ignore[arg-type]


def _row(*specs: str | None) -> dict[str, GateSpec]:
    return {v: _g(s) for v, s in zip(VERSIONS, specs, strict=True) if s is not None}


# gate -> release -> spec; a release missing from a row is one in which the gate does not exist.
# Checked (2026-12-05) against a kube-scheduler versioned feature-gate table with 1.37 entries
# (`defaultVersionedKubernetesFeatureGates`, the same as pkg/features/kube_features.go's versionedFeatureGates
# for these gates): every DRA row, GenericWorkload, NominatedNodeNameForExpectation, OpportunisticBatching,
# PodGroupPreemptionPolicy, TopologyAwareWorkloadScheduling, CompositePodGroup and DRAWorkloadResourceClaims
# match it, including which GA gates are locked (DRAPrioritizedList is GA but not locked in 1.36, locked in
# 1.37; DRADeviceTaints and DRADeviceTaintRules are GA in 1.37 but not locked until 1.38). GangScheduling and
# WorkloadAwarePreemption are absent from that 1.37 table: merged into GenericWorkload (KEP-4671 §Feature gates).
# WorkloadWithJob is a kube-controller-manager gate (KEP-5547/6089), from the KEP only.
GATES: dict[str, dict[str, GateSpec]] = {
    # --- workload-aware scheduling (KEP-4671, KEP-5832, KEP-5710, KEP-5732, KEP-5729, KEP-6012, KEP-5547/6089)
    "GenericWorkload": _row(None, "A-", "A-", "B-"),  # beta in 1.37 but off by default
    "GangScheduling": _row(None, "A-", "A-", "X:GenericWorkload"),  # merged into GenericWorkload in 1.37
    "WorkloadAwarePreemption": _row(None, None, "A-", "X:GenericWorkload"),  # merged in 1.37
    "PodGroupPreemptionPolicy": _row(None, None, None, "A-"),
    # CONFLICT: KEP-5732 plans beta for 1.37, the 1.37 gate table still says alpha, off: followed here.
    "TopologyAwareWorkloadScheduling": _row(None, None, "A-", "A-"),
    "DRAWorkloadResourceClaims": _row(None, None, "A-", "B-"),
    "CompositePodGroup": _row(None, None, None, "A-"),
    "WorkloadWithJob": _row(None, None, "A-", "A-"),
    # --- scheduler (KEP-5278, KEP-5598)
    "NominatedNodeNameForExpectation": _row("A-", "B+", "B+", "B+"),
    "OpportunisticBatching": _row(None, "B+", "B+", "B+"),
    # KEP-4832: alpha 1.32, beta (on) 1.33, still beta in the 1.37 table
    "SchedulerAsyncPreemption": _row("B+", "B+", "B+", "B+"),
    # --- DRA (KEP-4381 and its extensions)
    "DynamicResourceAllocation": _row("GA+", "L+", "L+", "L+"),
    "DRAPrioritizedList": _row("B+", "B+", "GA+", "L+"),
    "DRAAdminAccess": _row("B+", "B+", "L+", "L+"),
    "DRAPartitionableDevices": _row("A-", "A-", "B+", "B+"),
    "DRADeviceTaints": _row("A-", "A-", "B+", "GA+"),
    "DRADeviceTaintRules": _row(None, "A-", "B-", "GA+"),
    "DRAConsumableCapacity": _row("A-", "A-", "B+", "B+"),
    "DRAExtendedResource": _row("A-", "A-", "B+", "L+"),
    "DRADeviceBindingConditions": _row("A-", "A-", "B+", "B+"),
    "DRAResourceClaimDeviceStatus": _row("B+", "B+", "B+", "L+"),
    "DRASchedulerFilterTimeout": _row("B+", "B+", "B+", "B+"),
}


@dataclass(frozen=True)
class ApiVersion:
    """An API group/version and the releases that serve it; `gate` must be on for its kinds to be
    served at all; alpha and beta versions must also be enabled with `--runtime-config` (KEP-3136:
    new beta APIs are off by default)."""

    group_version: str
    kinds: tuple[str, ...]
    releases: tuple[str, ...]
    gate: str = ""
    stage: Literal["alpha", "beta", "ga"] = "ga"
    # kinds that need a gate of their own, on top of `gate`
    kind_gates: Mapping[str, str] = field(default_factory=dict)
    # kinds served by other releases than `releases` (resource.k8s.io/v1beta2: DeviceTaintRule only from 1.36)
    kind_releases: Mapping[str, tuple[str, ...]] = field(default_factory=dict)

    def releases_of(self, kind: str) -> tuple[str, ...]:
        """The releases that serve `kind` in this group/version."""
        return self.kind_releases.get(kind, self.releases)


SCHEDULING_API_VERSIONS = (
    # 1.35: Workload with embedded pod groups (KEP-4671 alpha)
    ApiVersion("scheduling.k8s.io/v1alpha1", ("Workload",), ("1.35",), "GenericWorkload", "alpha"),
    # 1.36: Workload as a template, standalone PodGroup (KEP-5832); v1alpha1 gone
    ApiVersion("scheduling.k8s.io/v1alpha2", ("Workload", "PodGroup"), ("1.36",), "GenericWorkload", "alpha"),
    # 1.37: v1beta1 plus v1alpha3 (v1alpha2 removed); CompositePodGroup (KEP-6012) only in v1alpha3, and only
    # served with its gate on
    ApiVersion("scheduling.k8s.io/v1alpha3", ("Workload", "PodGroup", "CompositePodGroup"), ("1.37",),
               "GenericWorkload", "alpha", {"CompositePodGroup": "CompositePodGroup"}),
    ApiVersion("scheduling.k8s.io/v1beta1", ("Workload", "PodGroup"), ("1.37",), "GenericWorkload", "beta"),
)
# resource.k8s.io alpha/beta versions whose only kind dralab reads from them is DeviceTaintRule (v1 serves the rest):
# listed so that runtime-config can enable them; core/dra/taint_rules.py checks a rule against them
DEVICE_TAINT_RULE_API_VERSIONS = (
    ApiVersion("resource.k8s.io/v1alpha3", ("DeviceTaintRule",), ("1.34", "1.35", "1.36"), stage="alpha"),
    ApiVersion("resource.k8s.io/v1beta2", ("DeviceTaintRule",), ("1.36", "1.37"), stage="beta"),
)
# resource.k8s.io versions before v1 that serve DeviceClass, ResourceSlice, ResourceClaim and ResourceClaimTemplate in
# dralab's releases (core/dra/older.py converts them to v1; its SERVED table has the releases before 1.34): beta APIs
# introduced after 1.24, so served only when runtime-config enables them (KEP-3136). They replace the
# DeviceTaintRule-only entry of the same group/version in API_VERSIONS below (same releases for DeviceTaintRule).
DRA_OLDER_API_VERSIONS = (
    ApiVersion("resource.k8s.io/v1beta1", ("DeviceClass", "ResourceSlice", "ResourceClaim", "ResourceClaimTemplate"),
               ("1.34", "1.35", "1.36", "1.37"), stage="beta"),
    ApiVersion("resource.k8s.io/v1beta2", ("DeviceClass", "ResourceSlice", "ResourceClaim", "ResourceClaimTemplate",
                                           "DeviceTaintRule"), ("1.34", "1.35", "1.36", "1.37"), stage="beta",
               kind_releases={"DeviceTaintRule": ("1.36", "1.37")}),
)
API_VERSIONS: dict[str, ApiVersion] = {a.group_version: a for a in (*SCHEDULING_API_VERSIONS,
                                                                    *DEVICE_TAINT_RULE_API_VERSIONS,
                                                                    *DRA_OLDER_API_VERSIONS)}


@dataclass(frozen=True)
class Profile:
    """One release with its effective feature gates (every gate of that release, defaults applied) and
    the alpha/beta API versions enabled with runtime-config."""

    version: str = DEFAULT_VERSION
    gates: Mapping[str, bool] = field(default_factory=dict)
    overrides: Mapping[str, bool] = field(default_factory=dict)  # as the user set them (recorded in logs)
    runtime_config: frozenset[str] = frozenset()
    # upstream-bug switches set by the scenario or the command (core/kube/bugs.py); the others follow the release
    bugs: Mapping[str, bool] = field(default_factory=dict)
    kueue: str = DEFAULT_KUEUE_VERSION  # Kueue's release (spec.kubernetes.kueue)
    bugs_by_release: bool = True  # False only for the legacy profile: its logs were made without any bug

    def bug(self, name: str) -> bool:
        """Whether the upstream bug `name` (core/kube/bugs.py) is in the cluster emulated: as set, else as the
        release of its component has it."""
        spec = BUGS.get(name)
        if spec is None:
            raise KeyError(f"unknown upstream bug {name!r}")
        if name in self.bugs:
            return bool(self.bugs[name])
        return self.bugs_by_release and present(spec, self.version, self.kueue)

    def enabled(self, gate: str) -> bool:
        if gate not in GATES:
            raise KeyError(f"unknown feature gate {gate!r}")
        return bool(self.gates.get(gate, False))

    def require(self, gate: str, path: str, what: str) -> None:
        """Refuse `what` (at `path`) unless `gate` is on, naming the gate and how to turn it on."""
        if self.enabled(gate):
            return
        spec = GATES[gate].get(self.version)
        if spec is None:
            raise FieldError(path, f"{what} needs the feature gate {gate}, which Kubernetes {self.version} "
                                   "does not have")
        raise FieldError(path, f"{what} needs the feature gate {gate} ({spec.stage}, off by default in Kubernetes "
                               f"{self.version}); turn it on in spec.kubernetes.featureGates or --feature-gates")

    def check_api(self, api_version: str, kind: str, path: str) -> None:
        """Refuse an object whose group/version this release does not serve (or serves only with a gate or
        runtime-config that is off), as the API server answers `no matches for kind`."""
        api = API_VERSIONS.get(api_version)
        if api is None or kind not in api.kinds:
            return  # not a versioned API this module knows: the caller's own check decides
        where = join(path, "apiVersion")
        if self.version not in api.releases_of(kind):
            served = [a.group_version for a in SCHEDULING_API_VERSIONS
                      if kind in a.kinds and self.version in a.releases]
            hint = f"; it serves {', '.join(served)}" if served else ""
            releases = ", ".join(api.releases_of(kind))
            raise FieldError(where, f"Kubernetes {self.version} does not serve {kind} in `{api_version}` (served by "
                                    f"{releases}){hint}")
        if api.gate:
            self.require(api.gate, where, f"{kind} `{api_version}`")
        kind_gate = api.kind_gates.get(kind)
        if kind_gate:
            self.require(kind_gate, where, f"{kind} `{api_version}`")
        if api.stage != "ga" and api_version not in self.runtime_config:
            raise FieldError(where, f"`{api_version}` is a {api.stage} API, not enabled by default in Kubernetes "
                                    f"{self.version}; enable it in spec.kubernetes.runtimeConfig or --runtime-config "
                                    f"(`{api_version}=true`)")


def make_profile(version: str | None = None, overrides: Mapping[str, bool] | None = None,
                 runtime_config: Mapping[str, bool] | None = None, *, path: str = "spec.kubernetes",
                 bugs: Mapping[str, bool] | None = None, kueue: str | None = None) -> Profile:
    """The profile of `version` (default 1.37) with `overrides` applied, checked as kube-apiserver checks
    `--feature-gates`: an unknown gate, a gate this release does not have (or has removed) and a locked gate
    set against its lock are refused with the path of the offending entry."""
    version = DEFAULT_VERSION if version is None else version
    if version not in VERSIONS:
        raise FieldError(join(path, "version"), f"unsupported Kubernetes version `{version}`; expected one of "
                                                f"{', '.join(VERSIONS)}")
    gates = {name: row[version].default for name, row in GATES.items()
             if version in row and row[version].stage != "removed"}
    given = dict(overrides or {})
    for name, value in given.items():
        g_path = join(join(path, "featureGates"), name)
        row = GATES.get(name)
        if row is None:
            raise FieldError(g_path, f"unknown feature gate `{name}`; dralab models {', '.join(sorted(GATES))}")
        spec = row.get(version)
        if spec is None:
            first = next(iter(row))
            raise FieldError(g_path, f"Kubernetes {version} has no feature gate `{name}` (it exists from {first})")
        if spec.stage == "removed":
            raise FieldError(g_path, f"the feature gate `{name}` was removed in Kubernetes {version}: merged into "
                                     f"`{spec.merged_into}`; drop it from the gates")
        if spec.stage == "locked" and value != spec.default:
            raise FieldError(g_path, f"cannot set feature gate {name} to {str(value).lower()}, feature is locked "
                                     f"to {str(spec.default).lower()}")
        gates[name] = bool(value)
    enabled: set[str] = set()
    for api_version, on in (runtime_config or {}).items():
        r_path = join(join(path, "runtimeConfig"), api_version)
        if api_version not in API_VERSIONS:
            raise FieldError(r_path, f"unknown API version `{api_version}` for runtime-config; dralab models "
                                     f"{', '.join(API_VERSIONS)}")
        if on:
            enabled.add(api_version)
    return Profile(version, gates, given, frozenset(enabled), check_bugs(bugs or {}, join(path, "bugs")),
                   check_kueue(kueue, join(path, "kueue")))


def check_bugs(bugs: Mapping[str, bool], path: str) -> dict[str, bool]:
    """Bug switches as given, each naming a bug of core/kube/bugs.py."""
    for name in bugs:
        if name not in BUGS:
            known = ", ".join(sorted(BUGS))
            raise FieldError(join(path, name), f"unknown upstream bug `{name}`; dralab models {known} "
                                               "(docs/upstream-bugs.md)")
    return {name: bool(on) for name, on in sorted(bugs.items())}


def check_kueue(kueue: str | None, path: str) -> str:
    if kueue is None:
        return DEFAULT_KUEUE_VERSION
    if kueue not in KUEUE_VERSIONS:
        raise FieldError(path, f"unsupported Kueue version `{kueue}`; expected one of {', '.join(KUEUE_VERSIONS)}")
    return kueue


def _runtime_map(profile: Profile) -> dict[str, bool]:
    return {api_version: True for api_version in sorted(profile.runtime_config)}


def merge_gates(profile: Profile, gates: Mapping[str, bool], *, path: str) -> Profile:
    """`profile` with more gate overrides (`spec.scheduler.featureGates`, `--feature-gates`), checked as
    make_profile checks them, with `path` the place they were given (`spec.scheduler`)."""
    if not gates:
        return profile
    make_profile(profile.version, gates, path=path)  # errors name the entry where it was given
    merged = make_profile(profile.version, {**profile.overrides, **gates}, _runtime_map(profile), bugs=profile.bugs,
                          kueue=profile.kueue)
    return replace(merged, bugs_by_release=profile.bugs_by_release)


def same_profile(a: Profile, b: Profile) -> bool:
    """Whether two profiles emulate the same cluster: release, effective gates and enabled APIs (how the
    gates were spelled, default or set, does not matter)."""
    return (a.version == b.version and dict(a.gates) == dict(b.gates) and a.runtime_config == b.runtime_config
            and dict(a.bugs) == dict(b.bugs) and a.kueue == b.kueue)


# --- the profile dralab emulated before profiles existed ---------------------------------------------------

# Before spec.kubernetes existed, dralab accepted the 1.35 Workload API (scheduling.k8s.io/v1alpha1, which needs
# GenericWorkload and `--runtime-config`) and ran gangs with the GangScheduling plugin, and its DRA allocator ran
# with every optional feature on (core/dra/prepare.py `Features()`: partitionable devices, device taints,
# consumable capacity, binding conditions; admin access and prioritized lists are beta and on in 1.35 anyway), and
# it accepted DeviceClass.extendedResourceName. In 1.35 those are alpha gates, off by default: this is the 1.35
# profile with them on, the model every log without a `kubernetes` entry was made by.
LEGACY_GATES: dict[str, bool] = {
    "GenericWorkload": True,
    "GangScheduling": True,
    "DRAPartitionableDevices": True,
    "DRADeviceTaints": True,
    "DRAConsumableCapacity": True,
    "DRADeviceBindingConditions": True,
    "DRAExtendedResource": True,
}
LEGACY_RUNTIME_CONFIG: dict[str, bool] = {"scheduling.k8s.io/v1alpha1": True}
LEGACY_PROFILE = replace(make_profile(LEGACY_VERSION, LEGACY_GATES, LEGACY_RUNTIME_CONFIG), bugs_by_release=False)


def profile_config(profile: Profile) -> dict[str, object] | None:
    """The run configuration's `kubernetes` entry (core/run/config.py): the release, the gates as set and
    the API versions enabled. None for the legacy profile, so that such a run records exactly the
    configuration it recorded before profiles existed (its log stays byte-identical)."""
    if same_profile(profile, LEGACY_PROFILE):
        return None
    return {"version": profile.version, "feature_gates": dict(sorted(profile.overrides.items())),
            "runtime_config": sorted(profile.runtime_config),
            # only when set, so that runs without them record what they recorded before bugs were modelled
            **({"bugs": dict(profile.bugs)} if profile.bugs else {}),
            **({"kueue": profile.kueue} if profile.kueue != DEFAULT_KUEUE_VERSION else {})}


def profile_from_config(entry: Mapping[str, object] | None, *, path: str = "config.kubernetes") -> Profile:
    """The profile a run configuration's `kubernetes` entry names; no entry: :data:`LEGACY_PROFILE` (a log
    written before profiles existed was made by that model)."""
    if entry is None:
        return LEGACY_PROFILE
    version = entry.get("version")
    gates = entry.get("feature_gates") or {}
    runtime = entry.get("runtime_config") or []
    if not isinstance(version, str) or not isinstance(gates, Mapping) or not isinstance(runtime, (list, tuple)):
        raise FieldError(path, "expected {version: str, feature_gates: {name: bool}, runtime_config: [str]}")
    bugs = entry.get("bugs") or {}
    kueue = entry.get("kueue")
    if not isinstance(bugs, Mapping) or not (kueue is None or isinstance(kueue, str)):
        raise FieldError(path, "expected bugs: {name: bool} and kueue: str")
    return make_profile(version, {str(k): bool(v) for k, v in gates.items()}, {str(r): True for r in runtime},
                        path=path, bugs={str(k): bool(v) for k, v in bugs.items()}, kueue=kueue)


def summary(profile: Profile, *, kueue: bool = False) -> dict[str, object]:
    """What a run's summary says about the cluster emulated: the release and the gates not at their default; Kueue's
    bugs only with `kueue` (the run has Kueue: a cluster without it has none of them)."""
    active = sorted(name for name in BUGS if profile.bug(name) and (kueue or BUGS[name].component != "kueue"))
    return {"version": profile.version,
            "featureGates": {name: on for name, on in sorted(profile.gates.items())
                             if on != GATES[name][profile.version].default},
            **({"upstreamBugs": active} if active else {})}


# --- the upstream flag syntax ------------------------------------------------------------------------------

_TRUE = ("true", "t", "1")
_FALSE = ("false", "f", "0")


def _pairs(text: str, path: str, what: str, known: Iterable[str], known_as: str) -> dict[str, bool]:
    """`key=bool,key=bool` as component-base parses `--feature-gates` (a bare key in `--runtime-config`
    means true); Go's strconv.ParseBool spellings. A key not in `known` is refused."""
    names = list(known)
    out: dict[str, bool] = {}
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        key, eq, value = part.partition("=")
        key, value = key.strip(), value.strip().lower()
        if not key:
            raise FieldError(path, f"missing {what} name in `{part}`")
        if key not in names:
            raise FieldError(path, f"unknown {what} `{key}`{known_as}; dralab models {', '.join(names)}")
        if not eq and what == "API version":
            value = "true"
        if value in _TRUE:
            out[key] = True
        elif value in _FALSE:
            out[key] = False
        else:
            raise FieldError(path, f"invalid value of {key}: `{value}`, expected true or false (`{key}=true`)")
    return out


def parse_feature_gates(text: str, path: str = "--feature-gates") -> dict[str, bool]:
    """`A=true,B=false` (kube-apiserver's `--feature-gates`); a name dralab does not model is refused."""
    return _pairs(text, path, "feature gate", sorted(GATES), "")


def parse_runtime_config(text: str, path: str = "--runtime-config") -> dict[str, bool]:
    """`scheduling.k8s.io/v1beta1=true` (kube-apiserver's `--runtime-config`, group/version entries only)."""
    return _pairs(text, path, "API version", API_VERSIONS, " for runtime-config")


@dataclass(frozen=True)
class ProfileFlags:
    """`--kubernetes-version`, `--feature-gates`, `--runtime-config` as given (None / empty: not given); they
    override a scenario's spec.kubernetes entry by entry."""

    version: str | None = None
    gates: Mapping[str, bool] = field(default_factory=dict)
    runtime_config: Mapping[str, bool] = field(default_factory=dict)
    bugs: Mapping[str, bool] = field(default_factory=dict)  # --bugs (core/kube/bugs.py)
    kueue: str | None = None  # --kueue-version

    def given(self) -> bool:
        return (self.version is not None or bool(self.gates) or bool(self.runtime_config) or bool(self.bugs)
                or self.kueue is not None)


def parse_bugs(text: str, path: str = "--bugs") -> dict[str, bool]:
    """`autoscaler#3886=true,kueue#2445=false`: upstream-bug switches (core/kube/bugs.py), as gates are given."""
    return _pairs(text, path, "upstream bug", sorted(BUGS), " (docs/upstream-bugs.md)")


def flag_profile(version: str | None, gates: Mapping[str, bool] | None,
                 runtime_config: Mapping[str, bool] | None, bugs: Mapping[str, bool] | None = None,
                 kueue: str | None = None) -> Profile:
    """make_profile for values given on the command line: an error names the flag (`--feature-gates`) and
    the entry, not a scenario path."""
    try:
        return make_profile(version, gates, runtime_config, path="flags", bugs=bugs, kueue=kueue)
    except FieldError as e:
        flag, _, entry = e.path.removeprefix("flags.").partition(".")
        option = {"version": "--kubernetes-version", "featureGates": "--feature-gates",
                  "runtimeConfig": "--runtime-config", "bugs": "--bugs", "kueue": "--kueue-version"}.get(flag, "flags")
        raise FieldError(option, f"{entry}: {e.message}" if entry else e.message) from None


# --- which release a cluster dump comes from ---------------------------------------------------------------


def dump_profile(api_versions_seen: Iterable[tuple[str, str]], version: str | None = None,
                 gates: Mapping[str, bool] | None = None, runtime_config: Mapping[str, bool] | None = None,
                 *, path: str = "the dump", bugs: Mapping[str, bool] | None = None,
                 kueue: str | None = None) -> Profile:
    """The profile of the cluster a dump (`kubectl get ... -o yaml`) was taken from, given the (apiVersion,
    kind) of its objects. The release: `version` (`--kubernetes-version`), else the only release that serves
    every versioned API in the dump (scheduling.k8s.io/v1alpha1 objects come from 1.35), else 1.37. An
    object of an API version proves that the cluster served it: its gates and runtime-config were on, so they
    are turned on (for a Workload in 1.35 or 1.36 also GangScheduling: dralab reads such a dump's gangs
    all-or-nothing). `gates` and `runtime_config` (the flags) override what the dump implies."""
    seen = sorted({(a, k) for a, k in api_versions_seen if a in API_VERSIONS and k in API_VERSIONS[a].kinds})
    if version is None:
        releases = [v for v in VERSIONS if all(v in API_VERSIONS[a].releases_of(k) for a, k in seen)]
        if not releases:
            apis = ", ".join(sorted({a for a, _ in seen}))
            raise FieldError(path, f"no Kubernetes release serves all of {apis}: objects of one cluster come from "
                                   "one release; give --kubernetes-version")
        version = releases[0] if len(releases) == 1 or _pre_ga_dra(seen) else DEFAULT_VERSION
    implied_gates: dict[str, bool] = {}
    implied_runtime: dict[str, bool] = {}
    for api_version, kind in seen:
        api = API_VERSIONS[api_version]
        if version not in api.releases_of(kind):
            continue  # check_api below says which release serves it
        for gate in (api.gate, api.kind_gates.get(kind, ""),
                     "GangScheduling" if kind == "Workload" and "GangScheduling" in GATES else ""):
            spec = GATES[gate].get(version) if gate else None
            if spec is not None and spec.stage not in ("removed", "locked"):
                implied_gates[gate] = True
        if api.stage != "ga":
            implied_runtime[api_version] = True
    profile = flag_profile(version, {**implied_gates, **(gates or {})}, {**implied_runtime, **(runtime_config or {})},
                           bugs, kueue)
    for api_version, kind in seen:
        profile.check_api(api_version, kind, path)
    return profile


def _pre_ga_dra(seen: Iterable[tuple[str, str]]) -> bool:
    """Whether a dump prints DRA objects in a beta version: `kubectl get` prints the server's preferred version,
    v1 from 1.34 on, so such a dump was taken from a cluster before 1.34 (v1beta1: 1.32, v1beta2: 1.33); the
    closest release dralab emulates is the earliest that serves them all."""
    return any(a in ("resource.k8s.io/v1beta1", "resource.k8s.io/v1beta2") and k != "DeviceTaintRule" for a, k in seen)
