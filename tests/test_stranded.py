"""Stranded GPU-hours (core/analysis/stranded.py), conflicts in the summary, and one span for every policy in the
report (issue 22): each cause on a one-node cluster with one pending pod, simulated with every reactor."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from builders import GPU_TAINT, GPU_TOLERATION, arrival, group, node_template, pod, scenario_doc, simulated

from dralab.cli import main
from dralab.core.analysis.metrics import metrics_from_entries
from dralab.core.analysis.run_metrics import RunMetrics
from dralab.core.analysis.summary import render_text, summarize
from dralab.core.log.events import decode_record
from dralab.core.run.config import policies, run_config
from dralab.inputs import load_scenario_input
from dralab.replay.logs.logfile import make_header
from dralab.replay.report.report_data import align, extract, span_mismatch
from dralab.replay.simulation.sim import Simulator

ROOT = Path(__file__).resolve().parents[1]
DRIVER = "gpu.example.com"
MINUTES = 10


def _metrics(doc: dict[str, Any], seed: int = 1) -> RunMetrics:
    result = simulated(doc, seed)
    return metrics_from_entries(result.entries, end_ms=MINUTES * 60_000)


def _one_node(template: dict[str, Any], pending: dict[str, Any], *, running: dict[str, Any] | None = None,
              objects: list[dict[str, Any]] | None = None, slices: list[dict[str, Any]] | None = None
              ) -> dict[str, Any]:
    """One node that the autoscaler may not grow, `running` bound at 0 s, `pending` arriving at 10 s."""
    g = group("g", min=1, max=1, template=template)
    if slices is not None:
        g["resourceSlices"] = slices
    workload = ([arrival(0, running)] if running is not None else []) + [arrival("10s", pending)]
    doc = scenario_doc([g], nodes={"g": 1}, workload=workload, duration=f"{MINUTES}m")
    if objects:
        doc["spec"]["objects"] = objects
    return doc


def _device_class(name: str = DRIVER, expression: str = f'device.driver == "{DRIVER}"') -> dict[str, Any]:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": name},
            "spec": {"selectors": [{"cel": {"expression": expression}}]}}


def _template(name: str, requests: list[dict[str, Any]], constraints: list[dict[str, Any]] | None = None
              ) -> dict[str, Any]:
    devices: dict[str, Any] = {"requests": requests}
    if constraints:
        devices["constraints"] = constraints
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate", "metadata": {"name": name},
            "spec": {"spec": {"devices": devices}}}


def _claiming(name: str, template: str) -> dict[str, Any]:
    manifest = pod(name)
    manifest["spec"]["resourceClaims"] = [{"name": "gpus", "resourceClaimTemplateName": template}]
    manifest["spec"]["containers"][0]["resources"]["claims"] = [{"name": "gpus"}]
    return manifest


def _gpus(n: int, **attributes: Any) -> list[dict[str, Any]]:
    """One node-local slice of `n` whole devices; attribute values may be callables of the device index."""
    return [{"spec": {"driver": DRIVER, "devices": [
        {"name": f"gpu-{i}", "attributes": {k: (v(i) if callable(v) else v) for k, v in attributes.items()}}
        for i in range(n)]}}]


def _cause(m: RunMetrics) -> str:
    assert m.gpu_hours_stranded > 0, m
    assert list(m.gpu_hours_stranded_by_cause) == [next(iter(m.gpu_hours_stranded_by_cause))], m
    assert sum(m.gpu_hours_stranded_by_cause.values()) == pytest.approx(m.gpu_hours_stranded)
    return next(iter(m.gpu_hours_stranded_by_cause))


# ---------------------------------------------------------------- one case per cause


def test_topology_two_domains_of_two() -> None:
    """4 free devices, 2 per NVLink domain; the pod wants 4 in one domain: `topology`, all 4 stranded."""
    doc = _one_node(node_template(gpu=0), _claiming("train", "four"),
                    objects=[_device_class(), _template("four", [{"name": "gpus", "exactly": {
                        "deviceClassName": DRIVER, "count": 4}}], [{"requests": ["gpus"],
                                                                   "matchAttribute": f"{DRIVER}/nvlinkDomain"}])],
                    slices=_gpus(4, nvlinkDomain=lambda i: {"int": i // 2}))
    m = _metrics(doc)
    assert _cause(m) == "topology"
    assert m.gpu_hours_stranded == pytest.approx(4 * (MINUTES * 60 - 10) / 3600, rel=0.05)
    assert m.gpu_hours_idle == pytest.approx(4 * 10 / 3600)  # before the pod came; after, the counts fit (4 >= 4)


def test_capacity_too_few_devices() -> None:
    doc = _one_node(node_template(gpu=0), _claiming("train", "eight"),
                    objects=[_device_class(), _template("eight", [{"name": "gpus", "exactly": {
                        "deviceClassName": DRIVER, "count": 8}}])], slices=_gpus(4))
    assert _cause(_metrics(doc)) == "capacity"


def test_capacity_too_few_extended_gpus() -> None:
    """6 of 8 `nvidia.com/gpu` taken; the pod wants 4: the 2 free are stranded for `capacity`, as devices are."""
    doc = _one_node(node_template(gpu=8), pod("train", gpu=4, tolerations=[GPU_TOLERATION]),
                    running=pod("busy", gpu=6, tolerations=[GPU_TOLERATION]))
    m = _metrics(doc)
    assert _cause(m) == "capacity"
    assert m.gpu_hours_stranded == pytest.approx(2 * (MINUTES * 60 - 10) / 3600, rel=0.05)


def test_selector_device_of_another_model() -> None:
    """The request's selector picks h100s; the node has a100s: no device matches, `selector`."""
    request = {"name": "gpus", "exactly": {"deviceClassName": DRIVER, "count": 1, "selectors": [
        {"cel": {"expression": f'device.attributes["{DRIVER}"].model == "h100"'}}]}}
    doc = _one_node(node_template(gpu=0), _claiming("train", "h100"),
                    objects=[_device_class(), _template("h100", [request])],
                    slices=_gpus(4, model={"string": "a100"}))
    assert _cause(_metrics(doc)) == "selector"


