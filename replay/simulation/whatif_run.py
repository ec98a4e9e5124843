"""What-if replays: a recorded run's external inputs through reactors with changed settings.

A log holds two kinds of records: external inputs (`source == "scenario"`: the run's configuration,
node groups, starting nodes, arrivals; faults when scenarios have them) and decisions. The decisions
follow from the inputs and the reactors' settings, which `RunStarted.config` records. So "what if the
autoscaler had used the `dra` policy?" is answered by editing that config and running the same inputs
through the simulator: arrivals at the same cluster times, the same seed, the same cloud (its timings
and failures come from the node groups' settings and the seeded random source, so they are recomputed
for the new scale-ups rather than copied from the recorded ones, which answered other requests).

Three runs are compared: the recorded one (metrics from its log), the baseline (its inputs re-simulated
with unchanged settings: for a simulator log this is the recorded run byte for byte, for a live log it
separates the effect of the change from the difference between live interleavings and the simulator's),
and the what-if run.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

import msgspec
import yaml

from dralab.core.analysis.metrics import metrics_from_entries
from dralab.core.analysis.summary import summarize
from dralab.core.kube.durations import parse_duration
from dralab.core.log.events import Record, RunStarted, decode_record
from dralab.core.run.config import build_reactors
from dralab.core.state.cluster import ClusterState

from .sim import Simulator

# Settings that a run config records only when they differ from their default (core/run/config.py), so a
# log may lack them; `--with` may still set them.
OPTIONAL_SETTINGS = {"autoscaler.provisioning_request_claims": "materialize", "drivers_shards": 1}
# Dicts whose entries are open-ended (any feature gate may be named).
OPEN_SECTIONS = ("scheduler.feature_gates", "kubernetes.feature_gates")
MAX_SETTINGS = 64


class SettingError(ValueError):
    """A `--with key=value` that names no setting or gives it a value of the wrong kind."""


@dataclass
class WhatIfResult:
    settings: dict[str, Any]
    recorded: dict[str, Any]
    baseline: dict[str, Any]
    whatif: dict[str, Any]
    baseline_identical: bool  # the baseline re-simulation gave the recorded log byte for byte
    whatif_entries: list[tuple[int, bytes]] = field(default_factory=list)


def external_inputs(records: list[tuple[int, Record]]) -> list[Record]:
    """The records the world appended, in log order (the setup record first)."""
    return [record for _, record in records if record.source == "scenario"]


def _section(config: dict[str, Any], path: list[str], key: str) -> dict[str, Any]:
    node: Any = config
    for i, part in enumerate(path):
        if not isinstance(node, dict) or part not in node:
            where = ".".join(path[: i + 1])
            raise SettingError(f"--with {key}: the run config has no section {where!r} "
                               f"(settings: {', '.join(sorted(setting_names(config)))})")
        node = node[part]
    if not isinstance(node, dict):
        raise SettingError(f"--with {key}: {'.'.join(path)} is a value, not a section")
    return node


def setting_names(config: dict[str, Any], prefix: str = "") -> list[str]:
    """Every leaf setting of a run config, dotted (what `--with` accepts)."""
    names = []
    for k, v in config.items():
        name = f"{prefix}{k}"
        if isinstance(v, dict) and v and name not in OPEN_SECTIONS:
            names += setting_names(v, name + ".")
        else:
            names.append(name)
    return names + [k for k in OPTIONAL_SETTINGS if not prefix and k not in names]


def _coerce(key: str, text: str, current: Any) -> Any:
    """The value of `text` as the kind of value the setting holds: a duration for `*_ms` settings
    (`5s`, `10m` or plain milliseconds), else a YAML scalar of the current value's type."""
    try:
        value = yaml.safe_load(text) if text.strip() else ""
    except yaml.YAMLError as exc:
        raise SettingError(f"--with {key}={text}: not a value: {exc}") from None
    if key.endswith("_ms") and isinstance(value, str):
        try:
            return parse_duration(value)
        except ValueError as exc:
            raise SettingError(f"--with {key}={text}: {exc}") from None
    if current is None:
        return value
    if isinstance(current, bool) or isinstance(value, bool):
        if not (isinstance(current, bool) and isinstance(value, bool)):
            raise SettingError(f"--with {key}={text}: expected {type(current).__name__}, got {text!r}")
        return value
    if isinstance(current, float) and isinstance(value, int):
        return float(value)
    if not isinstance(value, type(current)):
        raise SettingError(f"--with {key}={text}: expected {type(current).__name__} "
                           f"(the recorded value is {current!r}), got {text!r}")
    return value


