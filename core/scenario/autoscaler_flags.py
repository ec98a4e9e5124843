"""cluster-autoscaler's scale-up flags as `spec.autoscaler` fields (issue 22): parsing, and their run-config entry.

Each field is the camelCase of the flag (`--new-pod-scale-up-delay` -> `newPodScaleUpDelay`), durations are Go
durations, and the defaults are upstream's (core/kube/defaults.py, cited there). The loader (load.py `_autoscaler`)
calls :func:`parse_flags`; the run configuration (core/run/config.py) records :func:`flags_entry`, which holds
only the flags set to something else than their default, so that the configuration of a run that sets none, and
so its log, reads as before the flags existed.

`expander` takes upstream's comma-separated chain ("priority,least-waste": each expander filters the options the
previous one kept; ties left at the end go to the random source), and `expanderPriorities` is the priority
expander's ConfigMap `cluster-autoscaler-priority-expander` (`data.priorities`): a map from a priority to the
regular expressions of the node group names it applies to, given as YAML (a map) or as the ConfigMap's string.
"""

from __future__ import annotations

import re
from typing import Any

import msgspec
import yaml

from ..kube import defaults
from ..kube.fields import (
    FieldError,
    expect_bool,
    expect_duration,
    expect_int,
    expect_list,
    expect_number,
    join,
)
from .model import EXPANDERS, AutoscalerSettings

# upstream's expanders (expander/expander.go AvailableExpanders) that dralab models; `least-nodes` is upstream's too
CHAIN_EXPANDERS: tuple[str, ...] = (*EXPANDERS, "least-nodes")
# the fields this module parses (flag -> field), for load.py's list of known fields
FLAG_FIELDS: tuple[str, ...] = (
    "newPodScaleUpDelay", "maxNodesTotal", "okTotalUnreadyCount", "maxTotalUnreadyPercentage", "maxNodesPerScaleUp",
    "expanderPriorities", "balanceSimilarNodeGroups", "initialNodeGroupBackoffDuration",
    "maxNodeGroupBackoffDuration", "nodeGroupBackoffResetTimeout",
)
# AutoscalerSettings field -> the Autoscaler's (run config) keyword: the same names
_ENTRY = ("new_pod_scale_up_delay_ms", "max_nodes_total", "ok_total_unready_count", "max_total_unready_percentage",
          "max_nodes_per_scale_up", "expander_priorities", "balance_similar_node_groups",
          "initial_node_group_backoff_ms", "max_node_group_backoff_ms", "node_group_backoff_reset_timeout_ms")


def parse_expander(value: object, path: str, default: str) -> str:
    """One expander or upstream's comma-separated chain of them, each known (`--expander`)."""
    if value is None:
        return default
    if not isinstance(value, str) or not value.strip():
        raise FieldError(path, f"expected an expander name or a comma-separated list of them, got {value!r}")
    names = [n.strip() for n in value.split(",")]
    for name in names:
        if name not in CHAIN_EXPANDERS:
            shown = ", ".join(f"`{n}`" for n in CHAIN_EXPANDERS)
            raise FieldError(path, f"expected one of {shown} (or a comma-separated chain of them), got `{name}`")
    if len(set(names)) != len(names):
        raise FieldError(path, f"an expander is named twice in {value!r}")
    return ",".join(names)


