"""cluster-autoscaler's own DRA tests restated as dralab cases (tests/autoscaler_cases/dra/, format and counts in
tests/autoscaler_cases/README.md), played against dralab's real parts under the case's release profile:

- `scaleup-*`, `noscaleup-*`: the manifests are a cluster dump and `spec.nodeGroups` the groups of `dralab whatif`;
  the `dra` policy's answer must add upstream's nodes per group, and the pending pods must then run (or not) as
  upstream's test says;
- `scaledown-*`: the dump's nodes belong to the groups `spec.nodesOf` names (upstream's test builds its nodes from
  the groups); the autoscaler's scale-down (unneeded time 1 min, utilization threshold 0.7, as upstream's test sets
  them) runs loop after loop for 5 minutes and must remove exactly upstream's nodes;
- `readiness-*`: node groups, their nodes (Ready or not) and the ResourceSlices each node published; the autoscaler's
  readiness of each node (simulation/readiness.py, upstream's dra_processor) must be upstream's.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import msgspec
import pytest
import yaml

from dralab.core.analysis.dump import dump_record
from dralab.core.analysis.whatif import _groups_record, parse_node_groups, whatif
from dralab.core.autoscaler.reactor import Autoscaler
from dralab.core.autoscaler.simulation.nodes import node_ready_for
from dralab.core.cluster.nodes import node_from_template
from dralab.core.dra.api import parse_documents
from dralab.core.engine.contract import decide
from dralab.core.kube.versions import make_profile, profile_config
from dralab.core.log.events import NodeCreated, NodeReady, Record, ResourceSlicePublished
from dralab.core.state.cluster import ClusterState

CASES = Path(__file__).resolve().parent / "autoscaler_cases" / "dra"
README = CASES.parent / "README.md"
KIND = "AutoscalerTest"
GROUPS = ("scaleup", "noscaleup", "scaledown", "readiness")


def files() -> list[Path]:
    return sorted(CASES.glob("*.yaml"))


def load(path: Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    docs = [d for d in yaml.safe_load_all(path.read_text()) if d is not None]
    tests = [d for d in docs if d.get("kind") == KIND]
    assert len(tests) == 1, f"{path.name}: expected one {KIND} document"
    return tests[0], [d for d in docs if d is not tests[0]]


class _Log:
    def __init__(self) -> None:
        self.state = ClusterState()

    def append(self, record: Record) -> None:
        self.state.apply(self.state.offset + 1, record)


def _scale_up(spec: dict[str, Any], manifests: list[dict[str, Any]], name: str, profile: Any) -> list[str]:
    inv = parse_documents(manifests, name, profile=profile)
    groups = parse_node_groups({"nodeGroups": spec["nodeGroups"]}, profile)
    report = whatif(inv, groups, policies=[spec["policy"]], kubernetes=profile_config(profile))
    [result] = report["policies"]
    expect, problems = spec["expect"], []
    if result["nodes_added"] != expect["nodesAdded"]:
        problems.append(f"nodes added {result['nodes_added']}, upstream {expect['nodesAdded']}")
    bound, still = len(result["pods"]["bound"]), result["pods"]["still_pending"]
    if (bound, len(still)) != (expect["bound"], expect["stillPending"]):
        problems.append(f"bound {bound} / pending {len(still)}, upstream {expect['bound']} / {expect['stillPending']}: "
                        f"{still[:2]}")
    return problems


def _scale_down(spec: dict[str, Any], manifests: list[dict[str, Any]], name: str, profile: Any) -> list[str]:
    inv = parse_documents(manifests, name, profile=profile)
    groups = parse_node_groups({"nodeGroups": spec["nodeGroups"]}, profile)
    member = {n: g for g, nodes in spec["nodesOf"].items() for n in nodes}
    log = _Log()
    log.append(_groups_record(groups))
    dump = dump_record(inv).record
    log.append(msgspec.structs.replace(dump, events=tuple(
        msgspec.structs.replace(e, group=member.get(e.name, "")) if isinstance(e, NodeCreated) else e
        for e in dump.events)))
    autoscaler = Autoscaler(policy=spec["policy"], kubernetes=profile_config(profile),
                            scale_down={"utilization_threshold": 0.7, "unneeded_time_ms": 60_000})
    for now in range(10_000, 300_001, 10_000):
        record, _ = decide(autoscaler, log.state, now, 0)
        if record is not None:
            log.append(record)
    all_nodes = [n for nodes in spec["nodesOf"].values() for n in nodes]
    removed = [n for n in all_nodes if n not in log.state.nodes]
    expect = spec["expect"]
    if removed != expect["removed"]:
        return [f"removed {removed}, upstream {expect['removed']}"]
    return []


def _readiness(spec: dict[str, Any], manifests: list[dict[str, Any]], profile: Any) -> list[str]:
    groups = parse_node_groups({"nodeGroups": spec["nodeGroups"]}, profile)
    log = _Log()
    log.append(_groups_record(groups))
    events: list[Any] = []
    for n in spec["nodes"]:
        node = node_from_template(log.state.node_groups[n["group"]], n["name"])
        events.append(NodeCreated(name=n["name"], group=n["group"], node=node, ready_at=0))
        if n["ready"]:
            events.append(NodeReady(name=n["name"]))
    events += [ResourceSlicePublished(manifest=m) for m in manifests]
    log.append(Record(id="case/nodes", source="case", view=-1, t=0, events=tuple(events)))
    got = {n: node_ready_for(log.state, "dra", log.state.nodes[n], release=True) for n in spec["expect"]["ready"]}
    return [f"{n}: ready {got[n]}, upstream {want}" for n, want in spec["expect"]["ready"].items() if got[n] != want]


@pytest.mark.parametrize("path", files(), ids=lambda p: p.stem)
def test_case(path: Path) -> None:
    test, manifests = load(path)
    spec = test["spec"]
    assert test["metadata"]["name"] == path.stem and spec["group"] in GROUPS
    assert path.stem.startswith(spec["group"] + "-")
    if spec.get("skip"):
        pytest.skip(spec["skip"])
    profile = make_profile(spec["kubernetes"]["version"])
    if spec["group"] == "readiness":
        problems = _readiness(spec, manifests, profile)
    elif spec["group"] == "scaledown":
        problems = _scale_down(spec, manifests, path.name, profile)
    else:
        problems = _scale_up(spec, manifests, path.name, profile)
    assert not problems, f"{path.name}:\n  " + "\n  ".join(problems)


def test_counts_match_readme() -> None:
    """README's table: per upstream test function, the cases restated, played, skipped."""
    specs = [load(p)[0]["spec"] for p in files()]
    rows = [[c.strip() for c in line.strip().strip("|").split("|")] for line in README.read_text().splitlines()]
    for function in ("TestStaticAutoscalerDynamicResources", "TestFilterOutNodesWithUnreadyDRAResources",
                     "TestAreResourcePoolsReady"):
        mine = [s for s in specs if s["upstream"].startswith(function + ":")]
        counts = (len(mine), sum(1 for s in mine if not s.get("skip")), sum(1 for s in mine if s.get("skip")))
        table = [tuple(int(c) for c in r[2:5]) for r in rows if len(r) >= 5 and r[0] == f"`{function}`"
                 and all(re.fullmatch(r"\d+", c) for c in r[2:5])]
        assert table == [counts], f"README row for {function}: {table}, files: {counts}"


