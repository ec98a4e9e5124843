"""PodGroup cycles and nominated pods (core/scheduler/plugins/pod_group.py _with_nominated, cycle.py
hide_nominated): each member's filters count only the nominated pods of its priority or higher, as upstream's
schedule_one_podgroup.go runs every member through schedulePod (RunFilterPluginsWithNominatedPods,
addGENominatedPods)."""

from __future__ import annotations

from typing import Any

from builders import arrival, group, node_template, pod
from test_scheduler_podgroup import events_of, podgroup, run

from dralab.core.log.events import PodBound, PodNominated


def _bound(low_priority: int) -> dict[str, int]:
    """One 4-CPU node: `victim` (2 CPUs, priority -100) and `filler` (1 CPU, 5000) run; at 10 s `low` (2 CPUs)
    preempts `victim` (30 s grace) and is nominated to the node; at 20 s the group `pg` (priority 1000, one 1-CPU
    member) arrives: 1 CPU is free, unless `low`'s nomination counts for it. pod name -> when it bound."""
    cpu_group = [group("cpu", max=1, template=node_template(gpu=0, cpu="4"))]
    arrivals: list[tuple[dict[str, Any], str | None]] = [
        (arrival(0, pod("victim", cpu="2", priority=-100), run_for="1h"), None),
        (arrival(0, pod("filler", cpu="1", priority=5000), run_for="1h"), None),
        (arrival("10s", pod("low", cpu="2", priority=low_priority), run_for="1h"), None),
        (arrival("20s", pod("worker", cpu="1", priority=1000), run_for="1h"), "pg"),
    ]
    result = run(arrivals, [podgroup("pg", 1, priority=1000)], groups=cpu_group, nodes={"cpu": 1}, duration="2m")
    assert [e.pod for _, _, e in events_of(result, PodNominated) if e.node][:1] == ["pod/default/low"]
    return {e.pod.split("/")[2]: t for _, t, e in events_of(result, PodBound)}


def test_a_lower_priority_nominee_does_not_keep_its_room_from_a_group_member() -> None:
    """Before this rule every nominee counted in a group cycle, and the member waited for the victim to go."""
    assert _bound(0)["worker"] == 20_000


def test_a_nominee_of_the_same_priority_keeps_its_room() -> None:
    assert _bound(1000)["worker"] > 20_000
