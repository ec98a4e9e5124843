"""PodTopologySpread's and InterPodAffinity's scores take part in the weighted score (scoring.PLUGINS), their
plugin args and DynamicResources' are checked and read from a scenario's KubeSchedulerConfiguration
(config.ARG_CHECKS). Each test compares the same scenario with the plugin's score on and off, so it fails if the
plugin is not wired in."""

from __future__ import annotations

import copy
from collections import Counter
from typing import Any

import pytest
from builders import arrival, group, node_template, pod, simulated, sourced_events

from dralab.core.kube.errors import ScenarioError
from dralab.core.log.events import PodBound
from dralab.core.scenario.load import parse_scenario

ZONE = "topology.kubernetes.io/zone"


def _config(disabled: tuple[str, ...] = (), plugin_config: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """MostAllocated packs pods together, so only a working spread or affinity score can spread them."""
    profile: dict[str, Any] = {
        "schedulerName": "default-scheduler",
        "pluginConfig": [{"name": "NodeResourcesFit", "args": {"scoringStrategy": {
            "type": "MostAllocated", "resources": [{"name": "cpu", "weight": 1}, {"name": "memory", "weight": 1}]}}},
            *(plugin_config or [])],
    }
    if disabled:
        profile["plugins"] = {"score": {"disabled": [{"name": n} for n in disabled]}}
    return {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
            "profiles": [profile]}


def _doc(web: dict[str, Any], config: dict[str, Any]) -> dict[str, Any]:
    groups = [group(f"zone-{z}", max=1, template=node_template(gpu=0, cpu="8", labels={ZONE: z})) for z in "abc"]
    return {"apiVersion": "dralab.io/v1alpha1", "kind": "Scenario", "metadata": {"name": "wiring"},
            "spec": {"duration": "1m", "kubernetes": {"version": "1.37"}, "nodeGroups": groups,
                     "nodes": [{"group": f"zone-{z}", "count": 1} for z in "abc"],
                     "scheduler": {"config": config},
                     "workload": [arrival(0, web, count=3, run_for="10m")]}}


def _web(affinity: dict[str, Any] | None = None, spread: bool = False) -> dict[str, Any]:
    manifest = pod("web", cpu="1")
    manifest["metadata"]["labels"] = {"app": "web"}
    if spread:
        manifest["spec"]["topologySpreadConstraints"] = [{
            "maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "ScheduleAnyway",
            "labelSelector": {"matchLabels": {"app": "web"}}}]
    if affinity is not None:
        manifest["spec"]["affinity"] = affinity
    return manifest


def _zones(doc: dict[str, Any]) -> Counter[str]:
    result = simulated(doc, seed=1)
    return Counter(e.node for _, _, e in sourced_events(result.entries, PodBound))


PREFERRED_ANTI = {"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [{
    "weight": 100, "podAffinityTerm": {"topologyKey": ZONE, "labelSelector": {"matchLabels": {"app": "web"}}}}]}}


@pytest.mark.parametrize(("web", "plugin"), [(_web(spread=True), "PodTopologySpread"),
                                             (_web(affinity=PREFERRED_ANTI), "InterPodAffinity")])
def test_the_score_spreads_what_most_allocated_would_pack(web: dict[str, Any], plugin: str) -> None:
    assert sorted(_zones(_doc(web, _config())).values()) == [1, 1, 1]
    assert sorted(_zones(_doc(web, _config(disabled=(plugin,)))).values()) == [3]


def test_plugin_args_are_checked_with_their_paths() -> None:
    """The configuration is checked when the run's configuration is made (core/run/config.py: the scenario
    layer cannot import the scheduler's), before anything runs."""
    from dralab.core.run.config import run_config

    bad = _config(plugin_config=[{"name": "InterPodAffinity", "args": {"hardPodAffinityWeight": 101}}])
    with pytest.raises(ScenarioError, match="hardPodAffinityWeight"):
        run_config(parse_scenario(_doc(_web(), bad)))
    bad = _config(plugin_config=[{"name": "PodTopologySpread", "args": {"defaultingType": "Sometimes"}}])
    with pytest.raises(ScenarioError, match="defaultingType"):
        run_config(parse_scenario(_doc(_web(), bad)))
    bad = _config(plugin_config=[{"name": "DynamicResources", "args": {"bindingTimeout": "0s"}}])
    with pytest.raises(ScenarioError, match="bindingTimeout"):
        run_config(parse_scenario(_doc(_web(), bad)))


def test_binding_timeout_reaches_the_scheduler() -> None:
    from dralab.core.run.config import build_reactors, run_config
    from dralab.core.scheduler.reactor import Scheduler

    doc = _doc(_web(), _config(plugin_config=[{"name": "DynamicResources", "args": {"bindingTimeout": "90s"}}]))
    config = run_config(parse_scenario(copy.deepcopy(doc)))
    scheduler = next(r for r in build_reactors(config) if isinstance(r, Scheduler))
    assert scheduler.binding_timeout_ms == 90_000
    default = next(r for r in build_reactors(run_config(parse_scenario(_doc(_web(), _config()))))
                   if isinstance(r, Scheduler))
    assert default.binding_timeout_ms == 600_000
