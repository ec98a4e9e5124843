"""Kubernetes version profiles (core/kube/versions.py, core/scenario/kubernetes.py, core/scenario/gates.py,
core/dra/features.py): the gate table per release, errors with their paths, the legacy profile and its
byte-identical logs, the run configuration's round trip, dump inference, the flags, and what a release
changes in a run."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import msgspec
import pytest
import yaml
from builders import KUBERNETES_1_35_GANGS, group, node_template, scenario_doc, with_1_35_gangs

from dralab.cli import main
from dralab.core.autoscaler.reactor import Autoscaler
from dralab.core.dra.features import allocator_features
from dralab.core.dra.prepare import Features
from dralab.core.kube.fields import FieldError
from dralab.core.kube.versions import (
    API_VERSIONS,
    DEFAULT_VERSION,
    GATES,
    LEGACY_PROFILE,
    VERSIONS,
    Profile,
    ProfileFlags,
    dump_profile,
    make_profile,
    parse_feature_gates,
    parse_runtime_config,
    profile_config,
    profile_from_config,
    same_profile,
)
from dralab.core.log.events import PodReserved, decode_record
from dralab.core.run.config import build_reactors, run_config
from dralab.core.scenario.load import ScenarioError, load_scenario, parse_scenario
from dralab.core.scheduler.reactor import Scheduler
from dralab.replay.simulation.sim import simulate

ROOT = Path(__file__).resolve().parents[1]
SCENARIOS = ROOT / "scenarios"
V1ALPHA1 = "scheduling.k8s.io/v1alpha1"


def doc(name: str = "gang-quickstart") -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load((SCENARIOS / f"{name}.yaml").read_text())
    return loaded


def refused(d: dict[str, Any], **kwargs: Any) -> ScenarioError:
    with pytest.raises(ScenarioError) as info:
        parse_scenario(d, "t.yaml", **kwargs)
    return info.value


# ---------------------------------------------------------------- the gate table


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("gate", sorted(GATES))
def test_every_gate_at_every_release_is_its_default_and_can_be_set_as_its_stage_allows(gate: str, version: str) -> None:
    spec = GATES[gate].get(version)
    default = make_profile(version)
    if spec is None or spec.stage == "removed":
        assert gate not in default.gates
        with pytest.raises(FieldError) as info:
            make_profile(version, {gate: True})
        assert info.value.path == f"spec.kubernetes.featureGates.{gate}"
        assert ("merged into" in info.value.message) == (spec is not None)
        return
    assert default.enabled(gate) is spec.default
    if spec.stage == "locked":
        with pytest.raises(FieldError) as info:
            make_profile(version, {gate: not spec.default})
        assert "locked" in info.value.message and info.value.path == f"spec.kubernetes.featureGates.{gate}"
        assert make_profile(version, {gate: spec.default}).enabled(gate) is spec.default
    else:
        assert make_profile(version, {gate: not spec.default}).enabled(gate) is (not spec.default)


def test_the_table_follows_upstream_where_it_matters() -> None:
    """Spot checks against the versioned gate specs (see the comment above GATES)."""
    assert GATES["GenericWorkload"]["1.37"].stage == "beta" and not GATES["GenericWorkload"]["1.37"].default
    assert GATES["GangScheduling"]["1.37"].merged_into == "GenericWorkload"
    assert not GATES["NominatedNodeNameForExpectation"]["1.34"].default
    assert GATES["NominatedNodeNameForExpectation"]["1.35"].default
    assert GATES["DRAPrioritizedList"]["1.36"].stage == "ga"  # GA, not locked until 1.37
    assert GATES["DRAPrioritizedList"]["1.37"].stage == "locked"
    assert GATES["DRADeviceTaints"]["1.37"].stage == "ga"  # locked only from 1.38
    assert "1.34" not in GATES["DRADeviceTaintRules"]


def test_a_version_dralab_does_not_model_is_refused() -> None:
    with pytest.raises(FieldError) as info:
        make_profile("1.33")
    assert info.value.path == "spec.kubernetes.version" and "1.34, 1.35, 1.36, 1.37" in info.value.message


# ---------------------------------------------------------------- the scenario's spec.kubernetes


@pytest.mark.parametrize(
    ("edit", "path", "words"),
    [
        (lambda k: k.update(version="1.38"), "spec.kubernetes.version", "unsupported Kubernetes version"),
        (lambda k: k.update(version=1.5), "spec.kubernetes.version", "quote it"),
        (lambda k: k["featureGates"].update(NoSuchGate=True), "spec.kubernetes.featureGates.NoSuchGate",
         "unknown feature gate"),
        (lambda k: k["featureGates"].update(PodGroupPreemptionPolicy=True),
         "spec.kubernetes.featureGates.PodGroupPreemptionPolicy", "has no feature gate"),
        (lambda k: k["featureGates"].update(DynamicResourceAllocation=False),
         "spec.kubernetes.featureGates.DynamicResourceAllocation", "locked to true"),
        (lambda k: k["featureGates"].update(GenericWorkload="yes"), "spec.kubernetes.featureGates.GenericWorkload",
         None),
        (lambda k: k["runtimeConfig"].update({"batch/v2": True}), "spec.kubernetes.runtimeConfig.batch/v2",
         "unknown API version"),
        (lambda k: k.update(extra=1), "spec.kubernetes.extra", None),
        # the Workload API's own conditions
        (lambda k: k["featureGates"].pop("GenericWorkload"), "spec.objects[0].apiVersion", "GenericWorkload"),
        (lambda k: k.pop("runtimeConfig"), "spec.objects[0].apiVersion", "--runtime-config"),
        (lambda k: k["featureGates"].pop("GangScheduling"), "spec.objects[0].kind", "GangScheduling"),
    ],
)
def test_bad_spec_kubernetes_is_refused_with_its_path(edit, path: str, words: str | None) -> None:  # type: ignore[no-untyped-def]
    d = doc()
    edit(d["spec"]["kubernetes"])
    error = refused(d)
    assert error.path == path
    if words is not None:
        assert words in error.message


def test_gang_scheduling_in_1_37_is_refused_as_merged_into_generic_workload() -> None:
    d = doc()
    d["spec"]["kubernetes"] = {"version": "1.37", "featureGates": {"GangScheduling": True}}
    error = refused(d)
    assert error.path == "spec.kubernetes.featureGates.GangScheduling"
    assert "merged into `GenericWorkload`" in error.message


def test_a_1_37_scenario_with_a_v1alpha1_workload_is_refused_naming_the_api_version() -> None:
    d = doc()
    del d["spec"]["kubernetes"]  # the default: 1.37
    error = refused(d)
    assert error.path == "spec.objects[0].apiVersion"
    assert f"Kubernetes 1.37 does not serve Workload in `{V1ALPHA1}`" in error.message
    assert "scheduling.k8s.io/v1beta1" in error.message  # what it serves instead


def test_a_1_35_scenario_without_generic_workload_is_refused_naming_the_gate() -> None:
    d = doc()
    d["spec"]["kubernetes"]["featureGates"] = {}
    error = refused(d)
    assert error.path == "spec.objects[0].apiVersion"
    assert "needs the feature gate GenericWorkload (alpha, off by default in Kubernetes 1.35)" in error.message


def test_workload_ref_exists_only_in_1_35() -> None:
    d = doc()
    d["spec"]["objects"] = []  # no Workload: only the pods' spec.workloadRef is left to refuse
    d["spec"]["kubernetes"] = {"version": "1.36"}
    error = refused(d)
    assert error.path.endswith(".pod.spec.workloadRef") and "schedulingGroup" in error.message


def test_scheduler_feature_gates_join_the_profile_and_may_not_contradict_it() -> None:
    d = doc()
    d["spec"]["scheduler"] = {"featureGates": {"DRAPartitionableDevices": True}}
    scenario = parse_scenario(d, "t.yaml")
    assert scenario.scheduler.feature_gates == {"DRAPartitionableDevices": True}
    assert not scenario.kubernetes.enabled("DRAPartitionableDevices")  # the scenario's own profile
    sched = Scheduler(**run_config(scenario)["scheduler"], kubernetes=run_config(scenario).get("kubernetes"))
    assert sched.profile.enabled("DRAPartitionableDevices")  # merged by the reactor
    d["spec"]["scheduler"] = {"featureGates": {"GenericWorkload": False}}
    error = refused(d)
    assert error.path == "spec.scheduler.featureGates.GenericWorkload"
    assert "spec.kubernetes.featureGates.GenericWorkload" in error.message
    d["spec"]["scheduler"] = {"featureGates": {"PodGroupPreemptionPolicy": True}}  # a 1.37 gate, in 1.35
    assert refused(d).path == "spec.scheduler.featureGates.PodGroupPreemptionPolicy"


# ---------------------------------------------------------------- DRA fields behind their gates

SLICE = {"driver": "gpu.example.com", "devices": [{"name": "gpu-0", "attributes": {"model": {"string": "a"}}}]}


def dra_doc(version: str, gates: dict[str, bool] | None = None) -> dict[str, Any]:
    d = scenario_doc([group("gpu", max=1, template=node_template(gpu=0))])
    d["spec"]["kubernetes"] = {"version": version, "featureGates": gates or {}}
    d["spec"]["nodeGroups"][0]["resourceSlices"] = [{"spec": copy.deepcopy(SLICE)}]
    d["spec"]["objects"] = [
        {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "gpu.example.com"},
         "spec": {"selectors": [{"cel": {"expression": "device.driver == 'gpu.example.com'"}}]}},
        {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": "c"},
         "spec": {"devices": {"requests": [{"name": "r", "exactly": {"deviceClassName": "gpu.example.com"}}]}}},
    ]
    return d


def _slice_device(d: dict[str, Any]) -> dict[str, Any]:
    return d["spec"]["nodeGroups"][0]["resourceSlices"][0]["spec"]["devices"][0]  # type: ignore[no-any-return]


def _exactly(d: dict[str, Any]) -> dict[str, Any]:
    return d["spec"]["objects"][1]["spec"]["devices"]["requests"][0]["exactly"]  # type: ignore[no-any-return]


DRA_FIELDS = [
    ("DRADeviceTaints", "spec.nodeGroups[0].resourceSlices[0].spec.devices[0].taints",
     lambda d: _slice_device(d).update(taints=[{"key": "k", "effect": "NoSchedule"}])),
    ("DRADeviceTaints", "spec.objects[1].spec.devices.requests[0].exactly.tolerations",
     lambda d: _exactly(d).update(tolerations=[{"key": "k", "operator": "Exists"}])),
    ("DRAConsumableCapacity", "spec.nodeGroups[0].resourceSlices[0].spec.devices[0].allowMultipleAllocations",
     lambda d: _slice_device(d).update(allowMultipleAllocations=True)),
    ("DRAConsumableCapacity", "spec.objects[1].spec.devices.requests[0].exactly.capacity",
     lambda d: _exactly(d).update(capacity={"requests": {"memory": "1Gi"}})),
    ("DRADeviceBindingConditions", "spec.nodeGroups[0].resourceSlices[0].spec.devices[0].bindsToNode",
     lambda d: _slice_device(d).update(bindsToNode=True, bindingConditions=["ready"],
                                       bindingFailureConditions=["failed"])),
    ("DRAExtendedResource", "spec.objects[0].spec.extendedResourceName",
     lambda d: d["spec"]["objects"][0]["spec"].update(extendedResourceName="example.com/gpu")),
    ("DRAPartitionableDevices", "spec.nodeGroups[0].resourceSlices[0].spec.devices[0].consumesCounters",
     lambda d: (_slice_device(d).update(consumesCounters=[{"counterSet": "mem",
                                                           "counters": {"memory": {"value": "1Gi"}}}]),
                d["spec"]["nodeGroups"][0]["resourceSlices"].append({"spec": {
                    "driver": "gpu.example.com",
                    "sharedCounters": [{"name": "mem", "counters": {"memory": {"value": "8Gi"}}}]}}))),
]


@pytest.mark.parametrize(("gate", "path", "edit"), DRA_FIELDS, ids=[f"{g}-{p.rsplit('.', 1)[1]}" for g, p, _ in
                                                                  DRA_FIELDS])
def test_dra_fields_are_refused_under_1_35_without_their_gate_and_accepted_with_it(gate: str, path: str,
                                                                                 edit: Any) -> None:
    d = dra_doc("1.35")
    edit(d)
    error = refused(d)
    assert error.path == path, error
    assert f"needs the feature gate {gate} (alpha, off by default in Kubernetes 1.35)" in error.message
    d["spec"]["kubernetes"]["featureGates"][gate] = True
    parse_scenario(d, "t.yaml")  # accepted with its gate
    d["spec"]["kubernetes"] = {"version": "1.37"}
    parse_scenario(d, "t.yaml")  # on by default in 1.37


def test_a_device_unhealthy_fault_needs_device_taints() -> None:
    d = doc("examples/every-field")
    del d["spec"]["kubernetes"]["featureGates"]["DRADeviceTaints"]
    error = refused(d)
    assert error.path.endswith(".unhealthy") and "DRADeviceTaints" in error.message


def test_prioritized_lists_and_admin_access_are_on_in_every_release() -> None:
    for version in VERSIONS:
        assert make_profile(version).enabled("DRAPrioritizedList") and make_profile(version).enabled("DRAAdminAccess")
    d = dra_doc("1.35", {"DRAPrioritizedList": False})
    request = d["spec"]["objects"][1]["spec"]["devices"]["requests"][0]
    request["firstAvailable"] = [{"name": "a", "deviceClassName": request.pop("exactly")["deviceClassName"]}]
    error = refused(d)
    assert error.path.endswith("requests[0].firstAvailable") and "DRAPrioritizedList" in error.message


# ---------------------------------------------------------------- allocator features


def test_allocator_features_follow_the_gates() -> None:
    assert allocator_features(LEGACY_PROFILE) == Features()  # the legacy model: every feature on
    assert allocator_features(make_profile("1.37")) == Features()
    assert allocator_features(make_profile("1.36")) == Features()
    off = allocator_features(make_profile("1.35"))
    assert off == Features(partitionable_devices=False, device_taints=False, consumable_capacity=False,
                           binding_conditions=False)
    assert allocator_features(make_profile("1.34")) == off
    assert not allocator_features(make_profile("1.37", {"DRADeviceBindingConditions": False})).binding_conditions


def test_the_scheduler_and_the_autoscaler_get_the_same_allocator_features() -> None:
    scenario = parse_scenario(dra_doc("1.35", {"DRADeviceTaints": True}), "t.yaml")
    reactors = {r.name: r for r in build_reactors(run_config(scenario))}
    scheduler, autoscaler = reactors["scheduler"], reactors["autoscaler"]
    assert isinstance(scheduler, Scheduler) and isinstance(autoscaler, Autoscaler)
    assert scheduler._dra.features == autoscaler._dra.features
    assert scheduler._dra.features.device_taints and not scheduler._dra.features.partitionable_devices


# ---------------------------------------------------------------- legacy profile and run configuration


def test_the_legacy_profile_writes_no_kubernetes_entry_and_old_logs_read_as_legacy() -> None:
    assert profile_config(LEGACY_PROFILE) is None
    assert profile_from_config(None) is LEGACY_PROFILE
    # the same cluster spelt with a default gate set explicitly is still the legacy one
    spelt = make_profile("1.35", {**dict(LEGACY_PROFILE.overrides), "NominatedNodeNameForExpectation": True},
                         {V1ALPHA1: True})
    assert profile_config(spelt) is None
    scenario = load_scenario(SCENARIOS / "gang-quickstart.yaml", profile=LEGACY_PROFILE)
    assert "kubernetes" not in run_config(scenario)


@pytest.mark.parametrize("profile", [make_profile(v) for v in VERSIONS]
                         + [make_profile("1.35", {"GenericWorkload": True}, {V1ALPHA1: True}),
                            make_profile("1.37", {"GenericWorkload": True}, {"scheduling.k8s.io/v1beta1": True})])
def test_the_run_configuration_entry_round_trips(profile: Profile) -> None:
    entry = profile_config(profile)
    assert entry is not None
    assert json.loads(json.dumps(entry)) == entry  # plain data, as RunStarted records it
    assert same_profile(profile_from_config(entry), profile)


def test_an_own_profile_run_records_its_release_and_replays_under_it() -> None:
    scenario = load_scenario(SCENARIOS / "gang-quickstart.yaml")
    config = run_config(scenario)
    assert config["kubernetes"] == {"version": "1.35", "feature_gates": {"GangScheduling": True,
                                                                        "GenericWorkload": True},
                                    "runtime_config": [V1ALPHA1]}
    from dralab.replay.logs.logfile import LogFile
    from dralab.replay.simulation.verify import verify

    result = simulate(scenario, 1)
    assert verify(LogFile("x", {}, result.entries)).ok


def test_a_legacy_run_is_byte_identical_to_the_committed_digest() -> None:
    import sys

    sys.path.insert(0, str(ROOT / "benchmarks"))
    import digests

    expected = json.loads((ROOT / "benchmarks" / "digests.json").read_text())["scenarios"]
    path = SCENARIOS / "partial-gang.yaml"
    got = digests.scenario_digests([path])
    assert got == {k: v for k, v in expected.items() if k.startswith("scenarios/partial-gang.yaml|")}


# ---------------------------------------------------------------- NominatedNodeName per release


def test_1_34_has_nominated_node_names_off_and_the_autoscaler_stops_seeing_waiting_gang_members() -> None:
    """1.34 has no Workload API, so no scenario of 1.34 has gangs; the release's default reaches the
    scheduler through the run configuration, and there it changes the gang story: a member waiting at
    Permit is not nominated, so the autoscaler counts its node as free (KEP-5278)."""
    base = load_scenario(SCENARIOS / "scale-down-race.yaml")
    base = msgspec.structs.replace(base, scheduler=msgspec.structs.replace(base.scheduler, feature_gates={}))
    runs = {}
    for version in ("1.34", "1.35"):
        scenario = msgspec.structs.replace(base, kubernetes=make_profile(version))
        assert Scheduler(kubernetes=profile_config(scenario.kubernetes)).profile.enabled(
            "NominatedNodeNameForExpectation") is (version != "1.34")
        runs[version] = simulate(scenario, 0)
    nominated = {v: set(_nominated(run)) for v, run in runs.items()}
    assert nominated == {"1.34": {False}, "1.35": {True}}
    assert [p for _, p in runs["1.34"].entries[1:]] != [p for _, p in runs["1.35"].entries[1:]]


def _nominated(run: Any) -> list[bool]:
    """Each PodReserved's `nominated`: whether the waiting member's node was made visible to others."""
    return [event.nominated for offset, payload in run.entries for event in decode_record(payload, offset).events
            if isinstance(event, PodReserved)]


# ---------------------------------------------------------------- flags and dumps


def test_feature_gate_and_runtime_config_flags_parse_as_upstream() -> None:
    assert parse_feature_gates("GenericWorkload=true, DRADeviceTaints=False,") == {"GenericWorkload": True,
                                                                                   "DRADeviceTaints": False}
    assert parse_runtime_config(f"{V1ALPHA1}=true") == {V1ALPHA1: True}
    assert parse_runtime_config(V1ALPHA1) == {V1ALPHA1: True}  # a bare group/version means true
    for text, words in (("GenericWorkload=maybe", "expected true or false"), ("Nope=true", "unknown feature gate"),
                        ("=true", "missing")):
        with pytest.raises(FieldError) as info:
            parse_feature_gates(text)
        assert info.value.path == "--feature-gates" and words in info.value.message
    with pytest.raises(FieldError):
        parse_runtime_config("apps/v9=true")


def test_flags_override_the_scenario_entry_by_entry() -> None:
    flags = ProfileFlags(None, {"DRADeviceTaints": True}, {})
    scenario = load_scenario(SCENARIOS / "gang-quickstart.yaml", flags=flags)
    assert scenario.kubernetes.version == "1.35" and scenario.kubernetes.enabled("DRADeviceTaints")
    assert scenario.kubernetes.enabled("GangScheduling")  # the file's gates stay
    with pytest.raises(ScenarioError) as info:  # the file's GangScheduling does not exist in 1.37
        load_scenario(SCENARIOS / "gang-quickstart.yaml", flags=ProfileFlags("1.37"))
    assert info.value.path == "spec.kubernetes.featureGates.GangScheduling"
    with pytest.raises(ScenarioError) as info:  # an error of the flag itself names the flag
        load_scenario(SCENARIOS / "dra-quickstart.yaml", flags=ProfileFlags("1.37", {"GangScheduling": True}))
    assert info.value.path == "--feature-gates"


def test_sim_flags_and_summary(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert main(["sim", str(SCENARIOS / "dra-quickstart.yaml"), "-o", "json", "--kubernetes-version", "1.35",
                 "--feature-gates", "DRADeviceTaints=true"]) == 0
    summary = json.loads(capsys.readouterr().out)
    bugs_apart = {k: v for k, v in summary["kubernetes"].items() if k != "upstreamBugs"}  # open bugs of 1.35 listed
    assert bugs_apart == {"version": "1.35", "featureGates": {"DRADeviceTaints": True}}
    assert main(["sim", str(SCENARIOS / "dra-quickstart.yaml"), "-o", "json"]) == 0
    own = json.loads(capsys.readouterr().out)["kubernetes"]
    assert {k: v for k, v in own.items() if k != "upstreamBugs"} == {"version": DEFAULT_VERSION, "featureGates": {}}
    assert main(["sim", str(SCENARIOS / "gang-quickstart.yaml"), "--kubernetes-version", "1.37"]) == 2
    assert "GangScheduling" in capsys.readouterr().err
    assert main(["sim", str(SCENARIOS / "dra-quickstart.yaml"), "--runtime-config", "nope/v1=true"]) == 2
    assert "--runtime-config" in capsys.readouterr().err


def test_a_dump_picks_the_only_release_serving_its_api_versions() -> None:
    profile = dump_profile([(V1ALPHA1, "Workload"), ("v1", "Pod")])
    assert profile.version == "1.35"
    assert profile.enabled("GenericWorkload") and profile.enabled("GangScheduling") and V1ALPHA1 in \
        profile.runtime_config  # an object of an API proves its gates and runtime-config were on
    assert dump_profile([("v1", "Pod")]).version == DEFAULT_VERSION
    assert dump_profile([("scheduling.k8s.io/v1beta1", "PodGroup")]).enabled("GenericWorkload")
    assert dump_profile([], "1.34").version == "1.34"
    with pytest.raises(FieldError) as info:  # the flag says 1.37, the objects say 1.35
        dump_profile([(V1ALPHA1, "Workload")], "1.37")
    assert "does not serve Workload" in info.value.message
    with pytest.raises(FieldError) as info:  # the flag turns off what the objects prove
        dump_profile([(V1ALPHA1, "Workload")], gates={"GenericWorkload": False})
    assert "GenericWorkload" in info.value.message
    with pytest.raises(FieldError) as info:
        dump_profile([(V1ALPHA1, "Workload"), ("scheduling.k8s.io/v1beta1", "Workload")])
    assert "no Kubernetes release serves all" in info.value.message
    assert set(API_VERSIONS) >= {V1ALPHA1}


def test_dump_commands_take_the_flags(capsys: pytest.CaptureFixture[str]) -> None:
    dump = str(ROOT / "tests" / "fixtures" / "audit" / "gang-waiting.yaml")
    assert main(["audit", "-f", dump, "-o", "json"]) == 0
    capsys.readouterr()
    assert main(["audit", "-f", dump, "--kubernetes-version", "1.37"]) == 2
    assert "does not serve Workload" in capsys.readouterr().err
    assert main(["schedule", "-f", dump, "--feature-gates", "GenericWorkload=false"]) == 2
    assert "GenericWorkload" in capsys.readouterr().err


def test_the_builders_1_35_entry_is_the_scenarios_entry() -> None:
    assert doc()["spec"]["kubernetes"] == KUBERNETES_1_35_GANGS
    assert with_1_35_gangs({"spec": {}})["spec"]["kubernetes"] == KUBERNETES_1_35_GANGS


def test_whatif_checks_the_node_groups_against_the_dumps_release(capsys: pytest.CaptureFixture[str],
                                                                 tmp_path: Path) -> None:
    groups = tmp_path / "groups.yaml"
    group_doc = group("g", max=1, template=node_template(gpu=0))
    group_doc["resourceSlices"] = [{"spec": {"driver": "gpu.example.com", "devices": [
        {"name": "d0", "taints": [{"key": "k", "effect": "NoSchedule"}]}]}}]
    groups.write_text(yaml.safe_dump([group_doc]))
    dump = str(ROOT / "tests" / "fixtures" / "audit" / "gang-waiting.yaml")  # v1alpha1 Workloads: 1.35
    assert main(["whatif", "-f", dump, "--node-groups", str(groups)]) == 2
    err = capsys.readouterr().err
    assert "[0].resourceSlices[0].spec.devices[0].taints" in err and "DRADeviceTaints" in err
    assert main(["whatif", "-f", dump, "--node-groups", str(groups), "--feature-gates", "DRADeviceTaints=true"]) == 0
