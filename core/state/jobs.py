"""The fold of Jobs: each Job's manifest and the pods it owns, which is all its controller reads.

Apart from cluster.py so that the fold of the other objects does not grow: `JobCreated` records a Job, and a pod
whose controller reference is a known Job is added to that Job's pods (the Job controller's "does the Job have
pods yet", KEP-5547 "Controller Workflow": a Workload and a PodGroup are created only for a Job without pods).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from ..log.events import JobCreated
from .objects import controller_ref


@dataclass
class JobState:
    key: str  # "<namespace>/<name>"
    manifest: dict[str, Any]  # the checked batch/v1 Job (core/kube/jobs.py)
    run_for_ms: int  # how long each of its pods runs (-1: until the run ends)
    created_t: int
    pods: list[str] = field(default_factory=list)  # pod keys it owns, in creation order


class _Fold(Protocol):
    """What of the cluster state this fold touches (indexes.py imports this module: no import back)."""

    jobs: dict[str, JobState]
    anomalies: list[str]


def on_job_created(state: _Fold, offset: int, t: int, event: JobCreated) -> None:
    """Record a Job (the handler of `JobCreated` in cluster.py's table); a second Job of a name is an anomaly."""
    key = event.key
    if key in state.jobs:
        state.anomalies.append(f"offset {offset}: job {key} created twice")
        return
    state.jobs[key] = JobState(key, event.manifest, event.run_for_ms, t)


def job_pod_created(jobs: dict[str, JobState], pod_key: str, manifest: dict[str, Any]) -> None:
    """Count a new pod as its Job's when its controller reference names a Job of this run."""
    if not jobs:
        return
    ref = controller_ref(manifest)
    if ref is None or ref.get("kind") != "Job":
        return
    job = jobs.get(f"{(manifest.get('metadata') or {}).get('namespace') or 'default'}/{ref.get('name')}")
    if job is not None:
        job.pods.append(pod_key)
