"""Time travel: the cluster as it was at one point of a recorded run, and the story of one pod.

`dralab replay FILE --at OFFSET|TIME` folds the log up to a point (from the nearest snapshot in the file
when it has one) and describes the state a person debugging a coordination bug wants to see first:
nodes and their devices, pods and why the pending ones wait, provisioning requests, node groups, and
what each reactor had seen: the view offset of its latest decision, which is how far behind the log a
reactor was when it acted (a live run's reactors decide on views older than the log's end).

`--explain POD` walks the log once and tells every event that touched the pod (Event.touched: a binding,
a condition, a claim allocated for it, an eviction) and every decision that named it without touching
it (a scale-up meant for it), with the decision's reactor, view and time.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import msgspec
import yaml

from dralab.core.analysis.autoscaler_status import pod_event, status_configmap
from dralab.core.analysis.waits import pending_cause
from dralab.core.kube.durations import format_duration, parse_duration
from dralab.core.log.events import AnyEvent, Record, ScaleUpRequested
from dralab.core.state.cluster import ClusterState

_OFFSET = re.compile(r"\d+")


class PointError(ValueError):
    """An `--at` value that is neither an offset nor a cluster time."""


@dataclass(frozen=True)
class Point:
    kind: str  # "offset" | "time"
    value: int  # an offset, or cluster ms

    def label(self) -> str:
        return f"offset {self.value}" if self.kind == "offset" else f"t={format_duration(self.value)}"


def parse_point(text: str) -> Point:
    """A bare integer is an offset (`--at 120`); a duration is a cluster time (`--at 5m`, `--at 90s`,
    `--at 1h2m3s`, or `--at t=300000` in milliseconds)."""
    text = text.strip()
    if _OFFSET.fullmatch(text):
        return Point("offset", int(text))
    raw = text[2:] if text.startswith("t=") else text
    try:
        return Point("time", parse_duration(raw))
    except ValueError as exc:
        raise PointError(f"--at {text!r}: neither an offset (a whole number) nor a cluster time "
                         f"(e.g. 90s, 5m, 1h30m): {exc}") from None


def _devices_by_node(state: ClusterState) -> dict[str, dict[str, int]]:
    """Per node, DRA devices published for it and how many are allocated (dedicated or shared)."""
    allocated = state.dra.allocated
    shared = {dev for dev, _ in allocated.shared} | set(allocated.capacity)
    out: dict[str, dict[str, int]] = {}
    for slc in state.dra.slices.values():
        node = slc.node_selection.node_name if slc.node_selection is not None else None
        if not node:
            continue
        row = out.setdefault(node, {"devices": 0, "allocated": 0, "shared": 0})
        for device in slc.devices:
            row["devices"] += 1
            if device.id in allocated.devices:
                row["allocated"] += 1
            elif device.id in shared:
                row["shared"] += 1
    return out


def describe(state: ClusterState, seen: dict[str, dict[str, int]]) -> dict[str, Any]:
    """The state as plain data (the JSON of `--at`); `seen`: reactor -> its latest decision's view."""
    devices = _devices_by_node(state)
    # what gang members waiting at Permit hold on each node: it counts as used for every other pod (as an
    # assumed pod does upstream) but is in no pod's `used`, so a node can look empty and still refuse pods
    held: dict[str, dict[str, int]] = {}
    for r in state.gang.reservations.values():
        h = held.setdefault(r.node, {"pods": 0})
        h["pods"] += 1
        for resource, amount in r.requests.items():
            h[resource] = h.get(resource, 0) + amount
    nodes = []
    for name, node in sorted(state.nodes.items()):
        gpus = node.allocatable.get("nvidia.com/gpu", 0)
        row: dict[str, Any] = {
            "name": name, "group": node.group, "ready": node.ready, "pods": len(node.pods),
            "cpu_m": {"used": node.used.get("cpu", 0), "allocatable": node.allocatable.get("cpu", 0)},
        }
        if gpus:
            row["gpus"] = {"used": node.used.get("nvidia.com/gpu", 0), "allocatable": gpus}
        if name in devices:
            d = devices[name]
            row["devices"] = {"total": d["devices"], "allocated": d["allocated"], "shared": d["shared"],
                              "free": d["devices"] - d["allocated"] - d["shared"]}
        if name in held:
            h = held[name]
            row["held_at_permit"] = {"pods": h["pods"], "cpu_m": h.get("cpu", 0),
                                     **({"gpus": h["nvidia.com/gpu"]} if "nvidia.com/gpu" in h else {})}
        taints = [t.get("key") for t in node.taints]
        if taints:
            row["taints"] = taints
        nodes.append(row)
    pods = []
    for key, pod in sorted(state.pods.items()):
        row = {"pod": key, "phase": pod.phase, "node": pod.node, "created_s": pod.created_t / 1000}
        if pod.phase == "Pending":
            row["reason"] = pending_cause(state, pod)
            if pod.condition is not None:
                row["message"] = pod.condition.message
            if key in state.gang.reservations:
                row["waiting_at_permit_on"] = state.gang.reservations[key].node
            if (said := pod_event(state, key)) is not None:  # cluster-autoscaler's last Event on it (issue 22)
                row["autoscaler"] = f"{said[0]}: {said[1]}"
        pods.append(row)
    requests = [
        {"request": key, "class": req.cls, "pods": req.count,
         "conditions": {kind: f"{c.status}/{c.reason}" for kind, c in req.conditions.items()}}
        for key, req in state.provisioning.requests.items()
    ]
    groups = [
        {"group": name, "nodes": len(state.nodes_by_group.get(name, {})), "target_size": g.target_size,
         "max": g.max, "outstanding": g.outstanding}
        for name, g in sorted(state.node_groups.items())
    ]
    return {
        "offset": state.offset, "t_s": state.t / 1000, "nodes": nodes, "pods": pods,
        "provisioning_requests": requests, "node_groups": groups,
        "provisioning_nodes": sorted(state.provisioning_nodes),
        "reactors": {name: {**s, "behind": state.offset - s["view"]} for name, s in sorted(seen.items())},
        # cluster-autoscaler's status ConfigMap at this point (release profiles, whose autoscaler writes it)
        **({"autoscaler_status": status_configmap(state)} if state.run and "kubernetes" in state.run.config else {}),
    }


