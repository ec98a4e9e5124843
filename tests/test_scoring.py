"""The Score plugins (core/scheduler/scoring.py) against upstream's score test tables, restated in
tests/scheduler_cases/scoring/ (see its README.md, whose table this checks), and the scheduler configuration
(core/scheduler/config.py): defaults per release, overrides merged and refused as upstream, the run
configuration recording it, and the default profile's choice in a run.

A case's cluster is built as a log (its nodes' allocatable, labels, taints; its existing pods bound), folded;
the plugin is made from its args after they pass the same check a scenario's pluginConfig gets; PreScore,
Score on every node, NormalizeScore. A plugin dralab skips at PreScore (upstream's Skip, or every node
scoring the same) must have a table whose scores are all equal.
"""

from __future__ import annotations

import random
import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from builders import Log

from dralab.core.kube.fields import FieldError
from dralab.core.kube.versions import make_profile, profile_config
from dralab.core.scheduler.config import (
    ARG_CHECKS,
    SCORE_PLUGINS,
    VERSIONS,
    default_config,
    num_feasible_nodes_to_find,
    parse_config,
)
from dralab.core.scheduler.cycle import Cycle
from dralab.core.scheduler.reactor import Scheduler
from dralab.core.scheduler.scoring import PLUGINS, NonZero

CASES = Path(__file__).parent / "scheduler_cases" / "scoring"
README = CASES / "README.md"


def case_files() -> list[Path]:
    return sorted(CASES.glob("*.yaml"))


def all_cases() -> list[tuple[str, str, dict[str, Any]]]:
    out = []
    for path in case_files():
        doc = yaml.safe_load(path.read_text())
        assert doc["kind"] == "ScoringTest" and doc["metadata"]["name"] == path.stem
        for case in doc["spec"]["cases"]:
            out.append((path.stem, doc["spec"]["plugin"], case))
    return out


def container(i: int, requests: dict[str, str]) -> dict[str, Any]:
    """An extended resource's limit is its request (the API server requires one)."""
    resources = {"requests": dict(requests)} if requests else {}
    if any("/" in r for r in requests):
        resources["limits"] = {r: v for r, v in requests.items() if "/" in r}
    return {"name": f"c{i}", "image": "busybox", **({"resources": resources} if resources else {})}


def pod_manifest(name: str, spec: dict[str, Any]) -> dict[str, Any]:
    # a pod without containers (upstream's st.MakePod()) is one container requesting 0 cpu and memory here
    # (a Pod needs a container in dralab; a request of 0 given is not missing: no NonZeroRequested default)
    given = spec.get("containers") or [{"cpu": "0", "memory": "0"}]
    body: dict[str, Any] = {"containers": [container(i, c) for i, c in enumerate(given)]}
    if spec.get("tolerations"):
        body["tolerations"] = spec["tolerations"]
    if spec.get("preferred"):
        body["affinity"] = {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": spec["preferred"]}}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": body}


def node_manifest(spec: dict[str, Any]) -> dict[str, Any]:
    spec = dict(spec)
    labels, taints = spec.pop("labels", None), spec.pop("taints", None)
    node: dict[str, Any] = {"apiVersion": "v1", "kind": "Node", "metadata": {"labels": labels or {}},
                            "spec": {"taints": taints} if taints else {},
                            "status": {"allocatable": {"pods": "110", **spec}}}
    return node


def scores(plugin_name: str, case: dict[str, Any]) -> dict[str, int] | None:
    """The plugin's normalized scores per node, or None when PreScore skips it."""
    args = ARG_CHECKS[plugin_name](case.get("args") or {}, "args") if plugin_name in ARG_CHECKS else {}
    lg = Log()
    for name, spec in case["nodes"].items():
        lg.node(name, template=node_manifest(spec))
    for i, existing in enumerate(case.get("existing") or []):
        lg.bind(lg.pod(pod_manifest(f"e{i}", existing)), existing["node"])
    key = lg.pod(pod_manifest("incoming", case.get("pod") or {}))
    view = lg.state
    cycle = Cycle(view, random.Random(0))
    nonzero = NonZero()
    nonzero.at(cycle)
    plugin = PLUGINS[plugin_name](args, nonzero)
    pod, nodes = view.pods[key], list(view.nodes.values())
    state = plugin.pre_score(cycle, pod, nodes)
    if state is None:
        return None
    got = {n.name: plugin.score(state, pod, n, n.used) for n in nodes}
    plugin.normalize(state, got)
    return got


