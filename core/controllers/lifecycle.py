"""Node lifecycle (the kubelet's part of a node's and a pod's life), as a reactor, and node operations.

The cloud (cloud.py) decides when a VM it accepted registers and turns Ready; this reactor replays it:
at `register_at` the Node object appears (`NodeCreated`, NotReady), at `ready_at` it turns Ready
(`NodeReady`). Its device drivers publish after that (drivers.py). Pods that were given a run time
finish after it (`PodFinished`).

The other changes of a node are functions that return the events, for whoever decides them (the
autoscaler's scale-down, fault injection): `node_not_ready`, `set_taints` and `delete_node`, which
fails the pods still on the node before it goes, as the pod garbage collector does for the pods of a
deleted node (their claims are then released by the resourceclaim controller).

A pod deleted gracefully (`PodTerminating`, a preemption victim: core/state/termination.py) is ended when its
grace period is over, as the kubelet does once the containers stopped: `PodEvicted` (Failed, with its
DisruptionTarget condition), so its controller replaces it and its claims are released.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from ..engine.contract import Decision, Trigger
from ..log.events import AnyEvent, NodeCreated, NodeReady, PodEvicted, PodFinished
from ..state.cluster import ClusterState
from ..state.termination import terminating

__all__ = ["Lifecycle"]


@dataclass
class Lifecycle:
    name: str = "lifecycle"
    trigger: Trigger = "events"

    def react(self, view: ClusterState, now: int, rng: random.Random) -> Decision:
        events: list[AnyEvent] = []
        wake: list[int] = []
        for vm in view.provisioning_nodes.values():
            if vm.register_at < 0:
                continue  # an instance the cloud never creates (a stockout it retries forever: cloud_ops.py)
            if vm.register_at > now:
                wake.append(vm.register_at)
                continue
            events.append(NodeCreated(name=vm.name, group=vm.group, node=vm.node, ready_at=vm.ready_at))
            if 0 <= vm.ready_at <= now:
                events.append(NodeReady(name=vm.name))
            elif vm.ready_at > now:
                wake.append(vm.ready_at)  # (-1: it never turns Ready, cloud.py `neverReadyRate`)
        for name in view.never_ready:  # the nodes never Ready yet, in the order of view.nodes
            node = view.nodes[name]
            if node.ready_t < 0 and not node.ready and node.ready_at >= 0:
                if node.ready_at <= now:
                    events.append(NodeReady(name=node.name))
                else:
                    wake.append(node.ready_at)
        done, later = view.finishing(now)  # running pods with a run time, in running order
        for key in done:
            pod = view.pods[key]
            if terminating(pod.manifest):  # its grace period (or its run) is over: the kubelet ends it
                events.append(PodEvicted(pod=key, node=str(pod.node), reason="terminated: grace period over"))
            else:
                events.append(PodFinished(pod=key))
        if later is not None:
            wake.append(later)
        return Decision(tuple(events), min(wake) if wake else None)