def parse_priorities(value: object, path: str) -> tuple[tuple[int, tuple[str, ...]], ...]:
    """The priority expander's configuration: priority -> regexes of node group names, highest priority first.
    A string is read as the ConfigMap's `priorities` value (YAML), as upstream reads it (expander/priority)."""
    if value is None:
        return ()
    if isinstance(value, str):
        try:
            value = yaml.safe_load(value)
        except yaml.YAMLError as e:
            raise FieldError(path, f"not YAML: {e}") from None
    if not isinstance(value, dict):  # keys are integers in upstream's YAML: not expect_map's string keys
        raise FieldError(path, f"expected a map of priority -> list of regexes, got {type(value).__name__}")
    mapping = value
    out: list[tuple[int, tuple[str, ...]]] = []
    for key, regexes in mapping.items():
        try:
            priority = int(key)
        except (TypeError, ValueError):
            raise FieldError(join(path, str(key)), "a priority must be an integer") from None
        entry = join(path, str(key))
        patterns = tuple(str(r) for r in expect_list(regexes, entry))
        for i, pattern in enumerate(patterns):
            try:
                re.compile(pattern)
            except re.error as e:
                raise FieldError(f"{entry}[{i}]", f"not a regular expression: {e}") from None
        out.append((priority, patterns))
    return tuple(sorted(out, key=lambda kv: -kv[0]))


def parse_flags(m: dict[str, Any], path: str) -> dict[str, Any]:
    """The AutoscalerSettings keywords of the scale-up flags `m` (the `spec.autoscaler` map) sets."""
    out: dict[str, Any] = {}

    def duration(field: str, key: str, positive: bool = False) -> None:
        if m.get(field) is not None:
            out[key] = expect_duration(m[field], join(path, field), positive=positive)

    duration("newPodScaleUpDelay", "new_pod_scale_up_delay_ms")
    duration("initialNodeGroupBackoffDuration", "initial_node_group_backoff_ms", positive=True)
    duration("maxNodeGroupBackoffDuration", "max_node_group_backoff_ms", positive=True)
    duration("nodeGroupBackoffResetTimeout", "node_group_backoff_reset_timeout_ms", positive=True)
    if m.get("maxNodesTotal") is not None:
        out["max_nodes_total"] = expect_int(m["maxNodesTotal"], join(path, "maxNodesTotal"), minimum=0)
    if m.get("okTotalUnreadyCount") is not None:
        out["ok_total_unready_count"] = expect_int(m["okTotalUnreadyCount"], join(path, "okTotalUnreadyCount"),
                                                   minimum=0)
    if m.get("maxTotalUnreadyPercentage") is not None:
        pct = expect_number(m["maxTotalUnreadyPercentage"], join(path, "maxTotalUnreadyPercentage"), minimum=0)
        if pct > 100:
            raise FieldError(join(path, "maxTotalUnreadyPercentage"), f"must be <= 100, got {pct}")
        out["max_total_unready_percentage"] = float(pct)
    if m.get("maxNodesPerScaleUp") is not None:
        out["max_nodes_per_scale_up"] = expect_int(m["maxNodesPerScaleUp"], join(path, "maxNodesPerScaleUp"),
                                                   minimum=1)
    if m.get("balanceSimilarNodeGroups") is not None:
        out["balance_similar_node_groups"] = expect_bool(m["balanceSimilarNodeGroups"],
                                                         join(path, "balanceSimilarNodeGroups"))
    out["expander_priorities"] = parse_priorities(m.get("expanderPriorities"), join(path, "expanderPriorities"))
    initial = out.get("initial_node_group_backoff_ms", defaults.INITIAL_NODE_GROUP_BACKOFF_MS)
    ceiling = out.get("max_node_group_backoff_ms", defaults.MAX_NODE_GROUP_BACKOFF_MS)
    if ceiling < initial:
        raise FieldError(join(path, "maxNodeGroupBackoffDuration"), "must be >= initialNodeGroupBackoffDuration")
    expander = str(m.get("expander") or "")
    if out["expander_priorities"] and "priority" not in expander.split(","):
        raise FieldError(join(path, "expanderPriorities"), "set, but the expander (or chain) has no `priority`")
    return out


def flags_entry(settings: AutoscalerSettings) -> dict[str, Any]:
    """The run config's entries of the flags set to other than their defaults (JSON-friendly)."""
    default = AutoscalerSettings()
    out: dict[str, Any] = {}
    for key in _ENTRY:
        value = getattr(settings, key)
        if value != getattr(default, key):
            out[key] = msgspec.to_builtins(value)
    return out
