"""scheduler-plugins Coscheduling PodGroups (`scheduling.x-k8s.io/v1alpha1`, pods joined by the label
`scheduling.x-k8s.io/pod-group`) as gangs in `dralab audit` and `dralab schedule`: one fixture per rule, exact
JSON through the CLI and the functions, bad PodGroup manifests, and schedule's all-or-nothing placement of such
gangs on seeded random dumps (the Workload dumps of test_audit_gang, turned into PodGroups)."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from test_audit_gang import random_dump

from dralab.cli import main
from dralab.core.analysis.audit import audit, schedule
from dralab.core.analysis.audit_gang import GangId, gang_policy, pod_gang
from dralab.core.analysis.audit_snapshot import is_pending
from dralab.core.dra.api import dump_objects, parse_documents
from dralab.core.kube.workloads import POD_GROUP_LABEL

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "audit"


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def cli(capsys: pytest.CaptureFixture[str], command: str, fixture: str) -> dict[str, Any]:
    code, out, err = run(capsys, command, "-f", str(FIXTURES / fixture), "-o", "json")
    assert code == 0, err
    result: dict[str, Any] = json.loads(out)
    return result


def load(fixture: str) -> list[Any]:
    return list(yaml.safe_load_all((FIXTURES / fixture).read_text()))


def pod(name: str, reason: str | None, message: str, node: str | None, missing: list[str],
        bound_to: str | None = None, namespace: str = "default") -> dict[str, Any]:
    return {"namespace": namespace, "name": name, "node": bound_to, "reason": reason, "message": message,
            "closest": {"node": node, "missing": missing}}


def bound(name: str, node: str, namespace: str = "default") -> dict[str, Any]:
    return pod(name, None, "", node, [], node, namespace)


def fits(name: str, n: int = 2) -> dict[str, Any]:
    return pod(name, None, f"fits on {n} node(s), e.g. node-a", "node-a", [])


def too_few(name: str, have: int, need: int, gang: str) -> dict[str, Any]:
    message = (f"pre-filter pod {name} cannot find enough sibling pods, current pods number: {have}, "
               f"minMember of group: {need}")
    return pod(name, "gang", message, None, [f"{need - have} more pod(s) of gang {gang}"])


def short(name: str, group: str, gap: list[tuple[str, str, str, str]]) -> dict[str, Any]:
    """A pod held by its PodGroup's minResources: gap is (resource, wanted, free, missing amount)."""
    shown = "; ".join(f"{res}: {want} wanted, {free} free" for res, want, free, _ in gap)
    return pod(name, "gang", f"minResources of PodGroup {group} are not free on the Ready nodes (resource gap): "
                             f"{shown}", None, [f"{more} more {res} free for PodGroup {group}"
                                                for res, _, _, more in gap])


def names(result: dict[str, Any]) -> list[tuple[str, str]]:
    return [(b["name"], b["node"]) for b in result["bindings"]]


# --- reading ---------------------------------------------------------------------------------------------


def test_inventory_reads_pod_groups_and_dumps_them_back() -> None:
    inv = parse_documents(load("podgroup-waiting.yaml"), "podgroup-waiting.yaml")
    assert sorted(inv.pod_groups) == ["batch/etl", "default/infer", "default/train"]
    assert sorted(inv.workloads) == ["default/job-1"]
    assert inv.other == []
    dumped = dump_objects(inv)
    assert [o["metadata"]["name"] for o in dumped if o["kind"] == "PodGroup"] == ["train", "infer", "etl"]
    assert parse_documents(dumped).pod_groups == inv.pod_groups
    typed = {"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroupList",
             "items": [{"metadata": {"name": "pg"}, "spec": {"minMember": 2}}]}
    assert list(parse_documents([typed]).pod_groups) == ["default/pg"]
    # the older scheduler-plugins group, and 1.36's standalone PodGroup in scheduling.k8s.io, are not modelled
    for api in ("scheduling.sigs.k8s.io/v1alpha1", "scheduling.k8s.io/v1alpha2"):
        other = parse_documents([{"apiVersion": api, "kind": "PodGroup", "metadata": {"name": "pg"}, "spec": {}}])
        assert other.pod_groups == {} and len(other.other) == 1


