"""The chaos reactor: the cluster's side of injected faults.

A fault enters the log as an external input (`FaultInjected`, from a scenario's `spec.faults` or a
random chaos schedule): what, on what, until when. This reactor writes what the fault does to the
cluster when it starts, and undoes it when it ends, each time in one record with a `FaultApplied`
marker, so the fold knows how far each fault has got and the reactor keeps no memory of its own (it
can be killed and restarted at any point, like every reactor):

- `node-fail`: the kubelet stops posting status; the node is NotReady (`NodeNotReady`), its pods keep
  running, nothing new is placed there; at the end it is Ready again. (Upstream's node lifecycle
  controller would also taint it `node.kubernetes.io/unreachable` and evict pods that do not tolerate
  that after 300 s: not modelled yet.)
- `node-taint`: the node gets the fault's taint (`NodeTaintsChanged`, its other taints kept); at the
  end that taint is removed.
- `device-taint`: a DeviceTaintRule is created (`DeviceTaintRuleCreated`, its taint added at the start's time);
  at the end it is deleted.

Faults of the other kinds (device, cloud, runtime: core/scenario/faults.py) are acted on by the drivers,
the cloud or the runtime, which read the active faults from their view; this reactor only marks when
they start and end (the start's `note` says when the node or group they name does not exist).

A fault whose node does not exist when it starts (not created yet, already deleted) changes nothing
and says so (`note`); its end then changes nothing either. A node that is NotReady already is left as
it is, and not made Ready at the end.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

from ..cluster.nodes import node_not_ready, set_taints
from ..dra.taint_rules import fault_rule, fault_rule_name
from ..engine.contract import Decision, Trigger
from ..log.events import AnyEvent, DeviceTaintRuleCreated, DeviceTaintRuleDeleted, FaultApplied, NodeReady
from ..scenario.faults import KINDS
from ..state.cluster import ClusterState, FaultState


@dataclass
class Chaos:
    name: str = "chaos"
    trigger: Trigger = "events"

    def react(self, view: ClusterState, now: int, rng: random.Random) -> Decision:
        events: list[AnyEvent] = []
        wake: int | None = None
        for fault in view.faults.values():
            if not fault.started:
                events += _start(view, fault, now)
                fault_end = fault.until_ms
            elif not fault.ended and 0 <= fault.until_ms <= now:
                events += _end(view, fault)
                continue
            else:
                fault_end = fault.until_ms if not fault.ended else -1
            if fault_end >= 0:
                wake = fault_end if wake is None else min(wake, fault_end)
        return Decision(tuple(events), wake)


def _start(view: ClusterState, fault: FaultState, now: int = 0) -> list[AnyEvent]:
    if fault.kind == "device-taint":  # a DeviceTaintRule, its taint added now (core/dra/taint_rules.py)
        manifest = fault_rule(fault_rule_name(fault.fault, fault.params), fault.params)
        return [FaultApplied(fault=fault.fault, phase="start"), DeviceTaintRuleCreated(manifest=manifest,
                                                                                       time_added_ms=now)]
    spec = KINDS.get(fault.kind)
    if spec is not None and spec.who != "chaos":  # the drivers, the cloud or the runtime act on it
        return [FaultApplied(fault=fault.fault, phase="start", note=_missing(view, fault, spec.target))]
    node = view.nodes.get(fault.target)
    if node is None:
        return [FaultApplied(fault=fault.fault, phase="start", note=f"node {fault.target} does not exist")]
    if fault.kind == "node-fail":
        if not node.ready:
            return [FaultApplied(fault=fault.fault, phase="start", note=f"node {fault.target} is NotReady already")]
        return [FaultApplied(fault=fault.fault, phase="start"), *node_not_ready(node.name)]
    if fault.kind == "node-taint":
        taint: dict[str, Any] = dict(fault.params.get("taint") or {})
        if any(_same(t, taint) for t in node.taints):
            return [FaultApplied(fault=fault.fault, phase="start", note=f"node {fault.target} has the taint already")]
        return [FaultApplied(fault=fault.fault, phase="start"), *set_taints(view, node.name, [*node.taints, taint])]
    return [FaultApplied(fault=fault.fault, phase="start", note=f"fault kind {fault.kind} has no cluster effect")]


def _missing(view: ClusterState, fault: FaultState, target: str) -> str:
    """Why a fault acted on by others has nothing to act on ("" when its target is there)."""
    if target == "node" and fault.target not in view.nodes:
        return f"node {fault.target} does not exist"
    if target == "group" and fault.target not in view.node_groups:
        return f"node group {fault.target} does not exist"
    return ""


def _end(view: ClusterState, fault: FaultState) -> list[AnyEvent]:
    if fault.kind == "device-taint":
        name = fault_rule_name(fault.fault, fault.params)
        gone = [DeviceTaintRuleDeleted(name=name)] if name in view.dra.taint_rules.rules else []
        return [FaultApplied(fault=fault.fault, phase="end", note="" if gone else f"rule {name} is gone"), *gone]
    spec = KINDS.get(fault.kind)
    if spec is not None and spec.who != "chaos":
        return [FaultApplied(fault=fault.fault, phase="end")]
    node = view.nodes.get(fault.target)
    if not fault.effective or node is None:
        note = "nothing to undo" if not fault.effective else f"node {fault.target} is gone"
        return [FaultApplied(fault=fault.fault, phase="end", note=note)]
    if fault.kind == "node-fail":
        return [FaultApplied(fault=fault.fault, phase="end"), *([NodeReady(name=node.name)] if not node.ready else [])]
    if fault.kind == "node-taint":
        taint = dict(fault.params.get("taint") or {})
        kept = [t for t in node.taints if not _same(t, taint)]
        return [FaultApplied(fault=fault.fault, phase="end"), *set_taints(view, node.name, kept)]
    return [FaultApplied(fault=fault.fault, phase="end")]


def _same(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """Taints are the same taint when key and effect match (as `kubectl taint` replaces them)."""
    return a.get("key") == b.get("key") and a.get("effect") == b.get("effect")
