"""`spec.nodeGroups[].daemonSetPods`: the pods every new node of the group runs from the start, as
cluster-autoscaler's template node holds them.

cluster-autoscaler simulates a new node of a group with its TemplateNodeInfo: the node, its ResourceSlices, and
the pods that will run there regardless of the workload, DaemonSet pods above all (simulator/node_info_utils.go
adds the DaemonSet pods that would run on the template node; a cloud provider's template may carry more). With DRA
those pods' claims come with them and hold devices of the template's slices (framework.PodInfo
NeededResourceClaims; kubernetes/autoscaler core/static_autoscaler_dra_test.go, "scale up from 0 nodes in a node
group, with pods on the template nodes consuming DRA resources"): a 3-GPU node whose DaemonSet pods take 2 GPUs
has room for one GPU pod, not three.

dralab has no DaemonSet objects; a group lists the Pods its DaemonSets run on each node instead (real Pod
manifests: requests, tolerations, `spec.resourceClaims`). The autoscaler's simulation places them on each
template node before any pending pod, their claims made in memory from their ResourceClaimTemplates (one per
node, as the resourceclaim controller would) or the named claim they share (simulation/capacity.py). They are
the autoscaler's expectation only: dralab's cloud does not run them on the nodes it creates.
"""

from __future__ import annotations

import copy
from typing import Any

from ..kube.fields import FieldError, expect_list, index, join
from ..kube.manifests import _check_pod
from .dra import check_pod_claims

FIELD = "daemonSetPods"


def check_daemon_set_pods(value: object, path: str) -> tuple[dict[str, Any], ...]:
    """Check `spec.nodeGroups[g].daemonSetPods`; return the checked Pod manifests (defaults filled in)."""
    if value is None:
        return ()
    out: list[dict[str, Any]] = []
    seen: dict[str, str] = {}
    for i, item in enumerate(expect_list(value, path)):
        p_path = index(path, i)
        pod = _check_pod(copy.deepcopy(item), p_path)
        check_pod_claims(pod, p_path)
        spec = pod.get("spec") or {}
        if spec.get("nodeName"):
            raise FieldError(join(join(p_path, "spec"), "nodeName"),
                             "leave it out: each new node of the group runs its own copy of the pod")
        meta = pod["metadata"]
        key = f"{meta.get('namespace') or 'default'}/{meta['name']}"
        if key in seen:
            raise FieldError(join(join(p_path, "metadata"), "name"), f"duplicate pod `{key}` (also {seen[key]})")
        seen[key] = p_path
        out.append(pod)
    return tuple(out)
