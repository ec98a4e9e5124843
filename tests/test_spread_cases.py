"""Fidelity: upstream's PodTopologySpread and InterPodAffinity test tables (tests/scheduler_cases/spread/ and
tests/scheduler_cases/affinity/, restated as snapshots) played against dralab.

Each case is a cluster dump (Nodes, running Pods with spec.nodeName, the incoming Pod `spec.pod`) and a
`kind: SchedulingTest` document. Its manifests are read under the case's release profile (core/dra/api.py
`parse_documents`), turned into the events that lead to them (core/analysis/dump.py) and folded. Then:

- `expect.filter` (upstream's wantStatusCode per node, or its failed nodes): the plugin's own PreFilter and
  Filter on the fold, node by node, must give exactly upstream's code. Upstream runs the plugin alone, so a
  node another filter would reject may still say Success here, as upstream's table does.
- end to end, the real Scheduler decides on the fold: the pod must bind to a node that passes the plugin and
  every other filter (NodeAffinity, TaintToleration, NodeResourcesFit), or stay pending when there is none,
  with the plugin's reason in its FitError message.
- `expect.refused` (upstream's entries whose pod the API server would refuse, e.g. an invalid label value in
  a selector, where upstream's PreFilter fails): reading the manifests must fail with a ManifestError whose
  message names this path.
- `expect.scores` (upstream's scoring tables): the plugin's score object (pre_score, score per node,
  normalize) must give exactly upstream's normalized scores on the nodes listed.

The README's table of counts is checked against the files (`test_readme_counts`).
"""

from __future__ import annotations

import random
import re
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import yaml

from dralab.core.analysis.dump import dump_record
from dralab.core.dra.api import ManifestError, parse_documents
from dralab.core.kube.versions import make_profile, profile_config
from dralab.core.log.events import Record
from dralab.core.scheduler.config import default_config
from dralab.core.scheduler.cycle import Cycle
from dralab.core.scheduler.filters import STATIC_FILTERS, first_failure
from dralab.core.scheduler.framework import Code, Status
from dralab.core.scheduler.placement import affinity_score, cycle_pods, spread_score
from dralab.core.scheduler.plugins import inter_pod_affinity, pod_topology_spread
from dralab.core.scheduler.plugins.node_resources_fit import fits_resources
from dralab.core.scheduler.reactor import Scheduler
from dralab.core.scheduler.scoring import Scoring
from dralab.core.state.cluster import ClusterState, NodeState, PodState

ROOT = Path(__file__).parent / "scheduler_cases"
GROUPS = ("spread", "affinity")
README = ROOT / "README.md"
CODE_NAMES = {Code.UNSCHEDULABLE: "Unschedulable", Code.UNSCHEDULABLE_AND_UNRESOLVABLE: "UnschedulableAndUnresolvable"}


def case_files(group: str | None = None) -> list[Path]:
    groups = (group,) if group else GROUPS
    return sorted(p for g in groups for p in (ROOT / g).glob("*.yaml"))