def test_selector_node_labels() -> None:
    pending = pod("train", gpu=1, tolerations=[GPU_TOLERATION], node_selector={"pool": "other"})
    assert _cause(_metrics(_one_node(node_template(gpu=8), pending))) == "selector"


def test_taint_not_tolerated() -> None:
    assert _cause(_metrics(_one_node(node_template(gpu=8, taints=[GPU_TAINT]), pod("train", gpu=1)))) == "taint"


def test_resources_cpu_short() -> None:
    pending = pod("train", gpu=1, cpu="200", tolerations=[GPU_TOLERATION])
    assert _cause(_metrics(_one_node(node_template(gpu=8), pending))) == "resources"


def test_counters_one_gpu_partly_used() -> None:
    """Two partitionable GPUs; a 1g partition runs on one; the pod wants both GPUs whole: the free one is
    stranded for `counters` (its sibling's counter set is partly consumed)."""
    def counters(memory: str) -> dict[str, Any]:
        return {"memory": {"value": memory}}

    devices = []
    for g in range(2):
        devices.append({"name": f"gpu-{g}", "attributes": {"profile": {"string": "whole"}},
                        "consumesCounters": [{"counterSet": f"gpu-{g}", "counters": counters("40Gi")}]})
        devices.append({"name": f"gpu-{g}-small", "attributes": {"profile": {"string": "small"}},
                        "consumesCounters": [{"counterSet": f"gpu-{g}", "counters": counters("10Gi")}]})
    slices = [{"spec": {"driver": DRIVER, "sharedCounters": [
        {"name": f"gpu-{g}", "counters": counters("40Gi")} for g in range(2)]}},
        {"spec": {"driver": DRIVER, "devices": devices}}]
    profile = f'device.attributes["{DRIVER}"].profile'
    objects = [_device_class("whole", f'{profile} == "whole"'), _device_class("small", f'{profile} == "small"'),
               _template("two-whole", [{"name": "gpus", "exactly": {"deviceClassName": "whole", "count": 2}}]),
               _template("one-small", [{"name": "gpus", "exactly": {"deviceClassName": "small"}}])]
    doc = _one_node(node_template(gpu=0), _claiming("train", "two-whole"), running=_claiming("small", "one-small"),
                    objects=objects, slices=slices)
    m = _metrics(doc)
    assert _cause(m) == "counters"
    assert m.gpu_hours_stranded == pytest.approx(1 * (MINUTES * 60 - 10) / 3600, rel=0.05)  # one GPU free


