"""The event of a batch/v1 Job arriving (the tagged union and the codec are in :mod:`.events`)."""

from __future__ import annotations

from typing import Any

from .event_base import Event, _meta


def job_key(namespace: str, name: str) -> str:
    return f"job/{namespace}/{name}"


class JobCreated(Event, tag="JobCreated", frozen=True):
    """A Job exists (a scenario's `spec.workload[].job`, checked by core/kube/jobs.py): the Job controller
    (core/controllers/jobs.py) creates its Workload and PodGroup (gate WorkloadWithJob) and its pods. The pods
    run for `run_for_ms` (-1: until the run ends), as an arrival's `runFor` says."""

    manifest: dict[str, Any]
    run_for_ms: int = -1

    @property
    def key(self) -> str:
        return "/".join(_meta(self.manifest))

    def touched(self) -> tuple[str, ...]:
        return (job_key(*_meta(self.manifest)),)
