"""Each PodGroup scenario in scenarios/ tells the story its header says, checked here on the log (and the log
verifies): workload-aware preemption with nominated nodes, the wrong-shape topology story per autoscaler
policy, and the minCount story per policy."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec
import pytest
import yaml
from builders import simulated_scenario

from dralab.core.log.events import PodBound, PodEvicted, PodNominated, PodTerminating, ScaleUpRequested, decode_record
from dralab.core.scenario.load import Policy, load_scenario, parse_scenario

SCENARIOS = Path(__file__).resolve().parents[1] / "scenarios"


def run(scenario: Any, seed: int = 3):  # type: ignore[no-untyped-def]
    return simulated_scenario(scenario, seed)


def events(result, kind):  # type: ignore[no-untyped-def]
    return [(decode_record(p, o).t, e) for o, p in result.entries for e in decode_record(p, o).events
            if isinstance(e, kind)]


def test_preemption_evicts_the_batch_gang_whole_and_keeps_the_room_for_the_trainers() -> None:
    result = run(load_scenario(str(SCENARIOS / "podgroup-preemption.yaml")))
    evicted = events(result, PodTerminating)  # deleted gracefully (30 s), then gone (PodEvicted)
    assert len(evicted) == 4 and {t for t, _ in evicted} == {300_000}  # once, all four: disruptionMode all
    assert {t for t, _ in events(result, PodEvicted)} == {330_000}
    nominated = events(result, PodNominated)
    assert len(nominated) == 2 and len({e.node for _, e in nominated}) == 1
    trainers = [(t, e) for t, e in events(result, PodBound) if "train" in e.pod]
    assert [t for t, _ in trainers] == [330_000, 330_000]
    assert {e.node for _, e in trainers} == {nominated[0][1].node}  # where they were nominated
    # the batch Job's replacements never took the trainers' room (nominatedNodeName), and wait: 4 of minCount 4
    # do not fit on the one free node
    batch = result.state.gang.podgroups["default/batch"]
    assert batch.conditions["DisruptionTarget"].reason == "PreemptionByScheduler"
    pending = [p for p in result.state.pending_pods() if "batch" in p.key]
    assert len(pending) == 4


def test_with_disruption_mode_single_only_the_needed_victims_go() -> None:
    doc = yaml.safe_load((SCENARIOS / "podgroup-preemption.yaml").read_text())
    doc["spec"]["objects"][2]["spec"]["disruptionMode"] = {"single": {}}
    result = run(parse_scenario(doc, "single.yaml"))
    assert len(events(result, PodEvicted)) == 2
    assert len([p for p in result.state.pods.values() if "batch" in p.key and p.node and p.phase == "Running"]) == 2


@pytest.mark.parametrize(("policy", "scale_ups", "bound"), [("count", 0, 0), ("dra", 0, 0), ("atomic", 1, 6)])
def test_nvlink_domain_story_per_policy(policy: str, scale_ups: int, bound: int) -> None:
    base = load_scenario(str(SCENARIOS / "podgroup-nvlink-domain.yaml"))
    result = run(msgspec.structs.replace(base, policy=Policy(autoscaler=policy)))  # type: ignore[arg-type]
    assert len(events(result, ScaleUpRequested)) == scale_ups
    bound_pods = events(result, PodBound)
    assert len(bound_pods) == bound
    if bound:
        labels = {result.state.nodes[e.node].manifest["metadata"]["labels"]["nvidia.com/gpu.clique"]
                  for _, e in bound_pods}
        assert len(labels) == 1 and len({t for t, _ in bound_pods}) == 1  # one clique, one record


@pytest.mark.parametrize(("policy", "scale_ups"), [("count", 1), ("dra", 1), ("atomic", 0)])
def test_min_count_story_per_policy(policy: str, scale_ups: int) -> None:
    base = load_scenario(str(SCENARIOS / "podgroup-min-count.yaml"))
    result = run(msgspec.structs.replace(base, policy=Policy(autoscaler=policy)))  # type: ignore[arg-type]
    assert len(events(result, ScaleUpRequested)) == scale_ups
    assert events(result, PodBound) == []  # never six at once: the gang needs a bigger quota, not a node


def test_composite_tree_binds_whole_or_not_at_all() -> None:
    result = run(load_scenario(str(SCENARIOS / "podgroup-composite.yaml")))
    bound = events(result, PodBound)
    assert len(bound) == 9 and {t for t, _ in bound} == {90_000}  # the whole tree, in one record, once nodes came
    assert [e.delta for _, e in events(result, ScaleUpRequested)] == [3]
    root = result.state.gang.composites["default/serve"].conditions["CompositePodGroupInitiallyScheduled"]
    assert root.status == "True" and root.t == 90_000  # False at 0s (one replica of minGroupCount 2 fit), True since


def test_a_shared_group_claim_is_made_once_pins_the_group_and_is_freed_with_it() -> None:
    from dralab.core.log.events import ClaimAllocated, ClaimReleased, ResourceClaimCreated

    result = run(load_scenario(str(SCENARIOS / "podgroup-shared-claim.yaml")))
    group_claims = [e for _, e in events(result, ResourceClaimCreated) if e.pod.startswith("podgroup/")]
    assert len(group_claims) == 1 and group_claims[0].pod == "podgroup/default/allreduce"
    name = group_claims[0].manifest["metadata"]["name"]
    nic = [e for _, e in events(result, ClaimAllocated) if e.claim.endswith(name)]
    assert len(nic) == 1 and nic[0].pod == "podgroup/default/allreduce"
    bound = events(result, PodBound)
    assert len(bound) == 4 and len({e.node for _, e in bound}) == 1  # all where the NIC is
    released = [(t, e) for t, e in events(result, ClaimReleased) if e.pod == "podgroup/default/allreduce"]
    assert len(released) == 1 and released[0][1].deallocate and released[0][0] >= 600_000


def test_five_workers_never_fit_next_to_one_nic_and_dra_adds_no_node() -> None:
    """The group's claim pins every worker to the node of one NIC: the autoscaler's DRA snapshot allocates it once
    (as cluster-autoscaler's does: core/autoscaler/simulation/shared_claims.py), so no node, new or old, can take
    the fifth worker's two GPUs next to it, and nothing is bought (dralab's model before issue 22 bought one)."""
    doc = yaml.safe_load((SCENARIOS / "podgroup-shared-claim.yaml").read_text())
    doc["spec"]["workload"][0]["count"] = 5
    doc["spec"]["objects"][4]["spec"]["schedulingPolicy"] = {"gang": {"minCount": 5}}
    result = run(parse_scenario(doc, "five.yaml"))
    assert events(result, PodBound) == []
    assert events(result, ScaleUpRequested) == []


@pytest.mark.parametrize(("policy", "free"), [("dra", 16.0), ("atomic", 3.2)])
def test_the_metrics_count_the_gpus_free_while_a_group_waits_rejected(policy: str, free: float) -> None:
    """gpu_hours_idle says 0 while the group waits in the wrong-shape story (each pod alone could use the free
    GPUs); the GPUs free while the group waits rejected are the story's cost: all 16 paid GPU-hours under `dra`,
    under `atomic` only the 32 free GPUs of the six minutes until the new trays are Ready."""
    from dralab.core.analysis.metrics import metrics_from_entries

    base = load_scenario(str(SCENARIOS / "podgroup-nvlink-domain.yaml"))
    result = run(msgspec.structs.replace(base, policy=Policy(autoscaler=policy)))  # type: ignore[arg-type]
    metrics = metrics_from_entries(result.entries, base.duration_ms)
    if policy == "dra":
        assert metrics.gpu_hours_idle == 0.0
    assert metrics.gpu_hours_free_while_groups_wait == pytest.approx(free, abs=0.1)