@pytest.mark.parametrize(("group", "plugin", "case"), all_cases(), ids=[c["upstream"][:90] for _, _, c in all_cases()])
def test_upstream_score_tables(group: str, plugin: str, case: dict[str, Any]) -> None:
    if "error" in case:
        with pytest.raises(FieldError) as err:
            ARG_CHECKS[plugin](case["args"], "")
        assert err.value.path == case["error"]
        return
    got = scores(plugin, case)
    if case.get("skip"):
        assert got is None
    elif got is None:  # skipped: only right when upstream gives every node the same score
        assert len(set(case["expect"].values())) == 1, f"{plugin} skipped where nodes score differently"
    else:
        assert got == case["expect"]


def test_readme_counts_match_the_cases() -> None:
    """README.md's table: one row per file with its case count, and the total."""
    rows = dict(re.findall(r"^\| `([a-z-]+)\.yaml` \| [^|]+ \| (\d+) \|", README.read_text(), re.M))
    counts: dict[str, int] = {}
    for group, _, _ in all_cases():
        counts[group] = counts.get(group, 0) + 1
    assert {k: int(v) for k, v in rows.items()} == counts
    total = re.search(r"^\| \*\*total\*\* \| \| \*\*(\d+)\*\* \|", README.read_text(), re.M)
    assert total is not None and int(total.group(1)) == sum(counts.values())


# --- the configuration ---------------------------------------------------------------------------------------

def test_default_profile_per_release() -> None:
    for version in VERSIONS:
        config = default_config(version)
        assert config["score"] == {"TaintToleration": 3, "NodeAffinity": 2, "NodeResourcesFit": 1,
                                   "PodTopologySpread": 2, "InterPodAffinity": 2,
                                   "NodeResourcesBalancedAllocation": 1, "ImageLocality": 1}
        assert config["args"]["NodeResourcesFit"]["scoringStrategy"]["type"] == "LeastAllocated"
        assert config["percentageOfNodesToScore"] == 0
    with pytest.raises(ValueError):
        default_config("1.33")


def doc(**profile: Any) -> dict[str, Any]:
    return {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
            "profiles": [profile]}


def test_merge_as_upstream() -> None:
    got = parse_config(doc(plugins={
        "score": {"enabled": [{"name": "NodeResourcesFit", "weight": 5}, {"name": "ImageLocality"}],
                  "disabled": [{"name": "NodeResourcesBalancedAllocation"}]},
        "multiPoint": {"enabled": [{"name": "TaintToleration", "weight": 7}]}}), "c", "1.37")
    # the Score point's own first (weight 0 -> 1), then multiPoint's in their order, re-weighted in place
    assert got["score"] == {"NodeResourcesFit": 5, "ImageLocality": 1, "TaintToleration": 7, "NodeAffinity": 2,
                            "PodTopologySpread": 2, "InterPodAffinity": 2}
    only = parse_config(doc(plugins={"score": {"disabled": [{"name": "*"}],
                                               "enabled": [{"name": "NodeResourcesFit"}]}}), "c", "1.34")
    assert only["score"] == {"NodeResourcesFit": 1}
    assert parse_config({"percentageOfNodesToScore": 30, "profiles": [{"percentageOfNodesToScore": 20}]},
                        "c", "1.36")["percentageOfNodesToScore"] == 20