def load(path: Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    docs = [d for d in yaml.safe_load_all(path.read_text()) if d]
    tests = [d for d in docs if d.get("kind") == "SchedulingTest"]
    assert len(tests) == 1, f"{path.name}: one SchedulingTest document"
    assert tests[0]["metadata"]["name"] == path.stem, f"{path.name}: metadata.name is the file's name"
    return tests[0]["spec"], [d for d in docs if d.get("kind") != "SchedulingTest"]


class Snapshot:
    """The case's dump folded."""

    def __init__(self, spec: dict[str, Any], manifests: list[dict[str, Any]], name: str) -> None:
        k = spec.get("kubernetes") or {}
        self.profile = make_profile(str(k.get("version")), k.get("featureGates") or {}, k.get("runtimeConfig") or {})
        self.state = ClusterState()
        self.state.apply(1, dump_record(parse_documents(manifests, name, profile=self.profile)).record)
        keys = [key for key in self.state.pods if key.rsplit("/", 1)[1] == spec["pod"]]
        assert len(keys) == 1, f"the incoming pod {spec['pod']}"
        self.pod: PodState = self.state.pods[keys[0]]

    def plugin_filter(self, group: str) -> dict[str, Status | None]:
        """The plugin's PreFilter and Filter alone, on every node."""
        cycle = Cycle(self.state, random.Random(0))
        pods = cycle_pods(cycle)
        ready = [n for n in self.state.nodes.values() if n.ready]
        if group == "spread":
            f: Any = pod_topology_spread.pre_filter(self.pod, ready, pods)
        else:
            f = inter_pod_affinity.pre_filter(self.pod, ready, pods, pods.with_anti())
        return {name: (None if f is None else f(node)) for name, node in self.state.nodes.items()}

    def others_pass(self, node: NodeState) -> bool:
        return first_failure(STATIC_FILTERS, self.pod, node, {}) is None and \
            fits_resources(self.pod, node, node.used) is None

    def schedule(self) -> None:
        scheduler = Scheduler(kubernetes=profile_config(self.profile))
        decision = scheduler.react(self.state, 1, random.Random(7))
        self.state.apply(2, Record(id="scheduler-1", source="scheduler", view=1, t=1, events=decision.events))

    def scores(self, group: str, args: dict[str, Any] | None, nodes: list[str]) -> dict[str, int]:
        cycle = Cycle(self.state, random.Random(0))
        plugin: Any = spread_score(args) if group == "spread" else affinity_score(args)
        listed = [self.state.nodes[n] for n in nodes]
        state = plugin.pre_score(cycle, self.pod, listed)
        if state is None:
            return dict.fromkeys(nodes, 0)
        scores = {n.name: plugin.score(state, self.pod, n, n.used) for n in listed}
        plugin.normalize(state, scores)
        return scores


    def framework_scores(self, group: str, args: dict[str, Any] | None, nodes: list[str]) -> dict[str, int]:
        """The same scores through the score framework (scoring.py: Scoring.prepare, then PodScore.rank with the
        listed nodes as the ones found): PreScore sees what upstream's does (`filteredNodes`), not every node."""
        name = "PodTopologySpread" if group == "spread" else "InterPodAffinity"
        config = default_config(self.profile.version)
        config["score"] = {name: 1}
        if args:
            config["args"][name] = {**(config["args"].get(name) or {}), **args}
        score = Scoring(config).prepare(Cycle(self.state, random.Random(0)), self.pod)
        if not score.active:
            return dict.fromkeys(nodes, 0)
        ranked = score.rank([(n, self.state.nodes[n], self.state.nodes[n].used) for n in nodes])
        return {n: int(total) for total, names in ranked.items() for n in names}


def outcome(path: Path) -> tuple[str, list[str]]:
    """("skipped" | "pass" | "fail", what failed)."""
    spec, manifests = load(path)
    if spec.get("skip"):
        return "skipped", []
    group, expect = spec["group"], spec["expect"]
    if "refused" in expect:
        try:
            Snapshot(spec, manifests, path.name)
        except ManifestError as e:
            return ("pass", []) if expect["refused"] in str(e) else ("fail", [f"refused: {e}"])
        return "fail", ["refused: the manifests were accepted"]
    snap = Snapshot(spec, manifests, path.name)
    out: list[str] = []
    if "scores" in expect:
        got = snap.scores(group, spec.get("pluginArgs"), list(expect["scores"]))
        if got != expect["scores"]:
            out.append(f"scores: expected {expect['scores']}, got {got}")
        framework = snap.framework_scores(group, spec.get("pluginArgs"), list(expect["scores"]))
        if framework != expect["scores"]:
            out.append(f"scores through the framework: expected {expect['scores']}, got {framework}")
    if "filter" in expect:
        statuses = snap.plugin_filter(group)
        got_codes = {n: "Success" if s is None else CODE_NAMES[s.code] for n, s in statuses.items()}
        want = expect["filter"]
        if {n: got_codes[n] for n in want} != want:
            out.append(f"filter: expected {want}, got {got_codes}")
        fits = {n for n, s in statuses.items() if s is None and snap.others_pass(snap.state.nodes[n])}
        reasons = {s.message for s in statuses.values() if s is not None}
        snap.schedule()
        pod = snap.state.pods[snap.pod.key]
        if fits and pod.node not in fits:
            out.append(f"end to end: expected a node of {sorted(fits)}, got {pod.node} "
                       f"({pod.condition.message if pod.condition else ''})")
        if not fits:
            message = pod.condition.message if pod.condition else ""
            if pod.node is not None:
                out.append(f"end to end: expected pending, bound to {pod.node}")
            elif reasons and not any(r in message for r in reasons):
                out.append(f"end to end: expected one of {sorted(reasons)} in {message!r}")
    return ("fail" if out else "pass"), out


@pytest.mark.parametrize("path", case_files(), ids=lambda p: p.stem)
def test_case(path: Path) -> None:
    result, why = outcome(path)
    if result == "skipped":
        pytest.skip(load(path)[0]["skip"])
    assert not why, "\n".join(why)


def readme_counts() -> dict[str, tuple[int, int, int]]:
    """The README's table: group -> (cases, pass, skipped)."""
    out = {}
    for line in README.read_text().splitlines():
        m = re.match(r"\|\s*(spread|affinity)\s*\|\s*(\d+)\s*\|\s*(\d+)\s*\|\s*(\d+)\s*\|", line)
        if m:
            out[m.group(1)] = (int(m.group(2)), int(m.group(3)), int(m.group(4)))
    return out


def test_readme_counts() -> None:
    """The README's counts are the files' (cases, passing, skipped), per group."""
    counts = readme_counts()
    for group in GROUPS:
        results = Counter(outcome(p)[0] for p in case_files(group))
        got = (len(case_files(group)), results["pass"], results["skipped"])
        assert counts.get(group) == got, f"{group}: README says {counts.get(group)}, the cases give {got}"