def test_pod_gang_maps_both_apis_to_one_key_and_min_count() -> None:
    inv = parse_documents(load("podgroup-waiting.yaml"))
    pods = inv.pods
    gid = pod_gang(pods["default/train-0"])
    assert gid == GangId("default/train", "PodGroup", "default/train")
    assert gang_policy(inv, gid).min_count == 4
    assert pod_gang(pods["batch/etl-0"]) == GangId("batch/etl", "PodGroup", "batch/etl")
    # the workloadRef wins over the label
    assert pod_gang(pods["default/both"]) == GangId("default/job-1/driver", "Workload", "default/job-1", "driver")
    assert gang_policy(inv, pod_gang(pods["default/both"])).min_count is None  # basic
    assert gang_policy(inv, GangId("default/x", "PodGroup", "default/x")).missing == "PodGroup default/x"
    plain = copy.deepcopy(pods["default/train-0"])
    plain["metadata"]["labels"][POD_GROUP_LABEL] = ""  # an empty label is no group, as upstream
    assert pod_gang(plain) is None


# --- the rules -------------------------------------------------------------------------------------------


WAITING = [bound("etl-0", "node-a", "batch"),
           fits("both"),  # workloadRef (basic policy) wins over its label naming a PodGroup that does not exist
           fits("infer-0"), fits("infer-1"),
           pod("orphan", "missing", "PodGroup default/etl not found", None, ["PodGroup default/etl"]),  # other ns
           too_few("train-0", 2, 4, "default/train"),  # train-old (Failed) does not count
           too_few("train-1", 2, 4, "default/train"),
           bound("train-old", "node-b")]


