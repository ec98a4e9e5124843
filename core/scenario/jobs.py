"""`spec.workload[].job`: a batch/v1 Job arriving, checked as the API server checks it, then compiled once into the
Workload and PodGroup its release's Job controller would create (core/kube/jobs.py), so that a Job whose objects the
release cannot take is refused here, naming the Job's field, rather than half-run.

A Job arrival has no `count` (one Job; its pods are `spec.parallelism`) and its pods run for the arrival's
`runFor`. The Job's objects need what any Workload and PodGroup need in that release: GenericWorkload (and in 1.36
GangScheduling, with which dralab schedules a gang), and the scheduling.k8s.io version the controller writes
enabled with runtime-config (v1alpha2 in 1.36, v1alpha3 in 1.37: KEP-5547's examples and the 1.36 code).
"""

from __future__ import annotations

import copy
from typing import Any

from ..kube.fields import FieldError, join
from ..kube.jobs import GATE, WRITTEN_VERSION, check_job, job_objects
from ..kube.kueue import check_scheduling_gates, is_queued
from ..kube.versions import GATES, Profile
from . import gates as gated
from .dra import check_pod_claims

__all__ = ["check_job_arrival"]


def check_job_arrival(value: object, path: str, profile: Profile, seen: dict[tuple[str, str], str]
                      ) -> tuple[dict[str, Any], dict[str, Any]]:
    """The checked Job of the arrival's `job` field at `path`, and its pod template as a pod named after the Job;
    `seen` (namespace, name) -> path refuses a second Job of a name."""
    job = check_job(value, path, profile)
    meta = job["metadata"]
    name_path = join(path, "metadata.name")
    earlier = seen.setdefault((meta["namespace"], meta["name"]), name_path)
    if earlier != name_path:
        raise FieldError(name_path, f"Job `{meta['namespace']}/{meta['name']}` is also {earlier} (Job names are unique "
                                    "in a namespace)")
    t_path = join(path, "spec.template")
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {**(job["spec"]["template"].get("metadata") or {}),
                                                            "name": meta["name"], "namespace": meta["namespace"]},
           "spec": job["spec"]["template"]["spec"]}
    check_pod_claims(pod, t_path)
    gated.check_pod(pod, t_path, profile)
    check_scheduling_gates(pod, t_path)
    if is_queued(pod) or is_queued(job):
        raise FieldError(join(path, "metadata.labels"), "Kueue's Job integration (a suspended Job it admits) is not "
                                                        "modelled; queue pods instead")
    if profile.enabled(GATE) and profile.version in WRITTEN_VERSION:
        _check_objects(job, path, profile)
    return job, copy.deepcopy(pod)


def _check_objects(job: dict[str, Any], path: str, profile: Profile) -> None:
    """Compile the Job's Workload and PodGroup as its controller will; refuse, naming the Job, what the release
    would refuse (GenericWorkload off, the scheduling API version not enabled, a gated group field)."""
    what = "a Job's Workload and PodGroup (WorkloadWithJob is on)"
    if job["spec"]["template"]["spec"].get("schedulingGroup") is None:
        for kind in ("Workload", "PodGroup"):
            profile.check_api(WRITTEN_VERSION[profile.version], kind, path)
        gang = GATES["GangScheduling"].get(profile.version)
        if gang is not None and gang.stage != "removed":
            profile.require("GangScheduling", path, f"{what}: dralab schedules a gang with the GangScheduling plugin")
    try:
        job_objects(job, profile)
    except FieldError as e:
        raise FieldError(path, f"{what} would be refused: {e.path}: {e.message}") from None