def apply_settings(config: dict[str, Any], settings: list[str]) -> tuple[dict[str, Any], dict[str, Any]]:
    """A copy of `config` with each `key=value` applied; also the changes, key -> new value."""
    if len(settings) > MAX_SETTINGS:
        raise SettingError(f"--with: at most {MAX_SETTINGS} settings, got {len(settings)}")
    new = copy.deepcopy(config)
    changes: dict[str, Any] = {}
    for item in settings:
        key, sep, text = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise SettingError(f"--with {item!r}: expected key=value, e.g. autoscaler.policy=dra")
        parts = key.split(".")
        parent = ".".join(parts[:-1])
        if key in OPTIONAL_SETTINGS and len(parts) > 1:
            section = new.setdefault(parts[0], {})
        else:
            section = _section(new, parts[:-1], key)
        leaf = parts[-1]
        if leaf not in section and key not in OPTIONAL_SETTINGS and parent not in OPEN_SECTIONS:
            raise SettingError(f"--with {key}: no such setting; the run's settings are: "
                               f"{', '.join(sorted(setting_names(config)))}")
        current = section.get(leaf, OPTIONAL_SETTINGS.get(key))
        if isinstance(current, dict):
            keys = ", ".join(f"{key}.{k}" for k in current) or "it has none"
            raise SettingError(f"--with {key}: a section, not a value; set one of its keys ({keys})")
        section[leaf] = changes[key] = _coerce(key, text, current)
    try:
        build_reactors(new)
    except (TypeError, ValueError, KeyError) as exc:
        raise SettingError(f"--with {', '.join(settings)}: the reactors refuse these settings: {exc}") from None
    return new, changes


def with_config(inputs: list[Record], config: dict[str, Any]) -> list[Record]:
    """The inputs with the setup record's `RunStarted` carrying `config`."""
    setup, *rest = inputs
    first = setup.events[0]
    if not isinstance(first, RunStarted):
        raise SettingError("the log's first record does not start with RunStarted")
    started = msgspec.structs.replace(first, config=config)
    return [msgspec.structs.replace(setup, events=(started, *setup.events[1:])), *rest]


def _summary(entries: list[tuple[int, bytes]], end_ms: int, violations: list[Any]) -> dict[str, Any]:
    state = ClusterState()
    for offset, payload in entries:
        state.apply(offset, decode_record(payload, offset))
    return summarize(state, violations, metrics=metrics_from_entries(entries, end_ms=end_ms))


def run_whatif(entries: list[tuple[int, bytes]], settings: list[str]) -> WhatIfResult:
    """Recorded, baseline and what-if summaries of a log (entries as stored). Raises SettingError."""
    records = [(offset, decode_record(payload, offset)) for offset, payload in entries]
    inputs = external_inputs(records)
    if not inputs or not inputs[0].events or not isinstance(inputs[0].events[0], RunStarted):
        raise SettingError("the log does not start with RunStarted: no run configuration to change")
    run = inputs[0].events[0]
    assert isinstance(run, RunStarted)
    config, changes = apply_settings(dict(run.config), settings)
    duration = int(run.config.get("duration_ms", 0))
    new_duration = int(config.get("duration_ms", duration))
    baseline = Simulator.from_inputs(inputs, run.seed, duration).run()
    whatif = Simulator.from_inputs(with_config(inputs, config), run.seed, new_duration).run()
    return WhatIfResult(
        settings=changes,
        recorded=_summary(entries, duration, []),
        baseline=_summary(baseline.entries, duration, baseline.violations),
        whatif=_summary(whatif.entries, new_duration, whatif.violations),
        baseline_identical=baseline.entries == entries,
        whatif_entries=whatif.entries,
    )