@pytest.mark.parametrize(("value", "path", "words"), [
    ({"apiVersion": "kubescheduler.config.k8s.io/v1beta3"}, "c.apiVersion", "expected"),
    ({"profiles": [{}, {"schedulerName": "b"}]}, "c.profiles", "more than one profile"),
    (doc(schedulerName="gpu"), "c.profiles[0].schedulerName", "not modelled"),
    (doc(plugins={"filter": {"disabled": [{"name": "TaintToleration"}]}}), "c.profiles[0].plugins.filter",
     "not modelled"),
    (doc(plugins={"multiPoint": {"disabled": [{"name": "NodeAffinity"}]}}), "c.profiles[0].plugins.multiPoint.disabled",
     "its Filter too"),
    (doc(plugins={"score": {"enabled": [{"name": "NodeResourcesFit"}, {"name": "NodeResourcesFit"}]}}),
     "c.profiles[0].plugins.score.enabled[1].name", "twice"),
    (doc(plugins={"score": {"enabled": [{"name": "Coscheduling"}]}}),
     "c.profiles[0].plugins.score.enabled[0].name", "registry"),
    (doc(plugins={"score": {"enabled": [{"name": "NodeResourcesFit", "weight": -1}]}}),
     "c.profiles[0].plugins.score.enabled[0].weight", ""),
    (doc(pluginConfig=[{"name": "DefaultPreemption", "args": {"minCandidateNodesPercentage": 5}}]),
     "c.profiles[0].pluginConfig[0].args", "not modelled"),
    (doc(pluginConfig=[{"name": "NodeResourcesFit", "args": {"ignoredResources": ["x"]}}]),
     "c.profiles[0].pluginConfig[0].args.ignoredResources", "not modelled"),
    (doc(pluginConfig=[{"name": "NodeResourcesFit", "args": {"scoringStrategy": {"type": "Spread"}}}]),
     "c.profiles[0].pluginConfig[0].args.scoringStrategy.type", "invalid"),
    (doc(pluginConfig=[{"name": "NodeResourcesFit", "args": {"scoringStrategy": {
        "type": "RequestedToCapacityRatio", "requestedToCapacityRatio": {"shape": [
            {"utilization": 50, "score": 1}, {"utilization": 40, "score": 2}]}}}}]),
     "c.profiles[0].pluginConfig[0].args.scoringStrategy.requestedToCapacityRatio.shape[1].utilization",
     "increasing"),
    (doc(pluginConfig=[{"name": "NodeResourcesFit", "args": {"scoringStrategy": {
        "type": "RequestedToCapacityRatio", "requestedToCapacityRatio": {"shape": [
            {"utilization": 50, "score": 11}]}}}}]),
     "c.profiles[0].pluginConfig[0].args.scoringStrategy.requestedToCapacityRatio.shape[0].score", ""),
    (doc(pluginConfig=[{"name": "NodeResourcesBalancedAllocation", "args": {"resources": [
        {"name": "cpu", "weight": 2}]}}]),
     "c.profiles[0].pluginConfig[0].args.resources[0].weight", "should be 1"),
    (doc(pluginConfig=[{"name": "NodeAffinity", "args": {"addedAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": []}}}}]),
     "c.profiles[0].pluginConfig[0].args.addedAffinity.requiredDuringSchedulingIgnoredDuringExecution",
     "not modelled"),
    ({"extenders": [{"urlPrefix": "http://x"}]}, "c.extenders", "not modelled"),
    ({"podMaxBackoffSeconds": 30}, "c.podMaxBackoffSeconds", "not modelled"),
    ({"percentageOfNodesToScore": 101}, "c.percentageOfNodesToScore", ""),
])
def test_refused_with_the_field_named(value: dict[str, Any], path: str, words: str) -> None:
    with pytest.raises(FieldError) as err:
        parse_config(value, "c", "1.37")
    assert err.value.path == path
    assert words in err.value.message


def test_registry_names_only_score_plugins() -> None:
    assert set(PLUGINS) <= SCORE_PLUGINS
    # this branch's; the lead adds PodTopologySpread's and InterPodAffinity's (helper "spread")
    assert set(ARG_CHECKS) >= {"NodeResourcesFit", "NodeResourcesBalancedAllocation", "NodeAffinity"}
    for name, check in ARG_CHECKS.items():  # a recorded configuration is checked again: what a check keeps passes
        kept = check({}, "args")
        assert check(kept if isinstance(kept, dict) else {}, "args") == kept, name


def test_num_feasible_nodes_to_find() -> None:
    assert num_feasible_nodes_to_find(0, 99) == 99
    assert num_feasible_nodes_to_find(0, 1000) == 420  # 50 - 1000/125 = 42%
    assert num_feasible_nodes_to_find(10, 500) == 100  # at least 100
    assert num_feasible_nodes_to_find(100, 5000) == 5000


