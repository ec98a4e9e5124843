"""The Job controller (kube-controller-manager, pkg/controller/job) as a reactor: it creates a Job's pods, and
with the gate WorkloadWithJob its Workload and PodGroup first (KEP-5547, 1.36; KEP-6089, 1.37).

For a Job without pods (the fold's `view.jobs`, core/state/jobs.py), one decision creates, in KEP-5547's order
("Object Creation Order"), the Workload, then the PodGroup, then `parallelism` pods naming the group in
`spec.schedulingGroup.podGroupName`. Which Jobs get the two objects and how they are named is core/kube/jobs.py's
(the loader compiled the same objects when it loaded the scenario, so nothing here can be refused).

Pods are named as generateName names them, `<job>-<index>-xxxxx` for an Indexed Job, `<job>-xxxxx` otherwise,
the five characters drawn from the decision's seeded source. Failed or evicted pods are replaced by the workload
controllers' part of the claims reactor (core/cluster/workload_controllers.py), as for any Job-owned pod.

Not modelled: discovering a Workload or PodGroup someone else made for the Job (dralab's scenario objects cannot
name a Job's controllerRef, see core/scenario/jobs.py), updates of a running Job, completions beyond parallelism.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

from ..engine.contract import Decision, Trigger
from ..kube.jobs import SAFE_ALPHABET, job_objects, job_pod, pod_prefix
from ..kube.versions import profile_from_config
from ..log.events import AnyEvent, PodCreated, PodGroupCreated, WorkloadCreated
from ..state.cluster import ClusterState

__all__ = ["JobController"]


def random_suffix(rng: random.Random) -> str:
    """generateName's five random characters (apimachinery's rand.String), from the decision's seeded source."""
    return "".join(rng.choice(SAFE_ALPHABET) for _ in range(5))


@dataclass
class JobController:
    name: str = "jobs"
    trigger: Trigger = "events"
    # the release with the run's feature gates merged (core/run/config.py), as recorded in the run config
    kubernetes: dict[str, Any] | None = field(default=None)

    def __post_init__(self) -> None:
        self._profile = profile_from_config(self.kubernetes)

    def react(self, view: ClusterState, now: int, rng: random.Random) -> Decision:
        events: list[AnyEvent] = []
        taken: set[str] = set()  # pod keys this decision gives, besides those in the view
        for job in view.jobs.values():
            if job.pods:
                continue
            objects = job_objects(job.manifest, self._profile)
            group = None
            if objects is not None:
                workload, group = objects
                events.append(WorkloadCreated(manifest=workload))
                events.append(PodGroupCreated(manifest=group))
            spec = job.manifest["spec"]
            indexed = spec["completionMode"] == "Indexed"
            for i in range(spec["parallelism"]):
                index = i if indexed else None
                prefix = pod_prefix(job.manifest, index)
                name = prefix + random_suffix(rng)
                namespace = job.manifest["metadata"]["namespace"]
                while f"pod/{namespace}/{name}" in view.pods or f"pod/{namespace}/{name}" in taken:
                    name = prefix + random_suffix(rng)  # a name taken: generateName draws again
                taken.add(f"pod/{namespace}/{name}")
                pod = job_pod(job.manifest, index, name, group, self._profile.version)
                events.append(PodCreated(pod=pod, run_for_ms=job.run_for_ms))
        return Decision(tuple(events))