def test_not_ready_cordoned_node() -> None:
    pending = pod("train", gpu=1, tolerations=[GPU_TOLERATION])
    assert _cause(_metrics(_one_node(node_template(gpu=8, unschedulable=True), pending))) == "not-ready"


def test_the_nearest_pod_names_the_cause() -> None:
    """Two pods pending: one fails the node's labels, one the devices' topology: the nearer says `topology`."""
    doc = _one_node(node_template(gpu=0), _claiming("train", "four"),
                    objects=[_device_class(), _template("four", [{"name": "gpus", "exactly": {
                        "deviceClassName": DRIVER, "count": 4}}], [{"requests": ["gpus"],
                                                                   "matchAttribute": f"{DRIVER}/nvlinkDomain"}])],
                    slices=_gpus(4, nvlinkDomain=lambda i: {"int": i // 2}))
    far = _claiming("elsewhere", "four")
    far["spec"]["nodeSelector"] = {"pool": "other"}
    doc["spec"]["workload"].append(arrival("10s", far))
    assert _cause(_metrics(doc)) == "topology"


def test_free_gpus_beside_a_pod_short_of_cpu_and_no_demand() -> None:
    """A running pod holds the cpu the pending one needs: its 7 free GPUs are stranded for `resources`. No
    pod pending at all: nothing stranded (the free GPUs are idle for want of demand, not of shape)."""
    fits = pod("small", gpu=1, tolerations=[GPU_TOLERATION], cpu="90")
    cannot = pod("big", gpu=1, tolerations=[GPU_TOLERATION], cpu="90")  # cpu: only one of the two at a time
    doc = _one_node(node_template(gpu=8), cannot, running=fits)
    m = _metrics(doc)
    assert m.gpu_hours_stranded_by_cause == {"resources": pytest.approx(m.gpu_hours_stranded)}
    idle = _one_node(node_template(gpu=8), pod("cpu-only", cpu="1"))
    m = _metrics(idle)
    assert m.gpu_hours_stranded == 0 and m.gpu_hours_idle > 0 and m.gpu_hours_wanted == 0


def test_legacy_logs_keep_their_numbers() -> None:
    """The new fields add; they change none of the old ones (topology-mismatch under count: idle 0, as before)."""
    doc = copy.deepcopy(_one_node(node_template(gpu=8), pod("train", gpu=1, tolerations=[GPU_TOLERATION])))
    m = _metrics(doc)
    assert m.gpu_hours_stranded == 0 and m.gpu_hours_wanted == 0  # the pod runs at once: nothing pending
    assert m.gpu_hours_idle > 0


# ---------------------------------------------------------------- topology-mismatch, one span for every policy


def _run(policy: str) -> tuple[Any, Any, list[tuple[int, bytes]]]:
    scenario = load_scenario_input(str(ROOT / "scenarios" / "topology-mismatch.yaml"), policy)
    result = Simulator(scenario, 1).run()
    return scenario, result, result.entries


def test_topology_mismatch_count_strands_its_16_gpus_over_the_same_span_as_dra(tmp_path: Path) -> None:
    runs = {}
    for policy in ("count", "dra"):
        scenario, result, entries = _run(policy)
        m = metrics_from_entries(entries, end_ms=scenario.duration_ms)
        summary = summarize(result.state, result.violations, metrics=m, conflicts=result.conflicts)
        header = make_header(scenario=scenario.name, seed=1, policy=policies(run_config(scenario)), mode="sim")
        data = extract(policy, header, [(o, decode_record(p, o)) for o, p in entries])
        runs[policy] = (m, summary, data)
    count, dra = runs["count"][0], runs["dra"][0]
    assert count.end_s == dra.end_s == 1800
    # count: 4 split nodes, 16 GPUs, paid from registration to the end, never used, all stranded for topology
    assert count.gpu_hours_used == 0 and count.gpu_hours_idle == 0
    assert count.gpu_hours_stranded_by_cause == {"topology": pytest.approx(count.gpu_hours_paid)}
    assert count.gpu_hours_paid == pytest.approx(16 * (1800 - 90) / 3600, rel=0.05)
    assert dra.gpu_hours_stranded == 0
    assert dra.gpu_hours_wanted > 0  # the whole nodes' GPUs while the pods that fit them wait to be bound
    assert "stranded (topology 7.6)" in render_text(runs["count"][1])
    # the report: the logs end at 1,602 s and 94 s; aligned, both totals run to the scenario's 1,800 s
    datas = [runs["count"][2], runs["dra"][2]]
    assert datas[1].log_end_s < 100 < 1600 < datas[0].log_end_s < 1800
    assert align(datas) == 1_800_000
    for data, policy in zip(datas, ("count", "dra"), strict=True):
        assert data.end_s == 1800 and data.metrics == runs[policy][0]
    g = datas[0].gpus  # the report's stranded series integrates to the metrics' (held to the end)
    ends = [*g.t[1:], datas[0].end_s]
    stranded = sum(v * (b - a) for v, a, b in zip(g.columns["stranded"], g.t, ends, strict=True)) / 3600
    assert stranded == pytest.approx(count.gpu_hours_stranded, abs=1e-6)
    note = span_mismatch(datas)
    assert note is not None and "the same span, 0 to 1800 s" in note
    # and through the CLI
    logs = []
    for policy in ("count", "dra"):
        log = tmp_path / f"{policy}.dralog"
        assert main(["sim", str(ROOT / "scenarios" / "topology-mismatch.yaml"), "--autoscaler", policy,
                     "--log", str(log), "-o", "json"]) == 0
        logs.append(str(log))
    assert main(["report", *logs, "--html", str(tmp_path / "r.html")]) == 0
    html = (tmp_path / "r.html").read_text()
    assert "stranded GPU-hours" in html and "topology 7.632" in html and "0 to 1800 s" in html


# ---------------------------------------------------------------- conflicts


def test_conflicts_of_a_stale_view_show_in_the_summary_and_json(capsys: pytest.CaptureFixture[str]) -> None:
    path = str(ROOT / "scenarios" / "chaos" / "stale-autoscaler.yaml")
    scenario = load_scenario_input(path, None)
    expected = Simulator(scenario, 5).run().conflicts
    assert expected > 0
    assert main(["sim", path, "-o", "json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["conflicts"] == expected
    assert f", {expected} conflicts (stale decisions refused)" in render_text(summary)
    assert main(["sim", path]) == 0
    assert f"{expected} conflicts" in capsys.readouterr().out


def test_a_live_runs_conflicts_are_its_actors() -> None:
    """`dralab run`: the summary's conflicts sum what each actor counted (an actor that never answered: 0)."""
    from dralab.cli import _conflicts

    assert _conflicts({"actors": {"scheduler": {"conflicts": 3}, "autoscaler": {"conflicts": 2},
                                  "cloud": {"conflicts": None}}}) == 5
    assert _conflicts({}) == 0