def test_daemon_set_pods_take_the_template_nodes_devices() -> None:
    """The same case without the group's daemonSetPods: each new 3-GPU node takes all three pods (1 node); with
    them, 2 GPUs of each new node are the DaemonSet pods' and the pods need 3 nodes (upstream's count)."""
    test, manifests = load(CASES / "scaleup-from-0-nodes-template-pods-consuming-dra.yaml")
    spec = test["spec"]
    profile = make_profile("1.37")
    bare = {**spec, "nodeGroups": [{k: v for k, v in g.items() if k != "daemonSetPods"} for g in spec["nodeGroups"]],
            "expect": {**spec["expect"], "nodesAdded": {"node3gpua1slice": 1}}}
    assert _scale_up(bare, manifests, "bare", profile) == []
    assert _scale_up(spec, manifests, "with", profile) == []


def test_legacy_profile_keeps_the_four_disagreements() -> None:
    """Legacy logs must not change: without a release profile a template entry is still looked up first (the pods
    wait for objects: no scale-up) and a shared unallocated claim is allocated per pod (10 nodes, not 1)."""
    for name, added in (("scaleup-one-pod-per-node-one-device-per-node", {}),
                        ("scaleup-shared-unallocated-claim", {"node1gpub1slice": 10})):
        test, manifests = load(CASES / f"{name}.yaml")
        spec = test["spec"]
        inv = parse_documents(manifests, name)
        report = whatif(inv, parse_node_groups({"nodeGroups": spec["nodeGroups"]}), policies=["dra"])
        assert report["policies"][0]["nodes_added"] == added, name