# --- in a run ---------------------------------------------------------------------------------------------

def _two_nodes_one_busy(config: dict[str, Any] | None, score: str = "most-allocated") -> str:
    """Where a 1-cpu pod goes when one of two equal nodes already runs a 2-cpu pod."""
    lg = Log()
    for name in ("a", "b"):
        lg.node(name, template=node_manifest({"cpu": "4", "memory": "8Gi"}))
    lg.bind(lg.pod(pod_manifest("busy", {"containers": [{"cpu": "2", "memory": "1Gi"}]})), "a")
    lg.pod(pod_manifest("new", {"containers": [{"cpu": "1", "memory": "1Gi"}]}))
    sched = Scheduler(kubernetes=profile_config(make_profile("1.37")), config=config,
                      **({"score": score} if config is None else {}))
    events = sched.react(lg.state, 1_000, random.Random(1)).events
    return str(events[0].node)  # type: ignore[attr-defined]


def test_default_profile_spreads_where_most_allocated_packs() -> None:
    assert _two_nodes_one_busy(default_config("1.37")) == "b"
    assert _two_nodes_one_busy(None) == "a"
    most = parse_config(doc(pluginConfig=[{"name": "NodeResourcesFit", "args": {
        "scoringStrategy": {"type": "MostAllocated"}}}]), "c", "1.37")
    assert _two_nodes_one_busy(most) == "a"


def test_fragmentation_refuses_a_configuration() -> None:
    with pytest.raises(ValueError, match="fragmentation"):
        Scheduler(score="fragmentation", config=default_config("1.37"))


def test_a_recorded_configuration_is_checked_again() -> None:
    """A replay's --with edits the recorded configuration: the scheduler refuses what the loader would."""
    bad = default_config("1.37")
    bad["args"]["NodeResourcesFit"]["scoringStrategy"]["type"] = "Spread"
    with pytest.raises(ValueError, match="scoringStrategy.type"):
        Scheduler(kubernetes=profile_config(make_profile("1.37")), config=bad)
    with pytest.raises(ValueError, match="config.score.NodeName"):
        Scheduler(config={"score": {"NodeName": 1}, "args": {}})


def _scenario(scheduler: dict[str, Any] | None, kubernetes: dict[str, Any] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"duration": "1m", "nodeGroups": [{"name": "g", "min": 0, "max": 1, "template": {
        "apiVersion": "v1", "kind": "Node", "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"}}}}]}
    if scheduler is not None:
        spec["scheduler"] = scheduler
    if kubernetes is not None:
        spec["kubernetes"] = kubernetes
    return {"apiVersion": "dralab.io/v1alpha1", "kind": "Scenario", "metadata": {"name": "t"}, "spec": spec}


def test_the_run_configuration_records_the_effective_configuration() -> None:
    from dralab.core.kube.errors import ScenarioError
    from dralab.core.kube.versions import LEGACY_PROFILE
    from dralab.core.run.config import build_reactors, run_config
    from dralab.core.scenario.load import parse_scenario

    entry = run_config(parse_scenario(_scenario(None, {"version": "1.34"})))["scheduler"]
    assert "score" not in entry and entry["config"] == default_config("1.34")
    # legacy, and an explicit score policy: exactly what was recorded before configurations existed
    legacy = run_config(parse_scenario(_scenario(None), profile=LEGACY_PROFILE))["scheduler"]
    assert legacy == {"score": "most-allocated", "gang_timeout_ms": 300_000, "feature_gates": {}}
    policy = run_config(parse_scenario(_scenario({"score": "least-allocated"})))["scheduler"]
    assert policy["score"] == "least-allocated" and "config" not in policy
    # an override: merged, recorded, rebuilt by a replay
    given = {"profiles": [{"pluginConfig": [{"name": "NodeResourcesFit", "args": {
        "scoringStrategy": {"type": "MostAllocated"}}}]}]}
    config = run_config(parse_scenario(_scenario({"config": given})))
    assert config["scheduler"]["config"]["args"]["NodeResourcesFit"]["scoringStrategy"]["type"] == "MostAllocated"
    scheduler = next(r for r in build_reactors(config) if isinstance(r, Scheduler))
    assert scheduler.config == config["scheduler"]["config"]
    # a bad one names the file and the field; score and config together are refused at load
    bad = {"profiles": [{"plugins": {"filter": {"disabled": [{"name": "NodeAffinity"}]}}}]}
    with pytest.raises(ScenarioError, match=r"x\.yaml: spec\.scheduler\.config\.profiles\[0\]\.plugins\.filter"):
        run_config(parse_scenario(_scenario({"config": bad}), "x.yaml"))
    with pytest.raises(ScenarioError, match="spec.scheduler.score"):
        parse_scenario(_scenario({"config": given, "score": "most-allocated"}))