def test_below_min_member_missing_pod_group_and_workload_ref_wins(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli(capsys, "audit", "podgroup-waiting.yaml")["pods"] == WAITING
    assert audit(parse_documents(load("podgroup-waiting.yaml")))["pods"] == WAITING
    result = cli(capsys, "schedule", "podgroup-waiting.yaml")
    assert names(result) == [("infer-0", "node-a"), ("infer-1", "node-a"), ("both", "node-a")]
    by_name = {p["name"]: p for p in WAITING}
    assert result["pending"] == [by_name["train-0"], by_name["train-1"], by_name["orphan"]]


def test_table_names_the_plugin_message(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "audit", "-f", str(FIXTURES / "podgroup-waiting.yaml"))
    assert code == 0
    assert ("train-0  gang     -        pre-filter pod train-0 cannot find enough sibling pods, current pods "
            "number: 2, minMember of group: 4") in out
    assert "orphan   missing  -        PodGroup default/etl not found" in out


def test_pod_group_without_room_for_min_member(capsys: pytest.CaptureFixture[str]) -> None:
    def no_room(name: str, node: str) -> dict[str, Any]:
        return pod(name, "gang", "room for 2 of the 3 pods gang default/train needs (minMember 3, 0 bound)", node,
                   ["gang default/train: 2 of 3 pods fit at once"])

    expected = [no_room("train-0", "node-a"), no_room("train-1", "node-b"), no_room("train-2", "node-a"),
                fits("web")]
    assert cli(capsys, "audit", "podgroup-too-big.yaml")["pods"] == expected
    assert audit(parse_documents(load("podgroup-too-big.yaml")))["pods"] == expected
    # two workers were placed, then rolled back: no part of the gang binds, web gets node-a
    result = cli(capsys, "schedule", "podgroup-too-big.yaml")
    assert names(result) == [("web", "node-a")]
    assert result["pending"] == expected[:3]


def test_pod_group_bound_to_min_member_judges_the_others_alone() -> None:
    docs = load("podgroup-too-big.yaml")
    for item in docs[0]["items"]:
        if item["kind"] == "PodGroup":
            item["spec"]["minMember"] = 2
    result = schedule(parse_documents(docs))
    assert names(result) == [("train-0", "node-a"), ("train-1", "node-b"), ("web", "node-a")]
    assert [p["reason"] for p in result["pending"]] == ["capacity"]  # train-2: no GPUs left


RESOURCES = [bound("etl", "node-a"),
             short("render-0", "default/render",
                   [("memory", "256Gi", "208Gi", "48Gi"), ("nvidia.com/gpu", "4", "0", "4")]),
             bound("serve-0", "node-b"),
             fits("serve-1"),  # cpu 44 wanted: 40 free, plus the 8 its running sibling serve-0 holds
             short("train-0", "default/train", [("cpu", "48", "40", "8")]),  # node-c (NotReady) does not count
             short("train-1", "default/train", [("cpu", "48", "40", "8")])]


def test_min_resources_not_free(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli(capsys, "audit", "podgroup-resources.yaml")["pods"] == RESOURCES
    assert audit(parse_documents(load("podgroup-resources.yaml")))["pods"] == RESOURCES
    result = cli(capsys, "schedule", "podgroup-resources.yaml")
    assert names(result) == [("serve-1", "node-a")]
    by_name = {p["name"]: p for p in RESOURCES}
    # render-0 comes after serve-1 in the queue: serve-1's 16Gi are no longer free
    assert result["pending"] == [by_name["train-0"], by_name["train-1"],
                                 short("render-0", "default/render", [("memory", "256Gi", "192Gi", "64Gi"),
                                                                      ("nvidia.com/gpu", "4", "0", "4")])]


def _resources_with(change: Any) -> list[Any]:
    docs = load("podgroup-resources.yaml")
    change({f"{o['kind']}/{o['metadata']['name']}": o for o in docs[0]["items"]}, docs[0]["items"])
    return docs


def test_min_resources_counted_on_ready_nodes_only() -> None:
    def ready(objs: dict[str, Any], _: list[Any]) -> None:
        objs["Node/node-c"]["status"]["conditions"][0]["status"] = "True"

    pods = {p["name"]: p for p in audit(parse_documents(_resources_with(ready)))["pods"]}
    assert pods["train-0"] == fits("train-0", 3)  # 72 cpu free with node-c
    assert pods["render-0"] == short("render-0", "default/render", [("nvidia.com/gpu", "4", "0", "4")])  # 336Gi


def test_min_resources_in_schedule_see_the_bindings_of_the_pass() -> None:
    def hog(objs: dict[str, Any], items: list[Any]) -> None:
        extra = copy.deepcopy(objs["Pod/render-0"])
        extra["metadata"]["name"] = "hog"
        del extra["metadata"]["labels"][POD_GROUP_LABEL]
        extra["spec"]["priority"] = 100
        extra["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "8"
        items.append(extra)

    docs = _resources_with(hog)
    # audit judges every pod on the dump as it is: serve-1 fits
    assert {p["name"]: p for p in audit(parse_documents(docs))["pods"]}["serve-1"] == fits("serve-1")
    # schedule binds hog first (priority 100): then only 40 cpu are free for serve (44 with serve-0's 8)
    result = schedule(parse_documents(docs))
    assert names(result) == [("hog", "node-a")]
    assert {p["name"]: p for p in result["pending"]}["serve-1"] == short(
        "serve-1", "default/serve", [("cpu", "44", "40", "4")])


def test_min_resources_amounts_and_pods() -> None:
    def tweak(objs: dict[str, Any], _: list[Any]) -> None:
        objs["PodGroup/train"]["spec"]["minResources"] = {"cpu": "40500m", "memory": "100Mi"}
        objs["PodGroup/render"]["spec"]["minResources"] = {"example.com/foo": "1"}
        for node in ("node-a", "node-b"):
            objs[f"Node/{node}"]["status"]["allocatable"]["pods"] = "2"  # one taken on each: 2 pods free

    pods = {p["name"]: p for p in audit(parse_documents(_resources_with(tweak)))["pods"]}
    assert pods["train-0"] == short("train-0", "default/train", [("cpu", "40500m", "40", "500m")])
    assert pods["render-0"] == short("render-0", "default/render", [("example.com/foo", "1", "0", "1")])
    # minMember pods must be free too (upstream adds pods: minMember to minResources)
    def crowded(objs: dict[str, Any], items: list[Any]) -> None:
        tweak(objs, items)
        objs["PodGroup/train"]["spec"] = {"minMember": 2, "minResources": {"cpu": "1"}}
        objs["Node/node-b"]["status"]["allocatable"]["pods"] = "1"

    pods = {p["name"]: p for p in audit(parse_documents(_resources_with(crowded)))["pods"]}
    assert pods["train-0"] == short("train-0", "default/train", [("pods", "2", "1", "1")])


# --- bad input -------------------------------------------------------------------------------------------

POD_GROUP = {"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup",
             "metadata": {"name": "train", "namespace": "default"}, "spec": {"minMember": 2}}


def _with(path: str, value: Any) -> dict[str, Any]:
    obj = copy.deepcopy(POD_GROUP)
    *parents, last = path.split(".")
    target: Any = obj
    for key in parents:
        target = target.setdefault(key, {})
    if value is None:
        del target[last]
    else:
        target[last] = value
    return obj


@pytest.mark.parametrize(("objects", "where", "what"), [
    ([_with("spec.minMember", None)], "items[1].spec.minMember", "missing required field"),
    ([_with("spec.minMember", 0)], "items[1].spec.minMember", "must be >= 1"),
    ([_with("spec.minMember", "2")], "items[1].spec.minMember", "expected int"),
    ([_with("spec", None)], "items[1].spec", "missing required field"),
    ([_with("spec.minMembers", 2)], "items[1].spec.minMembers", "did you mean `minMember`"),
    ([_with("spec.minResources", {"cpu": "lots"})], "items[1].spec.minResources.cpu", "invalid quantity"),
    ([_with("spec.minResources", {"cpu": "-1"})], "items[1].spec.minResources.cpu", "greater than or equal to 0"),
    ([_with("spec.minResources", {"bad name!": "1"})], "items[1].spec.minResources.bad name!", "resource name"),
    ([_with("spec.scheduleTimeoutSeconds", -5)], "items[1].spec.scheduleTimeoutSeconds", "must be >= 0"),
    ([_with("metadata.name", "Train_0")], "items[1].metadata.name", ""),
    ([_with("apiVersion", "scheduling.x-k8s.io/v1beta1")], "items[1].apiVersion",
     "expected `scheduling.x-k8s.io/v1alpha1` (scheduler-plugins), got `scheduling.x-k8s.io/v1beta1`"),
    ([POD_GROUP, _with("spec.minMember", 1)], "items[2].metadata.name", "duplicate PodGroup `default/train`"),
    ([{"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroupList",
       "items": [{"metadata": {"name": "pg"}, "spec": {"minMember": -1}}]}],
     "items[1].items[0].spec.minMember", "must be >= 1"),
])
def test_bad_pod_group_exits_2_with_file_and_field(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                                   objects: list[dict[str, Any]], where: str, what: str) -> None:
    node = load("podgroup-waiting.yaml")[0]["items"][0]
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": [node, *objects]}))
    for command in ("audit", "schedule"):
        code, out, err = run(capsys, command, "-f", str(bad))
        assert code == 2 and out == "", err
        assert f"{bad}: {where}: " in err and what in err, err


def test_duplicate_pod_group_across_files_and_documents(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    one, two = tmp_path / "one.yaml", tmp_path / "two.yaml"
    one.write_text(yaml.safe_dump(POD_GROUP))
    two.write_text(yaml.safe_dump_all([{**POD_GROUP, "metadata": {"name": "other"}}, _with("spec.minMember", 1)]))
    code, out, err = run(capsys, "audit", "-f", str(one), "-f", str(two))
    assert code == 2 and out == ""
    assert (f"{two}: documents[1].metadata.name: duplicate PodGroup `default/train` (also in {one}), and the copies "
            "differ: first at `spec.minMember`") in err, err
    two.write_text(yaml.safe_dump_all([{**POD_GROUP, "metadata": {"name": "other"}}, POD_GROUP]))
    code, out, err = run(capsys, "audit", "-f", str(one), "-f", str(two))
    assert code == 0, err  # an equal copy: the same object, read once


# --- schedule never binds part of a PodGroup gang ----------------------------------------------------------


def as_pod_groups(docs: list[dict[str, Any]], seed: int, *, min_resources: bool = True) -> list[dict[str, Any]]:
    """The Workload gangs of a random dump as PodGroups (minMember = minCount; some with minResources), their
    pods joined by the label instead of the workloadRef."""
    out = []
    for i, doc in enumerate(copy.deepcopy(docs)):
        if doc["kind"] == "Workload":
            spec: dict[str, Any] = {"minMember": doc["spec"]["podGroups"][0]["policy"]["gang"]["minCount"]}
            if min_resources and (seed + i) % 3 == 0:
                spec["minResources"] = {"cpu": str(8 * ((seed + i) % 7))}
            doc = {"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup", "metadata": doc["metadata"],
                   "spec": spec}
        elif doc["kind"] == "Pod" and "workloadRef" in doc["spec"]:
            name = doc["spec"].pop("workloadRef")["name"]
            doc["metadata"]["labels"] = {POD_GROUP_LABEL: name}
        out.append(doc)
    return out


@pytest.mark.parametrize("seed", range(30))
def test_schedule_never_binds_part_of_a_pod_group(seed: int) -> None:
    docs = as_pod_groups(random_dump(seed), seed)
    inv = parse_documents(docs)
    assert inv.workloads == {} and inv.pod_groups
    result = schedule(inv)
    bound_now = {b["name"] for b in result["bindings"]}
    assert len(bound_now) == len(result["bindings"])
    for key, group in inv.pod_groups.items():
        need = group["spec"]["minMember"]
        members = [p for p in inv.pods.values()
                   if (p["metadata"].get("labels") or {}).get(POD_GROUP_LABEL) == group["metadata"]["name"]]
        already = sum(1 for p in members if not is_pending(p))
        placed = sum(1 for p in members if p["metadata"]["name"] in bound_now)
        assert placed == 0 or already + placed >= need, (key, need, already, placed)
    assert all(p["reason"] is not None for p in result["pending"])
    held = {p["name"] for p in result["pending"] if p["message"].startswith("minResources of PodGroup")}
    assert not held & bound_now
    # without minResources, PodGroup gangs bind exactly as the same Workload gangs do
    workloads = random_dump(seed)
    assert names(schedule(parse_documents(as_pod_groups(workloads, seed, min_resources=False)))) == names(
        schedule(parse_documents(workloads)))
