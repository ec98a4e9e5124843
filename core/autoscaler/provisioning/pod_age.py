"""Which pending pods a loop may scale up for, by their age, and whether the cluster is healthy enough to act:
cluster-autoscaler's filterOutYoungPods, allPodsAreNew and ClusterStateRegistry.IsClusterHealthy
(sigs.k8s.io/cluster-autoscaler pkg/core/static_autoscaler.go, pkg/clusterstate/clusterstate.go; unchanged in
every release dralab emulates, 1.34-1.37).

- filterOutYoungPods (after FilterOutSchedulable): a pod is considered once its age is strictly greater than
  `--new-pod-scale-up-delay` (0 s), or than its annotation `cluster-autoscaler.kubernetes.io/pod-scale-up-delay`
  when that parses as a Go duration and is not shorter than the flag (a shorter or unparsable annotation is
  logged and ignored upstream, so here too).
- allPodsAreNew: no scale-up while the oldest of the pods left is younger than 2 s, or the oldest of those asking
  a GPU extended resource (`nvidia.com/gpu` and the other vendors' names; a DRA claim is not one) younger than
  30 s ("waiting one iteration for more"); that loop's scale-down is skipped too (DisableScaleDownForLoop).
- IsClusterHealthy: more unready nodes than `--ok-total-unready-count` (3) and than
  `--max-total-unready-percentage` (45 %) of the registered nodes, and the loop stops after the late-node checks
  (no scale-up, no scale-down; a `ClusterUnhealthy` event). A node is unready when it is not Ready (or, for the
  DRA policies, its drivers have not published: the DRA hack rewrites it NotReady) and registered longer ago than
  `--max-node-startup-time`; a younger one is NotStarted, which does not count.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from ...kube.defaults import (
    GPU_VENDOR_RESOURCE_NAMES,
    POD_SCALE_UP_DELAY_ANNOTATION,
    UNSCHEDULABLE_POD_TIME_BUFFER_MS,
    UNSCHEDULABLE_POD_WITH_GPU_TIME_BUFFER_MS,
)
from ...kube.durations import DurationError, parse_duration
from ...state.cluster import ClusterState, NodeState, PodState

_BARE_NUMBER = re.compile(r"\d+(\.\d*)?|\.\d+")  # Go's time.ParseDuration wants a unit (except for "0")


def pod_delay(pod: PodState, flag_ms: int) -> int:
    """The pod's scale-up delay: the flag, or the annotation when it is a valid Go duration not below the flag."""
    text = ((pod.manifest.get("metadata") or {}).get("annotations") or {}).get(POD_SCALE_UP_DELAY_ANNOTATION)
    if not isinstance(text, str) or (_BARE_NUMBER.fullmatch(text) and text != "0"):
        return flag_ms
    try:
        delay = parse_duration(text)
    except DurationError:
        return flag_ms  # upstream: "Failed to parse pod ... annotation", the flag stays
    return delay if delay >= flag_ms else flag_ms


def old_enough(pods: list[PodState], now: int, flag_ms: int) -> list[PodState]:
    """filterOutYoungPods: the pods older than their scale-up delay."""
    return [p for p in pods if now - p.created_t > pod_delay(p, flag_ms)]


def requests_gpu(pod: PodState) -> bool:
    """utils/gpu.PodRequestsGpu: the pod asks a GPU vendor's extended resource."""
    return any(name in pod.requests for name in GPU_VENDOR_RESOURCE_NAMES)


def all_pods_new(pods: list[PodState], now: int) -> bool:
    """allPodsAreNew: the oldest pod is younger than 2 s, or the oldest GPU pod younger than 30 s."""
    if not pods:
        return False
    if min(p.created_t for p in pods) + UNSCHEDULABLE_POD_TIME_BUFFER_MS > now:
        return True
    gpu = [p.created_t for p in pods if requests_gpu(p)]
    return bool(gpu) and min(gpu) + UNSCHEDULABLE_POD_WITH_GPU_TIME_BUFFER_MS > now


def unready_nodes(view: ClusterState, now: int, ready: Callable[[NodeState], bool], startup_ms: int) -> list[str]:
    """The registered nodes the cluster state registry counts as Unready (not NotStarted)."""
    return [n.name for n in view.nodes.values() if not ready(n) and n.created_t + startup_ms <= now]


def cluster_healthy(view: ClusterState, unready: int, ok_count: int, max_percentage: float) -> bool:
    """IsClusterHealthy: not more unready nodes than both the count and the share of registered nodes allow."""
    return not (unready > ok_count and unready > max_percentage / 100.0 * len(view.nodes))
