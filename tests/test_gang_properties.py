"""Properties of gangs over generated scenarios (hypothesis), through the whole simulator: a gang is never
bound in part, waiting members never hold more than a node has, a released gang frees everything it held,
and every run replays exactly."""

from __future__ import annotations

from typing import Any

from builders import GPU_TOLERATION, arrival, group, node_template, pod, scenario_doc, with_1_35_gangs
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dralab.core.log.events import PodBound, PodReserved, PodUnreserved, decode_record
from dralab.core.scenario.load import parse_scenario
from dralab.replay.logs.logfile import LogFile
from dralab.replay.simulation.sim import simulate
from dralab.replay.simulation.verify import verify

SETTINGS = settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@st.composite
def gang_scenarios(draw: st.DrawFn) -> dict[str, Any]:
    gpu = draw(st.sampled_from([2, 4, 8]))
    groups = [group("gpu", max=draw(st.integers(0, 4)), delay=(f"{draw(st.integers(10, 60))}s",
                                                                f"{draw(st.integers(60, 400))}s"),
                    template=node_template(gpu=gpu))]
    objects, workload = [], []
    for g in range(draw(st.integers(1, 3))):
        min_count = draw(st.integers(1, 4))
        objects.append({"apiVersion": "scheduling.k8s.io/v1alpha1", "kind": "Workload", "metadata": {"name": f"w{g}"},
                        "spec": {"podGroups": [{"name": "workers", "policy": {"gang": {"minCount": min_count}}}]}})
        for a in range(draw(st.integers(1, 2))):
            manifest = pod(f"w{g}-a{a}", gpu=draw(st.integers(1, gpu)), tolerations=[GPU_TOLERATION])
            manifest["spec"]["workloadRef"] = {"name": f"w{g}", "podGroup": "workers"}
            workload.append(arrival(f"{draw(st.integers(0, 300))}s", manifest, count=draw(st.integers(1, 3)),
                                    run_for=f"{draw(st.integers(30, 600))}s"))
    for i in range(draw(st.integers(0, 3))):
        workload.append(arrival(f"{draw(st.integers(0, 300))}s", pod(f"solo{i}", gpu=draw(st.integers(1, gpu)),
                                                                     tolerations=[GPU_TOLERATION]),
                                run_for=f"{draw(st.integers(30, 600))}s"))
    initial = draw(st.integers(0, 2))
    groups[0]["max"] = max(groups[0]["max"], initial)
    doc = scenario_doc(groups, nodes={"gpu": initial} if initial else None, workload=workload, duration="40m")
    doc["spec"]["objects"] = objects
    doc["spec"]["scheduler"] = {
        "gangTimeout": f"{draw(st.integers(20, 400))}s",
        "featureGates": {"NominatedNodeNameForExpectation": draw(st.booleans())},
    }
    return with_1_35_gangs(doc)


@SETTINGS
@given(gang_scenarios(), st.integers(0, 2**16))
def test_gangs_are_never_bound_in_part_and_runs_replay(doc: dict[str, Any], seed: int) -> None:
    result = simulate(parse_scenario(doc, "gen.yaml"), seed)
    assert result.violations == [], result.violations  # includes gang-never-partially-bound and no-overcommit
    assert verify(LogFile("x", {}, result.entries)).ok
    state = result.state
    reserved: set[str] = set()
    for offset, payload in result.entries:
        for event in decode_record(payload, offset).events:
            if isinstance(event, PodReserved):
                assert event.pod not in reserved
                reserved.add(event.pod)
            elif isinstance(event, PodUnreserved):
                reserved.remove(event.pod)
            elif isinstance(event, PodBound):
                reserved.discard(event.pod)
    assert reserved == set(state.gang.reservations)
    held = {n: node.reserved for n, node in state.nodes.items()}
    for name, amounts in held.items():
        expected: dict[str, int] = {}
        for r in state.gang.reservations.values():
            if r.node == name:
                for k, v in {**r.requests, "pods": 1}.items():
                    expected[k] = expected.get(k, 0) + v
        assert {k: v for k, v in amounts.items() if v} == expected