def render(desc: dict[str, Any], max_rows: int = 40) -> str:
    """The state for a person: counts first, then the rows that matter (pending pods before running)."""
    pods = desc["pods"]
    by_phase: dict[str, int] = {}
    for p in pods:
        by_phase[p["phase"]] = by_phase.get(p["phase"], 0) + 1
    nodes = desc["nodes"]
    lines = [f"at offset {desc['offset']}, t={format_duration(int(desc['t_s'] * 1000))}: "
             f"{len(nodes)} nodes ({sum(n['ready'] for n in nodes)} Ready), "
             f"{len(desc['provisioning_nodes'])} provisioning; pods "
             + (", ".join(f"{k} {v}" for k, v in sorted(by_phase.items())) or "none")]
    if desc["node_groups"]:
        lines.append("node groups:")
        lines += [f"  {g['group']:<20} {g['nodes']} nodes, target {g['target_size']}/{g['max']}, "
                  f"{g['outstanding']} coming" for g in desc["node_groups"]]
    lines.append("nodes:")
    for n in nodes[:max_rows]:
        parts = [f"  {n['name']:<24} {n['group'] or '-':<12} {'Ready' if n['ready'] else 'NotReady':<8} "
                 f"{n['pods']} pods"]
        if "gpus" in n:
            parts.append(f"gpus {n['gpus']['used']}/{n['gpus']['allocatable']}")
        if "devices" in n:
            d = n["devices"]
            parts.append(f"devices {d['allocated']} allocated, {d['shared']} shared, {d['free']} free")
        if "held_at_permit" in n:
            h = n["held_at_permit"]
            parts.append(f"held at Permit: {h['pods']} pods" + (f", {h['gpus']} gpus" if "gpus" in h else ""))
        if n.get("taints"):
            parts.append(f"taints {','.join(map(str, n['taints']))}")
        lines.append("  ".join(parts))
    if len(nodes) > max_rows:
        lines.append(f"  ... {len(nodes) - max_rows} more (-o json has them all)")
    ordered = sorted(pods, key=lambda p: (p["phase"] != "Pending", p["pod"]))
    lines.append("pods:")
    for p in ordered[:max_rows]:
        if p["phase"] == "Pending":
            lines.append(f"  {p['pod']:<40} Pending  {p['reason']}" + (f": {p['message']}" if p.get("message") else "")
                         + (f"; autoscaler {p['autoscaler']}" if p.get("autoscaler") else ""))
        else:
            lines.append(f"  {p['pod']:<40} {p['phase']:<8} {p['node'] or ''}")
    if len(pods) > max_rows:
        lines.append(f"  ... {len(pods) - max_rows} more (-o json has them all)")
    if desc["provisioning_requests"]:
        lines.append("provisioning requests:")
        lines += [f"  {r['request']:<30} {r['class']}  "
                  + " ".join(f"{k}={v}" for k, v in r["conditions"].items()) for r in desc["provisioning_requests"]]
    lines.append("what each reactor had seen (its latest decision's view):")
    lines += [f"  {name:<12} view {s['view']} at t={format_duration(s['t'])}, {s['behind']} records behind"
              for name, s in desc["reactors"].items()] or ["  no decision yet"]
    if desc.get("autoscaler_status"):  # the status ConfigMap's data.status, as the release's autoscaler writes it
        lines.append("cluster-autoscaler-status (kube-system ConfigMap, data.status):")
        lines += ["  " + line for line in yaml.safe_dump(desc["autoscaler_status"], sort_keys=False).splitlines()]
    return "\n".join(lines)