# The rows of the side-by-side table: label, path into a summary, format.
ROWS: list[tuple[str, tuple[str, ...], str]] = [
    ("pods scheduled", ("pods", "scheduled"), "d"),
    ("pods pending at the end", ("pods", "pending"), "d"),
    ("pods failed", ("pods", "failed"), "d"),
    ("time to schedule p50 (s)", ("time_to_schedule_s", "p50"), ".1f"),
    ("time to schedule p99 (s)", ("time_to_schedule_s", "p99"), ".1f"),
    ("scale-ups", ("metrics", "scale_ups"), "d"),
    ("scale-ups that brought no pod", ("scale_ups_without_pod",), "d"),
    ("nodes never used", ("metrics", "nodes_never_used"), "d"),
    ("node-hours paid", ("metrics", "node_hours_paid"), ".2f"),
    ("GPU-hours paid", ("gpu_hours_paid",), ".2f"),
    ("GPU-hours idle", ("gpu_hours_idle",), ".2f"),
    ("GPU allocation ratio", ("metrics", "gpu_allocation_ratio", "mean"), ".3f"),
    ("pending pod-seconds", ("pending_pod_seconds_by_reason",), "sum"),
    ("invariant violations", ("invariant_violations",), "len"),
]


def _pick(summary: dict[str, Any], path: tuple[str, ...]) -> Any:
    node: Any = summary
    for part in path:
        if not isinstance(node, dict):
            return None
        node = node.get(part)
    return node


def _fmt(value: Any, spec: str) -> str:
    if spec == "sum":
        value = sum((value or {}).values())
        spec = ".0f"
    elif spec == "len":
        value = len(value or [])
        spec = "d"
    if value is None:
        return "-"
    return format(value, spec)


def side_by_side(result: WhatIfResult) -> list[dict[str, Any]]:
    """One row per metric: the three runs' values (None where a run has no value)."""
    rows = []
    for label, path, spec in ROWS:
        values = [_pick(s, path) for s in (result.recorded, result.baseline, result.whatif)]
        if spec == "sum":
            values = [sum((v or {}).values()) for v in values]
        elif spec == "len":
            values = [len(v or []) for v in values]
        rows.append({"metric": label, "recorded": values[0], "baseline": values[1], "whatif": values[2],
                     "format": ".0f" if spec == "sum" else "d" if spec == "len" else spec})
    return rows


def render_table(result: WhatIfResult, settings_label: str) -> str:
    rows = side_by_side(result)
    show_baseline = not result.baseline_identical
    heads = ["metric", "recorded", *(["baseline (sim)"] if show_baseline else []), "what-if"]
    table = [[r["metric"], _fmt(r["recorded"], r["format"]),
              *([_fmt(r["baseline"], r["format"])] if show_baseline else []),
              _fmt(r["whatif"], r["format"])] for r in rows]
    widths = [max(len(heads[i]), *(len(row[i]) for row in table)) for i in range(len(heads))]
    lines = [f"what-if: {settings_label}"]
    lines += ["  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths, strict=True)))
             for row in (heads, *table)]
    if result.baseline_identical:
        lines.append("(the recorded inputs re-simulated with unchanged settings give the recorded log byte for byte)")
    else:
        lines.append("(baseline: the recorded inputs re-simulated with unchanged settings; it differs from the "
                     "recorded run, e.g. a live run's interleavings, so compare the what-if run with it)")
    return "\n".join(lines)