def test_the_scheduler_config_scenario_tells_its_story() -> None:
    """scenarios/scheduler-config.yaml: MostAllocated packs the two on-demand nodes full (4 pods of 2 GPUs
    each) before any pod goes to a spot node (PreferNoSchedule, zone a), where the rest pack onto one node."""
    from collections import Counter

    from dralab.core.run.config import run_config
    from dralab.core.scenario.load import load_scenario
    from dralab.replay.simulation.sim import Simulator

    path = Path(__file__).resolve().parents[1] / "scenarios" / "scheduler-config.yaml"
    scenario = load_scenario(str(path))
    config = run_config(scenario)["scheduler"]["config"]
    assert config["args"]["NodeResourcesFit"]["scoringStrategy"]["type"] == "MostAllocated"
    state = Simulator(scenario, 5).run().state
    per_node = Counter(p.node for p in state.pods.values() if p.node is not None)
    assert per_node["on-demand-0"] == per_node["on-demand-1"] == 4
    assert sorted(n for n in per_node if n.startswith("spot")) == ["spot-1"] and per_node["spot-1"] == 4


def test_a_bad_configuration_is_bad_input_for_the_cli(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """exit 2 naming the file and the field (cli/inputs.py checks it right after loading)."""
    from dralab.cli import main

    path = Path(__file__).resolve().parents[1] / "scenarios" / "scheduler-config.yaml"
    bad = tmp_path / "bad.yaml"
    bad.write_text(path.read_text().replace("type: MostAllocated", "type: Spread"))
    assert main(["sim", str(bad)]) == 2
    assert "bad.yaml: spec.scheduler.config.profiles[0].pluginConfig[0].args.scoringStrategy.type" in \
        capsys.readouterr().err


def test_nonzero_follows_the_decisions_bindings_and_rollbacks() -> None:
    """NonZeroRequested on a node counts the pods the decision bound there (100m / 200Mi each for a container
    without requests), and forgets those a savepoint's rollback took away (a PodGroup's trial)."""
    from dralab.core.scheduler.plugins.dynamic_resources import PodClaims

    lg = Log()
    lg.node("n", template=node_manifest({"cpu": "4", "memory": "8Gi"}))
    keys = [lg.pod(pod_manifest(f"p{i}", {"containers": [{}]})) for i in range(3)]
    view = lg.state
    cycle = Cycle(view, random.Random(0))
    nonzero = NonZero()
    node = view.nodes["n"]
    mi = 200 * 1024 * 1024
    cycle.bind(view.pods[keys[0]], "n", PodClaims(), {})
    nonzero.at(cycle)
    assert nonzero.of(node) == (100, mi)
    sp = cycle.savepoint()
    cycle.bind(view.pods[keys[1]], "n", PodClaims(), {})
    nonzero.at(cycle)
    assert nonzero.of(node) == (200, 2 * mi)
    cycle.rollback(sp)
    cycle.bind(view.pods[keys[2]], "n", PodClaims(), {})
    cycle.bind(view.pods[keys[1]], "n", PodClaims(), {})
    nonzero.at(cycle)
    assert nonzero.of(node) == (300, 3 * mi)
    sp = cycle.savepoint()
    cycle.rollback(sp)
    cycle2 = Cycle(view, random.Random(0))
    nonzero.at(cycle2)
    assert nonzero.of(node) == (0, 0)
