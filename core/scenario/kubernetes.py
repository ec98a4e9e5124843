"""A scenario's `spec.kubernetes`: the Kubernetes release it emulates, its feature gates and runtime-config
(core/kube/versions.py), merged with `spec.scheduler.featureGates` and with the command's flags.

    spec:
      kubernetes:
        version: "1.35"                                  # 1.34 .. 1.37; default 1.37
        featureGates: {GenericWorkload: true, GangScheduling: true}
        runtimeConfig: {scheduling.k8s.io/v1alpha1: true}
        kueue: "0.19"                                    # Kueue's release (core/kube/bugs.py KUEUE_VERSIONS)
        bugs: {autoscaler#3886: true}                    # upstream-bug switches; unset: as the releases have them

Two profiles come out: the scenario's own (spec.kubernetes and the flags; recorded in the run configuration's
`kubernetes` entry) and the effective one, with spec.scheduler.featureGates on top (recorded, as before
profiles, in the scheduler's own configuration), which the checks of the scenario use.
"""

from __future__ import annotations

from ..kube.fields import FieldError, check_fields, expect_bool, expect_map, join
from ..kube.versions import GATES, VERSIONS, Profile, ProfileFlags, flag_profile, make_profile, merge_gates

PATH = "spec.kubernetes"


def _version(value: object, path: str) -> str | None:
    if value is None:
        return None
    if isinstance(value, float) and str(value) in VERSIONS:  # `version: 1.35` unquoted: YAML reads a number
        return str(value)
    if not isinstance(value, str):
        raise FieldError(path, f"expected a string such as \"1.37\" (quote it), got {value!r}")
    return value


def _bools(value: object, path: str) -> dict[str, bool]:
    if value is None:
        return {}
    return {str(k): expect_bool(v, join(path, str(k))) for k, v in expect_map(value, path).items()}


def check_kubernetes(value: object, scheduler_gates: dict[str, bool], *, profile: Profile | None = None,
                     flags: ProfileFlags | None = None) -> tuple[Profile, Profile, dict[str, bool]]:
    """(the scenario's profile, the effective profile, the scheduler's gates that stay its own). `profile`
    replaces spec.kubernetes altogether (benchmarks force the legacy profile); `flags` override it entry by
    entry, and a gate they set is taken out of the scheduler's gates (a flag wins)."""
    m = {} if value is None else expect_map(value, PATH)
    check_fields(m, PATH, ("version", "featureGates", "runtimeConfig", "bugs", "kueue"))
    bugs = _bools(m.get("bugs"), join(PATH, "bugs"))
    kueue = _version(m.get("kueue"), join(PATH, "kueue"))
    version = _version(m.get("version"), join(PATH, "version"))
    gates = _bools(m.get("featureGates"), join(PATH, "featureGates"))
    runtime = _bools(m.get("runtimeConfig"), join(PATH, "runtimeConfig"))
    for name, on in scheduler_gates.items():
        if name in gates and gates[name] != on:
            raise FieldError(join("spec.scheduler.featureGates", name),
                             f"set to {str(on).lower()} here and to {str(gates[name]).lower()} in "
                             f"{join(join(PATH, 'featureGates'), name)}: set the gate in one place")
    if profile is None:
        if flags is not None and flags.given():
            version = flags.version or version
            flag_profile(version, flags.gates, flags.runtime_config, flags.bugs, flags.kueue)  # errors name the flag
            gates = {**gates, **flags.gates}
            runtime = {**runtime, **flags.runtime_config}
            bugs = {**bugs, **flags.bugs}
            kueue = flags.kueue or kueue
            scheduler_gates = {k: v for k, v in scheduler_gates.items() if k not in flags.gates}
        profile = make_profile(version, gates, runtime, path=PATH, bugs=bugs, kueue=kueue)
    for name in scheduler_gates:
        if name not in GATES:
            raise FieldError(join("spec.scheduler.featureGates", name),
                             f"unknown feature gate `{name}`; dralab models {', '.join(sorted(GATES))}")
    effective = merge_gates(profile, scheduler_gates, path="spec.scheduler")
    return profile, effective, scheduler_gates