def test_daemon_set_pods_are_checked_with_their_path() -> None:
    from dralab.core.kube.fields import FieldError
    test, _ = load(CASES / "scaleup-from-0-nodes-template-pods-consuming-dra.yaml")
    group = test["spec"]["nodeGroups"][0]
    pod = group["daemonSetPods"][0]
    bad = {**group, "daemonSetPods": [{**pod, "spec": {**pod["spec"], "nodeName": "x"}}]}
    with pytest.raises(FieldError) as e:
        parse_node_groups({"nodeGroups": [bad]})
    assert e.value.path == "nodeGroups[0].daemonSetPods[0].spec.nodeName"
    bad = {**group, "daemonSetPods": [{**pod, "spec": {**pod["spec"], "containers": "no"}}]}
    with pytest.raises(FieldError) as e:
        parse_node_groups({"nodeGroups": [bad]})
    assert e.value.path.startswith("nodeGroups[0].daemonSetPods[0].spec.containers")


def test_daemon_set_pods_reach_a_run_through_its_configuration() -> None:
    """A scenario's nodeGroups[].daemonSetPods are recorded in the run's configuration (so a replay rebuilds the same
    autoscaler) and the run's autoscaler counts them: 3 one-GPU pods need 3 new 3-GPU nodes whose DaemonSet pods hold
    2 GPUs each (without them, 1 node)."""
    from dralab.core.log.events import ScaleUpRequested, decode_record
    from dralab.core.run.config import run_config
    from dralab.core.scenario.load import parse_scenario
    from dralab.replay.simulation.sim import simulate

    test, manifests = load(CASES / "scaleup-from-0-nodes-template-pods-consuming-dra.yaml")
    group = {k: v for k, v in test["spec"]["nodeGroups"][0].items()}
    template = next(m for m in manifests if m["kind"] == "ResourceClaimTemplate")
    device_class = next(m for m in manifests if m["kind"] == "DeviceClass")
    pod = {"metadata": {"name": "job"}, "spec": {
        "containers": [{"name": "c", "image": "c:1", "resources": {"requests": {"cpu": "100m"}}}],
        "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": template["metadata"]["name"]}]}}

    def added(with_pods: bool) -> int:
        g = group if with_pods else {k: v for k, v in group.items() if k != "daemonSetPods"}
        doc = {"apiVersion": "dralab.io/v1alpha1", "kind": "Scenario", "metadata": {"name": "ds"},
               "spec": {"seed": 1, "duration": "5m", "kubernetes": {"version": "1.37"}, "policy": {"autoscaler": "dra"},
                        "objects": [device_class, template], "nodeGroups": [g],
                        "workload": [{"at": "0s", "count": 3, "pod": pod}]}}
        scenario = parse_scenario(doc, "ds.yaml")
        assert ("daemon_set_pods" in run_config(scenario)["autoscaler"]) == with_pods
        result = simulate(scenario, 1)
        return sum(e.delta for o, p in result.entries for e in decode_record(p, o).events
                   if isinstance(e, ScaleUpRequested))

    assert (added(True), added(False)) == (3, 1)
