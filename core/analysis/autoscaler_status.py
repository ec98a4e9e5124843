"""cluster-autoscaler's status as it would stand at a point of a log: the ConfigMap
`kube-system/cluster-autoscaler-status` it writes every loop, the Events it wrote on pods
(core/log/events_autoscaler.py), and their summary.

The ConfigMap's `data.status` is YAML of the shape recent releases write (sigs.k8s.io/cluster-autoscaler
pkg/clusterstate/api/types.go, pkg/clusterstate/utils/status_test.yaml): `time`, `autoscalerStatus: Running`,
`clusterWide` (health with node counts, scaleUp, scaleDown) and `nodeGroups[]` (each with health, its node counts,
`cloudProviderTarget`, `minSize`, `maxSize`, scaleUp `Backoff` (with `backoffInfo`), `InProgress` or `NoActivity`,
and scaleDown). Computed from the fold at that point, as the registry would count: a registered node is ready,
NotStarted (not ready, registered less than max-node-startup-time ago) or unready; `unregistered` counts the VMs
the cloud is still making; scaleDown counts the nodes the autoscaler has tainted for deletion (dralab keeps no
unneeded list in the log). `lastProbeTime` is the point's time; `lastTransitionTime` is not kept (omitted).
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import yaml

from ..autoscaler.disruption.candidates import TAINT_KEY
from ..autoscaler.provisioning.backoff import backoff_until
from ..kube import defaults
from ..log.events_autoscaler import STATUS_CONFIGMAP
from ..state.cluster import ClusterState, NodeState

EPOCH_DAYS = 20_454  # 2026-01-01 in days since 1970-01-01: cluster time 0 (dralab's logs carry no wall clock)


def _stamp(t_ms: int) -> str:
    """RFC 3339 of cluster time `t_ms` from EPOCH_DAYS (core/ reads no clock: no datetime; H. Hinnant's
    civil_from_days)."""
    days, ms = divmod(t_ms, 86_400_000)
    z = EPOCH_DAYS + days + 719_468
    era = z // 146_097
    doe = z - era * 146_097
    yoe = (doe - doe // 1460 + doe // 36_524 - doe // 146_096) // 365
    doy = doe - (365 * yoe + yoe // 4 - yoe // 100)
    mp = (5 * doy + 2) // 153
    day, month = doy - (153 * mp + 2) // 5 + 1, mp + 3 if mp < 10 else mp - 9
    year = yoe + era * 400 + (month <= 2)
    secs = ms // 1000
    return f"{year:04d}-{month:02d}-{day:02d}T{secs // 3600:02d}:{secs // 60 % 60:02d}:{secs % 60:02d}Z"


def _settings(state: ClusterState) -> dict[str, Any]:
    return dict((state.run.config if state.run else {}).get("autoscaler") or {})


def _counts(nodes: list[NodeState], vms: int, now: int, startup_ms: int) -> dict[str, Any]:
    ready = sum(1 for n in nodes if n.ready)
    not_started = sum(1 for n in nodes if not n.ready and n.created_t + startup_ms > now)
    deleting = sum(1 for n in nodes if any(t.get("key") == TAINT_KEY for t in n.taints))
    registered: dict[str, Any] = {"total": len(nodes), "ready": ready, "notStarted": not_started, "suspended": 0}
    if deleting:
        registered["beingDeleted"] = deleting
    unready = len(nodes) - ready - not_started
    if unready:
        registered["unready"] = {"total": unready}
    return {"registered": registered, "longUnregistered": 0, "unregistered": vms}


def status_configmap(state: ClusterState, now: int | None = None) -> dict[str, Any]:
    """The ConfigMap's `data.status` as a mapping, at the state's time (or `now`)."""
    now = state.t if now is None else now
    cfg = _settings(state)
    startup = int(cfg.get("max_node_startup_time_ms", defaults.MAX_NODE_STARTUP_TIME_MS))
    backoff = (int(cfg.get("initial_node_group_backoff_ms", defaults.INITIAL_NODE_GROUP_BACKOFF_MS)),
               int(cfg.get("max_node_group_backoff_ms", defaults.MAX_NODE_GROUP_BACKOFF_MS)),
               int(cfg.get("node_group_backoff_reset_timeout_ms", defaults.NODE_GROUP_BACKOFF_RESET_TIMEOUT_MS)))
    ok_count = int(cfg.get("ok_total_unready_count", defaults.OK_TOTAL_UNREADY_COUNT))
    pct = float(cfg.get("max_total_unready_percentage", defaults.MAX_TOTAL_UNREADY_PERCENTAGE))
    probe = _stamp(now)
    all_nodes = list(state.nodes.values())
    vms = Counter(vm.group for vm in state.provisioning_nodes.values())
    cluster_counts = _counts(all_nodes, sum(vms.values()), now, startup)
    unready = cluster_counts["registered"].get("unready", {}).get("total", 0)
    healthy = not (unready > ok_count and unready > pct / 100.0 * len(all_nodes))
    groups: list[dict[str, Any]] = []
    any_up, candidates = False, 0
    for name, g in sorted(state.node_groups.items()):
        nodes = [state.nodes[n] for n in state.nodes_by_group.get(name, {}) if n in state.nodes]
        counts = _counts(nodes, vms.get(name, 0), now, startup)
        until = backoff_until(g, *backoff)
        scale_up: dict[str, Any]
        if now < until:
            reason = g.failures[-1][2] if g.failures else ""
            scale_up = {"status": "Backoff", "backoffInfo": {"errorCode": reason.upper().replace("-", "_"),
                                                             "errorMessage": f"scale-up failed: {reason}"}}
        elif g.outstanding > 0 or counts["registered"]["notStarted"]:
            scale_up, any_up = {"status": "InProgress"}, True
        else:
            scale_up = {"status": "NoActivity"}
        deleting = counts["registered"].get("beingDeleted", 0)
        candidates += deleting
        groups.append({
            "name": name,
            "health": {"status": "Healthy" if healthy else "Unhealthy", "nodeCounts": counts,
                       "cloudProviderTarget": g.target_size, "minSize": g.min, "maxSize": g.max,
                       "lastProbeTime": probe},
            "scaleUp": {**scale_up, "lastProbeTime": probe},
            "scaleDown": {"status": "CandidatesPresent" if deleting else "NoCandidates",
                          **({"candidates": deleting} if deleting else {}), "lastProbeTime": probe},
        })
    return {
        "time": probe,
        "autoscalerStatus": "Running",
        "clusterWide": {
            "health": {"status": "Healthy" if healthy else "Unhealthy", "nodeCounts": cluster_counts,
                       "lastProbeTime": probe},
            "scaleUp": {"status": "InProgress" if any_up else "NoActivity", "lastProbeTime": probe},
            "scaleDown": {"status": "CandidatesPresent" if candidates else "NoCandidates",
                          **({"candidates": candidates} if candidates else {}), "lastProbeTime": probe},
        },
        "nodeGroups": groups,
    }


def render_configmap(state: ClusterState, now: int | None = None) -> str:
    """The ConfigMap as `kubectl get configmap -n kube-system cluster-autoscaler-status -o yaml` shows it."""
    data = str(yaml.safe_dump(status_configmap(state, now), sort_keys=False))
    manifest = {"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "cluster-autoscaler-status", "namespace": "kube-system"},
                "data": {"status": data}}
    return str(yaml.safe_dump(manifest, sort_keys=False))


def pod_event(state: ClusterState, pod_key: str) -> tuple[str, str] | None:
    """The latest autoscaler Event on a pod: (reason, message), or None."""
    latest: tuple[int, str, str] | None = None
    for reason in ("TriggeredScaleUp", "NotTriggerScaleUp"):
        hit = state.autoscaler_events.get(f"{reason} {pod_key}")
        if hit is not None and (latest is None or hit[0] >= latest[0]):
            latest = (hit[0], reason, hit[1])
    return None if latest is None else (latest[1], latest[2])


def autoscaler_summary(state: ClusterState) -> dict[str, Any] | None:
    """The summary's `autoscaler` object (runs whose autoscaler wrote Events: release profiles): scale-ups
    asked, pods that triggered one, pods that did not (their last NotTriggerScaleUp's reasons, each counted once
    per pod), and the ConfigMap warnings."""
    if not state.autoscaler_events:
        return None
    triggered, not_triggered = set(), {}
    warnings: Counter[str] = Counter()
    for key, (_, message) in state.autoscaler_events.items():
        reason, _, involved = key.partition(" ")
        if involved == STATUS_CONFIGMAP:
            warnings[reason] += 1
        elif reason == "TriggeredScaleUp":
            triggered.add(involved)
        elif reason == "NotTriggerScaleUp":
            not_triggered[involved] = message
    reasons: Counter[str] = Counter()
    for key, message in not_triggered.items():
        pod = state.pods.get(key)
        if pod is not None and pod.bound_t >= 0:
            continue  # it found a node in the end
        for part in message.removeprefix("pod didn't trigger scale-up: ").split(", "):
            count, _, text = part.partition(" ")
            reasons[text if count.isdigit() else part] += 1
    pending = [k for k in not_triggered if (p := state.pods.get(k)) is None or p.bound_t < 0]
    return {"scale_ups": len(state.scale_ups), "pods_triggered": len(triggered),
            "pods_not_triggering": len(pending), "not_triggering_reasons": dict(sorted(reasons.items())),
            "configmap_events": dict(sorted(warnings.items()))}


def summary_line(summary: dict[str, Any]) -> list[str]:
    """The summary's text line: "autoscaler N scale-ups triggered, M pods not triggering (reasons: ...)"."""
    a = summary.get("autoscaler")
    if not a:
        return []
    why = ", ".join(f"{k}: {v}" for k, v in a["not_triggering_reasons"].items())
    warn = ", ".join(f"{k} {v}" for k, v in a["configmap_events"].items())
    return [f"autoscaler {a['scale_ups']} scale-ups triggered, {a['pods_not_triggering']} pods not triggering"
            + (f" (reasons: {why})" if why else "") + (f"; {warn}" if warn else "")]


