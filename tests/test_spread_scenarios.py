"""scenarios/topology-spread.yaml and scenarios/pod-anti-affinity.yaml do what their headers say, under every
autoscaler policy: the scheduler leaves the constrained pods pending with cause spread / affinity while room is
free, the autoscaler's simulation does not believe that room takes them, and the scale-ups are upstream's
(one zone per loop; one node per anti-affine worker in one scale-up). Every run keeps the invariants and
replays exactly."""

from __future__ import annotations

import pytest
from test_provisioning_scenarios import run, scale_ups

from dralab.core.log.events import PodBound, PodUnschedulable, decode_record


def events(result: object, kind: type) -> list[tuple[int, object]]:
    return [(decode_record(p, o).t, e) for o, p in result.entries  # type: ignore[attr-defined]
            for e in decode_record(p, o).events if isinstance(e, kind)]


@pytest.mark.parametrize("policy", ["count", "dra", "atomic"])
def test_topology_spread_binds_one_then_scales_one_zone_per_loop(policy: str) -> None:
    result = run("topology-spread", policy)
    first = [(t, e) for t, e in events(result, PodBound) if e.pod.startswith("pod/default/web") and t == 20_000]
    assert [e.node for _, e in first] == ["zone-a-0"]  # one binds, in the zone with room
    pending = {e.pod for t, e in events(result, PodUnschedulable) if t == 20_000}
    assert len(pending) == 3
    assert {e.cause for _, e in events(result, PodUnschedulable)} == {"spread"}
    ups = scale_ups(result)
    assert [(e.group, e.delta) for _, e in ups] == [("zone-b", 1), ("zone-c", 1)]  # one zone per loop
    assert ups[0][0] < ups[1][0]
    web = [p for k, p in result.state.pods.items() if "/web-" in k]
    assert all(p.node for p in web)
    zones = sorted(result.state.nodes[str(p.node)].labels["topology.kubernetes.io/zone"] for p in web)
    assert len(set(zones)) == 3 and max(zones.count(z) for z in zones) - min(zones.count(z) for z in set(zones)) <= 1


@pytest.mark.parametrize("policy", ["count", "dra", "atomic"])
def test_pod_anti_affinity_asks_for_a_node_per_worker_at_once(policy: str) -> None:
    result = run("pod-anti-affinity", policy)
    assert {e.cause for _, e in events(result, PodUnschedulable)} == {"affinity"}
    ups = scale_ups(result)
    assert [(e.group, e.delta, len(e.pods)) for _, e in ups] == [("gpu-8x", 3, 3)]
    workers = [p for k, p in result.state.pods.items() if "/train-" in k]
    assert len({p.node for p in workers}) == 4 and all(p.node for p in workers)


def test_the_autoscalers_kept_spread_counts_equal_a_recount(monkeypatch: pytest.MonkeyPatch) -> None:
    """sim_pods.SimPlacement keeps PodTopologySpread's counts as pods are placed and template nodes added: at
    every use they equal a recount over the snapshot (a larger topology-spread run, every policy)."""
    from dralab.core.autoscaler.simulation import sim_pods
    from dralab.core.scheduler.plugins import pod_topology_spread as pts

    kept, checked = sim_pods.SimPlacement.spread_counts, [0]

    def checked_counts(self: sim_pods.SimPlacement, pod: object, cs: list[pts.Constraint]) -> object:
        got = kept(self, pod, cs)  # type: ignore[arg-type]
        nodes = [n for n in self.snapshot_nodes() if pts.has_keys(n.labels, cs)]
        assert got == pts.domain_counts(pod, cs, nodes, self)  # type: ignore[arg-type]
        checked[0] += 1
        return got

    monkeypatch.setattr(sim_pods.SimPlacement, "spread_counts", checked_counts)
    import yaml
    from test_provisioning_scenarios import SCENARIOS

    from dralab.core.scenario.load import parse_scenario
    from dralab.replay.simulation.sim import simulate
    d = yaml.safe_load((SCENARIOS / "topology-spread.yaml").read_text())
    for g in d["spec"]["nodeGroups"]:
        g["max"] = 12
    d["spec"]["workload"][2]["count"] = 30
    for policy in ("count", "dra", "atomic"):
        d["spec"]["policy"] = {"autoscaler": policy}
        result = simulate(parse_scenario(d, "x.yaml"), 3)
        assert result.violations == []
    assert checked[0] > 100
