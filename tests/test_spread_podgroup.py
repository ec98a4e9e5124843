"""PodTopologySpread and InterPodAffinity hold in a PodGroup's cycle too (schedule_one with the group's
placement, reactor `_place`): members placed earlier in the group's cycle count for the next one."""

from __future__ import annotations

from builders import arrival, group, node_template
from test_scheduler_podgroup import events_of, member, podgroup, pods_named, run

from dralab.core.log.events import PodBound

ANTI = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
    {"topologyKey": "kubernetes.io/hostname", "labelSelector": {"matchLabels": {"app": "train"}}}]}}


def worker() -> dict[str, object]:
    manifest = member(gpu=1)
    manifest["metadata"]["labels"] = {"app": "train"}
    manifest["spec"]["affinity"] = ANTI
    return manifest


def test_a_gang_of_anti_affine_workers_spreads_over_nodes() -> None:
    result = run([(arrival(0, worker(), count=2, run_for="5m"), "train")], [podgroup(min_count=2)],
                 duration="30s")
    bound = [e for _, _, e in events_of(result, PodBound)]
    assert len(bound) == 2 and len({e.node for e in bound}) == 2  # one per node, although one node has room


def test_a_gang_that_needs_more_nodes_than_its_anti_affinity_allows_binds_nothing() -> None:
    result = run([(arrival(0, worker(), count=3), "train")], [podgroup(min_count=3)], duration="30s",
                 groups=[group("gpu", max=2, delay="1m", template=node_template(gpu=8))])
    assert events_of(result, PodBound) == []
    for p in pods_named(result, "worker"):
        assert p.condition is not None and p.condition.reason == "Unschedulable"
