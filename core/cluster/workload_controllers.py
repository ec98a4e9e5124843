"""Workload controllers (kube-controller-manager's ReplicaSet, Job, StatefulSet and ReplicationController
controllers), only as far as the scheduling loop sees them: a pod they own that fails or is evicted is
replaced by a new pending pod.

This is what makes a drain cost nothing but time upstream, and it is why cluster-autoscaler only drains
nodes whose pods are replicated (simulator/drainability/rules/replicated: a controller reference of kind
ReplicationController, Job, ReplicaSet or StatefulSet). dralab has no workload objects, so the pod's
controller reference is the whole controller:

- the replacement is the failed pod's spec under a new name, `<controller name>-xxxxx` (five random
  characters from the decision's seeded source, as generateName does), annotated with the pod it
  replaces (`dralab.io/replaces`), with the same run time: the work starts again from scratch;
- a Job stops replacing pods once more of them failed than `backoffLimit` (default 6; in 1.35 a pod
  failed by a disruption counts unless a podFailurePolicy says otherwise, and dralab models none);
- a StatefulSet's replacement gets a new name too (dralab keys pods by name and keeps the failed one
  for the metrics): the pod's identity is not modelled, its resources and placement are.

DaemonSet pods are never replaced: their node is gone or they were not evicted.
"""

from __future__ import annotations

import copy
import random
from typing import Any

from ..kube.defaults import JOB_BACKOFF_LIMIT
from ..log.events import AnyEvent, PodCreated
from ..state.cluster import FAILED, ClusterState, PodState
from ..state.objects import REPLACES_ANNOTATION, controller_ref

REPLICATED_KINDS = ("ReplicationController", "Job", "ReplicaSet", "StatefulSet")
_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"  # k8s.io/apimachinery/pkg/util/rand, as generateName uses


def replicated(manifest: dict[str, Any]) -> dict[str, Any] | None:
    """The controller reference of a pod some workload controller re-creates, else None."""
    ref = controller_ref(manifest)
    return ref if ref is not None and ref.get("kind") in REPLICATED_KINDS else None


def replacements(view: ClusterState, rng: random.Random) -> list[AnyEvent]:
    """One PodCreated for each failed pod of a workload controller not replaced yet."""
    out: list[AnyEvent] = []
    job_failures: dict[tuple[str, str], int] = {}
    for key in view.pods_by_phase[FAILED]:
        pod = view.pods[key]
        ref = replicated(pod.manifest)
        if ref is None:
            continue
        if ref.get("kind") == "Job":
            owner = (key.split("/")[1], str(ref.get("name")))
            job_failures[owner] = job_failures.get(owner, 0) + 1
            if job_failures[owner] > JOB_BACKOFF_LIMIT:
                continue  # the Job has failed (BackoffLimitExceeded): no more pods
        if not pod.replaced_by:
            manifest = replacement_manifest(pod, str(ref.get("name") or "pod"), rng)
            while PodCreated(pod=manifest).key in view.pods:  # a name taken: generateName draws again
                manifest = replacement_manifest(pod, str(ref.get("name") or "pod"), rng)
            out.append(PodCreated(pod=manifest, run_for_ms=pod.run_for_ms))
    return out


def replacement_manifest(pod: PodState, owner: str, rng: random.Random) -> dict[str, Any]:
    """The failed pod's spec under a generated name, without what the API server and scheduler set."""
    old_meta = pod.manifest.get("metadata") or {}
    meta = {k: copy.deepcopy(v) for k, v in old_meta.items()
            if k not in ("name", "uid", "resourceVersion", "creationTimestamp", "generateName")}
    meta["name"] = f"{owner[:57]}-" + "".join(rng.choice(_ALPHABET) for _ in range(5))
    meta["generateName"] = f"{owner[:57]}-"
    meta["annotations"] = {**(old_meta.get("annotations") or {}), REPLACES_ANNOTATION: old_meta.get("name", "")}
    spec = {k: copy.deepcopy(v) for k, v in (pod.manifest.get("spec") or {}).items() if k != "nodeName"}
    return {"apiVersion": pod.manifest.get("apiVersion", "v1"), "kind": "Pod", "metadata": meta, "spec": spec}