def reactors_seen(records: Iterable[tuple[int, Record]]) -> dict[str, dict[str, int]]:
    """Reactor -> the view offset and time of its latest decision among `records`."""
    seen: dict[str, dict[str, int]] = {}
    for offset, record in records:
        if record.source != "scenario":
            seen[record.source] = {"view": record.view, "t": record.t, "decision": offset}
    return seen


# -- --explain -------------------------------------------------------------------------------------------

def _names_pod(event: AnyEvent, key: str, name: str) -> bool:
    """An event that names the pod without writing it: a scale-up made for it, a claim allocated,
    reserved or released for it."""
    if isinstance(event, ScaleUpRequested):
        return key in event.pods or name in event.pods
    return getattr(event, "pod", None) in (key, name)


def _describe_event(event: AnyEvent) -> str:
    data = msgspec.to_builtins(event)
    kind = data.pop("type")
    for bulky in ("pod", "manifest", "node", "allocation", "allocations"):
        value = data.get(bulky)
        if isinstance(value, dict):
            data[bulky] = "{...}"
    data = {k: v for k, v in data.items() if v not in ("", [], {}, None, -1)}
    return f"{kind} " + " ".join(f"{k}={v}" for k, v in data.items())


def explain(records: Iterable[tuple[int, Record]], pod: str) -> dict[str, Any]:
    """The story of one pod (`ns/name`, `name` for the default namespace, or `pod/ns/name`)."""
    key = pod if pod.startswith("pod/") else f"pod/{pod if '/' in pod else 'default/' + pod}"
    name = key.removeprefix("pod/")
    story: list[dict[str, Any]] = []
    state = ClusterState()
    for offset, record in records:
        state.apply(offset, record)
        for event in record.events:
            touched = key in event.touched()
            if touched or _names_pod(event, key, name):
                story.append({"offset": offset, "t_ms": record.t, "source": record.source, "view": record.view,
                              "role": "wrote" if touched else "named", "event": _describe_event(event)})
    found = state.pods.get(name) or state.pods.get(key)
    pod_state: dict[str, Any] | None
    if found is None:
        pod_state = None
    else:
        pod_state = {"phase": found.phase, "node": found.node, "created_s": found.created_t / 1000,
                     "bound_s": found.bound_t / 1000 if found.bound_t >= 0 else None,
                     "attempts": found.attempts}
        if found.phase == "Pending":
            pod_state["reason"] = pending_cause(state, found)
        if (said := pod_event(state, found.key)) is not None:  # cluster-autoscaler's last Event on it (issue 22)
            pod_state["autoscaler"] = {"reason": said[0], "message": said[1]}
            if found.phase == "Pending" and found.condition is not None:
                pod_state["message"] = found.condition.message  # the scheduler's, beside the autoscaler's
    return {"pod": name, "found": bool(story), "final": pod_state, "story": story}


def render_story(result: dict[str, Any]) -> str:
    lines = [f"pod {result['pod']}: {len(result['story'])} events"]
    for s in result["story"]:
        who = "world" if s["source"] == "scenario" else f"{s['source']} (view {s['view']})"
        lines.append(f"  t={format_duration(s['t_ms']):>9}  @{s['offset']:<7} {who:<24} {s['event']}")
    final = result["final"]
    if final is not None:
        tail = f"{final['phase']}" + (f" on {final['node']}" if final["node"] else "")
        if final.get("reason"):
            tail += f", waiting: {final['reason']}" + (f" ({final['message']})" if final.get("message") else "")
        if final.get("autoscaler"):
            tail += f"; autoscaler {final['autoscaler']['reason']}: {final['autoscaler']['message']}"
        lines.append(f"  at the end: {tail}; {final['attempts']} failed scheduling attempt(s)")
    return "\n".join(lines)
