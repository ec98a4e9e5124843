"""Scale-down (core/autoscaler/disruption/scale_down.py) and failed scale-ups
(core/autoscaler/provisioning/backoff.py): empty nodes deleted after 10 min unneeded with taint then delete,
never below min, not soon after a scale-up;
the re-check before deleting, and the race without it; backoff durations."""

from __future__ import annotations

from typing import Any

from builders import GPU_TOLERATION, arrival, group, node_template, pod, scenario_doc, with_1_35_gangs

from dralab.core.autoscaler.disruption.scale_down import TAINT_KEY
from dralab.core.autoscaler.provisioning.backoff import backoff_until
from dralab.core.log.events import NodeDeleted, NodeTaintsChanged, PodFinished, decode_record
from dralab.core.scenario.load import parse_scenario
from dralab.core.state.groups import NodeGroupState
from dralab.replay.logs.logfile import LogFile
from dralab.replay.simulation.sim import SimResult, simulate
from dralab.replay.simulation.verify import verify


def run(d: dict[str, Any], seed: int = 1) -> SimResult:
    result = simulate(parse_scenario(d, "sd.yaml"), seed)
    assert result.violations == [], result.violations
    assert verify(LogFile("x", {}, result.entries)).ok
    return result


def events_of(result: SimResult, kind: type) -> list[tuple[int, Any]]:
    return [(decode_record(p, o).t, e) for o, p in result.entries for e in decode_record(p, o).events
            if isinstance(e, kind)]


def doc(nodes: int = 2, minimum: int = 0, workload: list[Any] | None = None, duration: str = "30m",
        **scale_down: Any) -> dict[str, Any]:
    d = scenario_doc([group("gpu", min=minimum, max=4, delay="1m", template=node_template(gpu=8))],
                     nodes={"gpu": nodes}, workload=workload, duration=duration,
                     score="most-allocated")  # the node each pod lands on, as these stories were written
    d["spec"]["autoscaler"] = {"scaleDown": scale_down} if scale_down else {}
    return d


def test_empty_nodes_are_tainted_then_deleted_after_ten_minutes_unneeded() -> None:
    result = run(doc(workload=[arrival(0, pod("short", gpu=8, tolerations=[GPU_TOLERATION]), run_for="5m")]))
    tainted = events_of(result, NodeTaintsChanged)
    deleted = events_of(result, NodeDeleted)
    # the idle node: unneeded from 0, tainted at the first scan after 10 min; the other after its pod ends
    assert [(t, e.name) for t, e in tainted] == [(600_000, "gpu-1"), (900_000, "gpu-0")]
    assert all(e.taints[-1]["key"] == TAINT_KEY and e.taints[-1]["effect"] == "NoSchedule" for _, e in tainted)
    assert [(t, e.name) for t, e in deleted] == [(610_000, "gpu-1"), (910_000, "gpu-0")]  # 5 s later, next scan
    assert result.state.nodes == {}


def test_never_below_min_and_can_be_disabled() -> None:
    assert len(events_of(run(doc(minimum=1)), NodeDeleted)) == 1
    assert events_of(run(doc(enabled=False)), NodeDeleted) == []


def test_a_node_in_use_or_busy_recently_is_kept() -> None:
    result = run(doc(nodes=1, workload=[arrival(0, pod("long", gpu=1, tolerations=[GPU_TOLERATION]))]))
    assert events_of(result, NodeDeleted) == []  # 1/8 GPUs used, but a pod is on it: not drained


def test_unneeded_time_and_threshold_are_settings() -> None:
    result = run(doc(nodes=1, unneededTime="2m"))
    assert [t for t, _ in events_of(result, NodeTaintsChanged)] == [120_000]


def test_the_race_without_a_recheck_kills_a_pod_bound_after_the_taint() -> None:
    """Gang member `a` waits at Permit on the idle node gpu-0 (invisible: KEP-5278 off) for `b`, which
    needs a node of group `b`, added at 30 s (the release's autoscaler waits until the oldest pod asking
    nvidia.com/gpu is 30 s old: unschedulablePodWithGpuTimeBuffer) and Ready at 10m45s. The autoscaler judges
    gpu-0 empty once 10 min have passed since that scale-up and taints it (10m30s); the gang binds at 10m45s
    (Permit does not look at taints again); without a re-check the node is deleted 30 s after the
    taint, with `a` on it. With the re-check, the taint is lifted and `a` keeps running."""
    result = run(race_doc(recheck=False))
    killed = [(t, e.pod) for t, e in events_of(result, PodFinished) if e.phase == "Failed"]
    assert killed == [(660_000, "pod/default/a")]
    assert [(t, e.name) for t, e in events_of(result, NodeDeleted)] == [(660_000, "gpu-0")]
    result = run(race_doc(recheck=True))
    assert events_of(result, PodFinished) == [] and events_of(result, NodeDeleted) == []
    assert result.state.pods["pod/default/a"].node == "gpu-0"
    assert [e.taints for _, e in events_of(result, NodeTaintsChanged)][-1] == ()  # taint lifted


def member(name: str, pool: str | None = None) -> dict[str, Any]:
    manifest = pod(name, gpu=4, tolerations=[GPU_TOLERATION], node_selector={"pool": pool} if pool else None)
    manifest["spec"]["workloadRef"] = {"name": "job", "podGroup": "w"}
    return manifest


def race_doc(*, recheck: bool) -> dict[str, Any]:
    groups = [group("gpu", max=1, delay="1m", template=node_template(gpu=8, labels={"pool": "a"})),
              group("b", max=1, delay="615s", template=node_template(gpu=8, labels={"pool": "b"}))]
    d = scenario_doc(groups, nodes={"gpu": 1}, workload=[arrival(0, member("a")), arrival(0, member("b", "b"))],
                     duration="15m")
    d["spec"]["autoscaler"] = {"scaleDown": {"recheckBeforeDelete": recheck, "deleteDelayAfterTaint": "30s"}}
    d["spec"]["objects"] = [{"apiVersion": "scheduling.k8s.io/v1alpha1", "kind": "Workload",
                             "metadata": {"name": "job"},
                             "spec": {"podGroups": [{"name": "w", "policy": {"gang": {"minCount": 2}}}]}}]
    d["spec"]["scheduler"] = {"featureGates": {"NominatedNodeNameForExpectation": False}, "gangTimeout": "15m"}
    return with_1_35_gangs(d)


def test_backoff_doubles_to_thirty_minutes_and_resets_after_three_hours() -> None:
    g = NodeGroupState("g", 0, 1, (0, 0), {}, 0.0, {})
    g.failures = [(0, 1, "timeout")]
    assert backoff_until(g) == 300_000
    g.failures.append((100_000, 1, "timeout"))  # during the backoff: no compounding
    assert backoff_until(g) == 300_000
    g.failures.append((400_000, 1, "timeout"))
    assert backoff_until(g) == 400_000 + 600_000
    for t in (1_100_000, 2_400_000, 4_300_000):
        g.failures.append((t, 1, "timeout"))
    assert backoff_until(g) == 4_300_000 + 1_800_000  # capped at 30 min
    g.failures.append((4_300_000 + 3 * 3_600_000, 1, "quota"))
    assert backoff_until(g) == 4_300_000 + 3 * 3_600_000 + 300_000  # reset after 3 h without failure