AUTOSCALER_REASONS = ("TriggeredScaleUp", "NotTriggerScaleUp")


def dump_events(objects: list[dict[str, Any]]) -> dict[tuple[str, str], dict[str, str]]:
    """The last TriggeredScaleUp / NotTriggerScaleUp cluster-autoscaler recorded on each pod of a dump: Events
    (`kubectl get events -A -o yaml`: core/v1 `involvedObject` and `message`, or events.k8s.io/v1 `regarding` and
    `note`) among the dump's other objects; (namespace, name) -> {reason, message}, the latest by its timestamp."""
    latest: dict[tuple[str, str], tuple[str, dict[str, str]]] = {}
    for obj in objects:
        if obj.get("kind") != "Event" or obj.get("reason") not in AUTOSCALER_REASONS:
            continue
        source = (obj.get("source") or {}).get("component") or obj.get("reportingController") or ""
        if source != "cluster-autoscaler":
            continue
        target = obj.get("involvedObject") or obj.get("regarding") or {}
        if target.get("kind") != "Pod":
            continue
        key = (str(target.get("namespace") or "default"), str(target.get("name") or ""))
        when = str(obj.get("lastTimestamp") or obj.get("deprecatedLastTimestamp") or obj.get("eventTime")
                   or (obj.get("metadata") or {}).get("creationTimestamp") or "")
        message = str(obj.get("message") or obj.get("note") or "")
        if key not in latest or when >= latest[key][0]:
            latest[key] = (when, {"reason": str(obj["reason"]), "message": message})
    return {k: v for k, (_, v) in latest.items()}
