"""cluster-autoscaler's scale-down flags as top-level `spec.autoscaler` fields (camelCase of the flag:
`--scale-down-unneeded-time` -> `scaleDownUnneededTime`), with their defaults in core/kube/defaults.py.

The older `spec.autoscaler.scaleDown.*` fields keep working: five flags are aliases of them (`scaleDownEnabled` of
`scaleDown.enabled`, `scaleDownUnneededTime` of `scaleDown.unneededTime`, ...) and land in the same place of the
run config, so a scenario may write either; both, with different values, is refused naming the flag. The other
flags are recorded in the run config's `autoscaler.scale_down_flags`, only those the scenario sets (a run that
sets none records what it recorded before the flags existed), as keyword arguments of the reactor's ScaleDown
(core/autoscaler/disruption/scale_down.py).

Two flags need the autoscaler's own memory of its last deletion and failure, which dralab keeps in the log as
the scale-down events of release profiles (core/log/events_scaledown.py): `scaleDownDelayAfterDelete` and
`scaleDownDelayAfterFailure` are refused under the legacy profile (forced for logs written before profiles; it
writes no such events). A scenario without `spec.kubernetes` runs as the current release and has them.
`maxGracefulTerminationSec` is refused: dralab's drains evict pods with no grace period.

Per node group, `spec.nodeGroups[].autoscalingOptions` overrides five of them as upstream's
NodeGroupAutoscalingOptions do (config/autoscaling_options.go; a cloud provider's NodeGroup.GetOptions, e.g. the
AWS tags `k8s.io/cluster-autoscaler/node-template/autoscaling-options/<name>`): `scaleDownUtilizationThreshold`,
`scaleDownGpuUtilizationThreshold`, `scaleDownUnneededTime`, `scaleDownUnreadyTime`, `ignoreDaemonSetsUtilization`
(Go field names, camelCase). They reach ScaleDown as `group_options` and serve release profiles (the planner of
disruption/candidates.py); the legacy profile refuses them. `maxNodeProvisionTime` and `zeroOrMaxNodeScaling` are
refused (not modelled per group).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import msgspec

from ..kube.fields import (
    FieldError,
    check_fields,
    expect_bool,
    expect_duration,
    expect_int,
    expect_map,
    expect_number,
    index,
    join,
)
from ..kube.versions import Profile, profile_config
from .model import AutoscalerSettings, ScaleDownSettings


def _duration(value: object, path: str) -> int:
    return expect_duration(value, path)


def _ratio(value: object, path: str) -> float:
    ratio = expect_number(value, path, minimum=0)
    if ratio > 1:
        raise FieldError(path, f"must be <= 1, got {ratio}")
    return ratio


def _positive(value: object, path: str) -> int:
    return expect_int(value, path, minimum=1)


def _count(value: object, path: str) -> int:  # a non-positive value turns the limit off, as upstream's help says
    return expect_int(value, path)


# flag field -> (the ScaleDownSettings field it is an alias of, its parser)
ALIASES: dict[str, tuple[str, str, Callable[[object, str], Any]]] = {
    "scaleDownEnabled": ("enabled", "enabled", expect_bool),
    "scaleDownUnneededTime": ("unneeded_time_ms", "unneededTime", _duration),
    "scaleDownDelayAfterAdd": ("delay_after_add_ms", "delayAfterAdd", _duration),
    "nodeDeleteDelayAfterTaint": ("delete_delay_after_taint_ms", "deleteDelayAfterTaint", _duration),
    "scaleDownUtilizationThreshold": ("utilization_threshold", "utilizationThreshold", _ratio),
}
# flag field -> (ScaleDown's keyword, its parser)
FLAGS: dict[str, tuple[str, Callable[[object, str], Any]]] = {
    "scaleDownUnreadyEnabled": ("unready_enabled", expect_bool),
    "scaleDownUnreadyTime": ("unready_time_ms", _duration),
    "scaleDownDelayAfterDelete": ("delay_after_delete_ms", _duration),
    "scaleDownDelayAfterFailure": ("delay_after_failure_ms", _duration),
    "scaleDownGpuUtilizationThreshold": ("gpu_utilization_threshold", _ratio),
    "ignoreDaemonsetsUtilization": ("ignore_daemonsets_utilization", expect_bool),
    "ignoreMirrorPodsUtilization": ("ignore_mirror_pods_utilization", expect_bool),
    "maxScaleDownParallelism": ("max_scale_down_parallelism", _positive),
    "maxDrainParallelism": ("max_drain_parallelism", _positive),
    "scaleDownNonEmptyCandidatesCount": ("non_empty_candidates_count", _count),
    "maxPodEvictionTime": ("max_pod_eviction_time_ms", _duration),
    "skipNodesWithSystemPods": ("skip_nodes_with_system_pods", expect_bool),
    "skipNodesWithLocalStorage": ("skip_nodes_with_local_storage", expect_bool),
    "skipNodesWithCustomControllerPods": ("skip_nodes_with_custom_controller_pods", expect_bool),
}
# the Go field's spelling (IgnoreDaemonSetsUtilization), accepted beside the flag's
SPELLINGS = {"ignoreDaemonSetsUtilization": "ignoreDaemonsetsUtilization"}
RELEASE_ONLY = ("scaleDownDelayAfterDelete", "scaleDownDelayAfterFailure")
REFUSED = {"maxGracefulTerminationSec": "not modelled: dralab's drains evict pods at once (no grace period)"}
SCALE_DOWN_FLAGS: tuple[str, ...] = (*ALIASES, *FLAGS, *SPELLINGS, *REFUSED)


GROUP_OPTIONS: dict[str, tuple[str, Callable[[object, str], Any]]] = {
    "scaleDownUtilizationThreshold": ("utilization_threshold", _ratio),
    "scaleDownGpuUtilizationThreshold": ("gpu_utilization_threshold", _ratio),
    "scaleDownUnneededTime": ("unneeded_time_ms", _duration),
    "scaleDownUnreadyTime": ("unready_time_ms", _duration),
    "ignoreDaemonSetsUtilization": ("ignore_daemonsets_utilization", expect_bool),
}
GROUP_REFUSED = {"maxNodeProvisionTime": "not modelled per node group (spec.autoscaler.maxNodeProvisionTime)",
                 "zeroOrMaxNodeScaling": "not modelled: node groups scale node by node"}


def group_options(groups: object, release: bool) -> dict[str, dict[str, Any]]:
    """spec.nodeGroups[].autoscalingOptions: group name -> ScaleDown keywords (only the groups that set some)."""
    out: dict[str, dict[str, Any]] = {}
    for i, group in enumerate(groups if isinstance(groups, list) else []):
        if not isinstance(group, dict) or group.get("autoscalingOptions") is None:
            continue
        path = join(index("spec.nodeGroups", i), "autoscalingOptions")
        m = expect_map(group["autoscalingOptions"], path)
        check_fields(m, path, (*GROUP_OPTIONS, *GROUP_REFUSED))
        for name, why in GROUP_REFUSED.items():
            if m.get(name) is not None:
                raise FieldError(join(path, name), why)
        if m and not release:
            raise FieldError(path, "needs a release profile: the legacy profile's scale-down has one setting for all")
        options = {GROUP_OPTIONS[k][0]: GROUP_OPTIONS[k][1](v, join(path, k)) for k, v in m.items() if v is not None}
        if options:
            out[str(group.get("name"))] = options
    return out


def with_scale_down_flags(value: object, settings: AutoscalerSettings, own: Profile,
                          groups: object = None) -> AutoscalerSettings:
    """`settings` (spec.autoscaler as `_autoscaler` read it, unknown fields already refused) with the scale-down
    flags of `value` (the same mapping) applied. `own`: the scenario's release profile (spec.kubernetes)."""
    release = profile_config(own) is not None
    per_group = group_options(groups, release)
    if per_group:
        settings = msgspec.structs.replace(settings, scale_down_flags={**settings.scale_down_flags,
                                                                       "group_options": per_group})
    if not isinstance(value, dict):
        return settings
    path = "spec.autoscaler"
    m = dict(value)
    for spelling, flag in SPELLINGS.items():
        if m.get(spelling) is not None:
            if m.get(flag) is not None and m[flag] != m[spelling]:
                raise FieldError(join(path, spelling), f"{flag} is set to another value: set one of them")
            m[flag] = m[spelling]
    for flag, why in REFUSED.items():
        if m.get(flag) is not None:
            raise FieldError(join(path, flag), why)
    given_old = value.get("scaleDown")
    old: dict[str, Any] = given_old if isinstance(given_old, dict) else {}
    aliased: dict[str, Any] = {}
    for flag, (attribute, legacy, parse) in ALIASES.items():
        if m.get(flag) is None:
            continue
        given = parse(m[flag], join(path, flag))
        if old.get(legacy) is not None and getattr(settings.scale_down, attribute) != given:
            raise FieldError(join(path, flag), f"scaleDown.{legacy} is set to another value: set one of them "
                                               f"({flag} is the flag's name, scaleDown.{legacy} its older alias)")
        aliased[attribute] = given
    flags: dict[str, Any] = {}
    for flag, (keyword, parse) in FLAGS.items():
        if m.get(flag) is None:
            continue
        if flag in RELEASE_ONLY and not release:
            raise FieldError(join(path, flag), "needs a release profile: the legacy profile keeps no record of "
                                               "the autoscaler's deletions and failures")
        flags[keyword] = parse(m[flag], join(path, flag))
    if not aliased and not flags:
        return settings
    scale_down: ScaleDownSettings = msgspec.structs.replace(settings.scale_down, **aliased)
    return msgspec.structs.replace(settings, scale_down=scale_down,
                                   scale_down_flags={**flags, **settings.scale_down_flags})
