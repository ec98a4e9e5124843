"""Older resource.k8s.io versions converted to v1 as kube-apiserver does (core/dra/older.py), every error of the
input listed (ManifestErrors), and several files read as one cluster (core/dra/merge.py). Issue 23."""

from __future__ import annotations

import copy
import dataclasses
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from dralab.cli import main
from dralab.core.dra.api import ManifestError, ManifestErrors, load_objects, parse_documents
from dralab.core.dra.merge import first_difference
from dralab.core.dra.older import from_v1, path_in_file, to_v1
from dralab.core.kube.fields import FieldError
from dralab.core.kube.versions import dump_profile, make_profile

OLDER = Path(__file__).parent / "fixtures" / "dumps" / "older"
V1, B1, B2, A3 = ("resource.k8s.io/v1", "resource.k8s.io/v1beta1", "resource.k8s.io/v1beta2",
                  "resource.k8s.io/v1alpha3")
BETAS = {B1: True, B2: True}


def profile(version: str = "1.34", runtime: dict[str, bool] | None = None) -> Any:
    return make_profile(version, None, BETAS if runtime is None else runtime)


def read(*docs: Any, version: str = "1.34", runtime: dict[str, bool] | None = None) -> Any:
    return parse_documents(list(docs), "in.yaml", profile=profile(version, runtime))


def refusal(*docs: Any, **kw: Any) -> ManifestError:
    with pytest.raises(ManifestError) as info:
        read(*docs, **kw)
    return info.value


def beta1_slice(**spec: Any) -> dict[str, Any]:
    body = {"driver": "gpu.example.com", "nodeName": "node-a",
            "pool": {"name": "node-a", "generation": 1, "resourceSliceCount": 1},
            "devices": [{"name": "gpu-0", "basic": {"attributes": {"index": {"int": 0}, "model": {"string": "A100"}},
                                                    "capacity": {"memory": {"value": "80Gi"}}}}]}
    body.update(spec)
    return {"apiVersion": B1, "kind": "ResourceSlice", "metadata": {"name": "s"}, "spec": body}


def beta1_claim(*requests: dict[str, Any]) -> dict[str, Any]:
    default = [{"name": "gpu", "deviceClassName": "gpu.example.com"}]
    return {"apiVersion": B1, "kind": "ResourceClaim", "metadata": {"name": "c", "namespace": "ml"},
            "spec": {"devices": {"requests": list(requests) or default}}}


def device_class(api_version: str = B1) -> dict[str, Any]:
    return {"apiVersion": api_version, "kind": "DeviceClass", "metadata": {"name": "gpu.example.com"},
            "spec": {"selectors": [{"cel": {"expression": "device.driver == 'gpu.example.com'"}}]}}


# --- one test per conversion rule -----------------------------------------------------------------------------


def test_rule1_basic_device_fields_become_the_devices_own() -> None:
    inv = read(beta1_slice())
    device = inv.slices["s"].devices[0]
    assert device.attributes["gpu.example.com/index"].value == 0
    assert "gpu.example.com/memory" in device.capacity
    manifest = inv.slices["s"].manifest
    assert manifest["apiVersion"] == V1 and "basic" not in manifest["spec"]["devices"][0]
    assert manifest["spec"]["devices"][0]["attributes"]["model"] == {"string": "A100"}


def test_rule1_device_without_basic_and_fields_outside_basic() -> None:
    inv = read(beta1_slice(devices=[{"name": "gpu-0"}]))
    assert inv.slices["s"].devices[0].attributes == {}
    err = refusal(beta1_slice(devices=[{"name": "gpu-0", "attributes": {}}]))  # v1's shape in a v1beta1 object
    assert err.path == "spec.devices[0].attributes" and "unknown field `attributes`" in err.message
    err = refusal(beta1_slice(devices=[{"name": "gpu-0", "basic": {"attributes": {}, "size": 1}}]))
    assert err.path == "spec.devices[0].basic.size"


def test_rule2_empty_node_name_and_false_all_nodes_are_unset() -> None:
    inv = read(beta1_slice(nodeName="", allNodes=True))
    assert inv.slices["s"].node_selection.all_nodes and "nodeName" not in inv.slices["s"].manifest["spec"]
    inv = read(beta1_slice(allNodes=False))
    assert inv.slices["s"].node_selection.node_name == "node-a"
    # v1beta2 and v1 have pointers: false is a value there, and refused as v1 refuses it
    err = refusal({**beta1_slice(allNodes=False), "apiVersion": B2, "spec": {
        **beta1_slice(allNodes=False)["spec"], "devices": [{"name": "gpu-0"}]}})
    assert (err.path, err.message) == ("spec.allNodes", "Invalid value: false: must be either unset or set to true")


def test_rule3_request_fields_move_under_exactly() -> None:
    request = {"name": "gpu", "deviceClassName": "gpu.example.com", "allocationMode": "ExactCount", "count": 2,
               "selectors": [{"cel": {"expression": "device.attributes['gpu.example.com'].index >= 0"}}],
               "tolerations": [{"key": "k", "operator": "Exists"}]}
    inv = read(beta1_claim(request))
    spec = inv.claims["ml/c"].manifest["spec"]["devices"]["requests"][0]
    assert spec == {"name": "gpu", "exactly": {k: v for k, v in request.items() if k != "name"}}
    assert inv.claims["ml/c"].requests[0].exactly.count == 2


def test_rule3_first_available_stays_and_both_is_refused_by_v1_validation() -> None:
    sub = {"name": "big", "deviceClassName": "gpu.example.com"}
    inv = read(beta1_claim({"name": "gpu", "firstAvailable": [sub]}))
    assert inv.claims["ml/c"].manifest["spec"]["devices"]["requests"][0] == {"name": "gpu", "firstAvailable": [sub]}
    err = refusal(beta1_claim({"name": "gpu", "deviceClassName": "gpu.example.com", "firstAvailable": [sub]}))
    assert err.path == "spec.devices.requests[0]" and "exactly one" in err.message.lower()


def test_rule3_zero_values_are_not_set() -> None:
    """hasAnyMainRequestFieldsSet: "" and 0 are Go's zero values, so nothing moves under exactly."""
    err = refusal(beta1_claim({"name": "gpu", "deviceClassName": "", "count": 0}))
    assert err.path == "spec.devices.requests[0]"
    assert first_difference(to_v1(beta1_claim({"name": "gpu", "count": 0}))["spec"],
                            {"devices": {"requests": [{"name": "gpu"}]}}) is None


def test_template_requests_are_converted_and_paths_name_the_file() -> None:
    template = {"apiVersion": B1, "kind": "ResourceClaimTemplate", "metadata": {"name": "t", "namespace": "ml"},
                "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "deviceClassName": "gpu.example.com",
                                                            "count": -1}]}}}}
    err = refusal(template)
    assert err.path == "spec.spec.devices.requests[0].count"  # v1's path is ...requests[0].exactly.count
    template["spec"]["spec"]["devices"]["requests"][0]["count"] = 1
    inv = read(template)
    assert inv.templates["ml/t"]["spec"]["spec"]["devices"]["requests"][0]["exactly"]["count"] == 1
    err = refusal(beta1_slice(devices=[{"name": "gpu-0", "basic": {"attributes": {"Bad Name!": {"int": 1}}}}]))
    assert err.path.startswith("spec.devices[0].basic.attributes.Bad Name!")


def test_rule4_v1beta2_and_device_class_are_copied() -> None:
    inv = read(device_class(B2), device_class(B1) | {"metadata": {"name": "other"}})
    assert inv.classes["gpu.example.com"].manifest == device_class(V1)
    assert path_in_file("spec.devices[0].attributes", B2, "ResourceSlice") == "spec.devices[0].attributes"


def test_versions_served_per_release() -> None:
    for version in ("1.34", "1.35", "1.36", "1.37"):
        assert "gpu.example.com" in read(device_class(B1), version=version).classes
    err = refusal(device_class(A3))
    assert (err.path, err.message) == (
        "apiVersion", "Kubernetes 1.34 does not serve DeviceClass in `resource.k8s.io/v1alpha3` (served by "
        "1.31-1.33); it serves `resource.k8s.io/v1beta1`, `resource.k8s.io/v1beta2`, `resource.k8s.io/v1`")
    err = refusal(device_class(B1), runtime={})  # KEP-3136: a beta API introduced after 1.24 is off by default
    assert err.path == "apiVersion" and "resource.k8s.io/v1beta1=true" in err.message
    # without a profile (the legacy 1.35 model) only v1 is read, as before
    with pytest.raises(ManifestError, match="expected `resource.k8s.io/v1`"):
        parse_documents([device_class(B1)])


def test_dump_release_of_beta_dra_objects_is_the_earliest() -> None:
    assert dump_profile([(B1, "ResourceSlice")]).version == "1.34"
    assert dump_profile([(B2, "ResourceClaim"), (V1, "DeviceClass")]).version == "1.34"
    assert B1 in dump_profile([(B1, "ResourceSlice")]).runtime_config
    assert dump_profile([(V1, "DeviceClass")]).version == "1.37"
    with pytest.raises(FieldError, match="v1beta1"):
        dump_profile([(B1, "ResourceSlice")], runtime_config={B1: False})


# --- round trip: v1 -> older -> v1 gives back the object (hypothesis) ------------------------------------------

_names = st.from_regex(r"[a-z][a-z0-9]{0,6}", fullmatch=True)
_attr = st.one_of(st.builds(lambda v: {"int": v}, st.integers(-5, 5)),
                  st.builds(lambda v: {"string": v}, _names), st.builds(lambda v: {"bool": v}, st.booleans()))
_device = st.fixed_dictionaries(
    {"name": _names},
    optional={"attributes": st.dictionaries(_names, _attr, max_size=3),
              "capacity": st.dictionaries(_names, st.builds(lambda n: {"value": f"{n}Gi"}, st.integers(1, 9)),
                                          max_size=2),
              "taints": st.lists(st.fixed_dictionaries({"key": _names, "effect": st.sampled_from(["NoSchedule"])}),
                                 max_size=1),
              "bindsToNode": st.booleans()})
_slice = st.builds(lambda devices, all_nodes: {
    "apiVersion": V1, "kind": "ResourceSlice", "metadata": {"name": "s"},
    "spec": {"driver": "gpu.example.com", "pool": {"name": "p", "generation": 0, "resourceSliceCount": 1},
             **({"allNodes": True} if all_nodes else {"nodeName": "node-a"}), "devices": devices}},
    st.lists(_device, max_size=3, unique_by=lambda d: d["name"]), st.booleans())
_exactly = st.fixed_dictionaries(
    {"deviceClassName": _names},
    optional={"allocationMode": st.sampled_from(["ExactCount", "All"]), "count": st.integers(1, 4),
              "adminAccess": st.booleans(),
              "selectors": st.lists(st.builds(lambda e: {"cel": {"expression": e}}, _names), max_size=2),
              "tolerations": st.lists(st.fixed_dictionaries({"key": _names, "operator": st.just("Exists")}),
                                      max_size=1)})
_request = st.one_of(
    st.builds(lambda n, e: {"name": n, "exactly": e}, _names, _exactly),
    st.builds(lambda n, subs: {"name": n, "firstAvailable": subs}, _names,
              st.lists(st.builds(lambda n, c: {"name": n, "deviceClassName": c}, _names, _names),
                       min_size=1, max_size=2)))
_claim_spec = st.builds(lambda rs: {"devices": {"requests": rs}},
                        st.lists(_request, max_size=3, unique_by=lambda r: r["name"]))
_claim = st.builds(lambda s: {"apiVersion": V1, "kind": "ResourceClaim", "metadata": {"name": "c"}, "spec": s},
                   _claim_spec)
_template = st.builds(lambda s: {"apiVersion": V1, "kind": "ResourceClaimTemplate", "metadata": {"name": "t"},
                                 "spec": {"spec": s}}, _claim_spec)


@settings(max_examples=150, deadline=None)
@given(obj=st.one_of(_slice, _claim, _template), version=st.sampled_from([A3, B1, B2]))
def test_round_trip(obj: dict[str, Any], version: str) -> None:
    older = from_v1(obj, version)
    assert older["apiVersion"] == version
    if version != B2 and obj["kind"] == "ResourceSlice":
        assert all("basic" in d and set(d) == {"name", "basic"} for d in older["spec"]["devices"])
    assert first_difference(to_v1(older), obj) is None
    assert older != obj or version == B2


@settings(max_examples=60, deadline=None)
@given(obj=_slice)
def test_round_trip_slices_read_the_same(obj: dict[str, Any]) -> None:
    """A v1beta1 copy of a valid v1 slice reads into the same model as the v1 one."""
    v1 = read(obj).slices["s"]
    older = read(from_v1(obj, B1)).slices["s"]
    assert older.node_selection == v1.node_selection and len(older.devices) == len(v1.devices)
    for a, b in zip(older.devices, v1.devices, strict=True):  # Device compares by identity: field by field
        assert all(getattr(a, f.name) == getattr(b, f.name) for f in dataclasses.fields(a))


# --- every error of the input ---------------------------------------------------------------------------------


def test_all_errors_of_every_file_are_listed(tmp_path: Path) -> None:
    bad_a = tmp_path / "a.yaml"
    bad_a.write_text(yaml.safe_dump_all([device_class(B1), beta1_slice(driver="Bad_Driver"),
                                         beta1_claim({"name": "gpu", "count": 2, "deviceClassName": "x"}),
                                         {"apiVersion": "v1", "kind": "List", "items": [
                                             {"apiVersion": "v1", "kind": "Node"},
                                             {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n"}},
                                             device_class(A3)]}]))
    bad_b = tmp_path / "b.yaml"
    bad_b.write_text("apiVersion: v1\nkind: [Node\n")
    with pytest.raises(ManifestErrors) as info:
        load_objects([bad_a, bad_b, tmp_path / "missing.yaml"], profile=profile())
    where = [(e.file, e.path) for e in info.value.errors]
    assert where == [(str(bad_a), "documents[1].spec.driver"), (str(bad_a), "documents[3].items[0].metadata.name"),
                     (str(bad_a), "documents[3].items[2].apiVersion"), (str(bad_b), ""),
                     (str(tmp_path / "missing.yaml"), "")]
    text = str(info.value)
    assert text.splitlines()[-1] == "(5 errors)" and text.startswith(f"{bad_a}: documents[1].spec.driver: ")
    first = info.value
    assert (first.file, first.path) == (str(bad_a), "documents[1].spec.driver")


def test_cli_exits_2_listing_every_error(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump_all([beta1_slice(driver="Bad_Driver"), device_class(A3)]))
    code = main(["audit", "-f", str(bad), "-f", str(OLDER / "example-driver-v0.1.0" / "cluster.yaml")])
    out, err = capsys.readouterr()
    assert code == 2 and out == ""
    assert f"{bad}: documents[0].spec.driver: " in err and f"{bad}: documents[1].apiVersion: " in err, err


# --- several files, one cluster --------------------------------------------------------------------------------


def test_equal_copies_are_one_object_and_differing_ones_are_refused(tmp_path: Path) -> None:
    a, b, c = tmp_path / "a.yaml", tmp_path / "b.yaml", tmp_path / "c.yaml"
    a.write_text(yaml.safe_dump_all([device_class(B1), beta1_slice()]))
    b.write_text(yaml.safe_dump_all([device_class(V1), to_v1(beta1_slice())]))  # the same objects, served as v1
    inv = load_objects([a, b], profile=profile())
    assert list(inv.classes) == ["gpu.example.com"] and list(inv.slices) == ["s"]
    changed = copy.deepcopy(beta1_slice())
    changed["spec"]["devices"][0]["basic"]["attributes"]["model"] = {"string": "H100"}
    c.write_text(yaml.safe_dump(changed))
    with pytest.raises(ManifestError) as info:
        load_objects([a, c], profile=profile())
    assert (info.value.file, info.value.path, info.value.message) == (
        str(c), "metadata.name", f"duplicate ResourceSlice `s` (also in {a}: documents[1]), and the copies "
                                 "differ: first at `spec.devices[0].attributes.model.string`")


def test_first_difference() -> None:
    assert first_difference({"a": [1, {"b": 2}]}, {"a": [1, {"b": 2}]}) is None
    assert first_difference({"a": [1, {"b": 2}]}, {"a": [1, {"b": 3}]}) == "a[1].b"
    assert first_difference({"a": [1]}, {"a": [1, 2]}) == "a[1]"
    assert first_difference({"a": 1, "z": 1}, {"z": 1}) == "a"
    assert first_difference({"a": 1}, {"a": 1.0}) == "a"


# --- real manifests of the 1.32-1.34 era (tests/fixtures/dumps/older/README.md) --------------------------------


def audit(capsys: pytest.CaptureFixture[str], *files: str, extra: tuple[str, ...] = ()) -> tuple[int, Any, str]:
    code = main(["audit", "-o", "json", *[a for f in files for a in ("-f", str(OLDER / f))], *extra])
    out, err = capsys.readouterr()
    return code, (yaml.safe_load(out) if out else None), err


def test_example_driver_v0_1_0(capsys: pytest.CaptureFixture[str]) -> None:
    base = ["deviceclass.yaml", "cluster.yaml", "gpu-test1.yaml", "gpu-test4.yaml"]
    for files in (base, [*base, "deviceclass-v0.2.0.yaml"]):  # the equal DeviceClass of v0.2.0: read once
        code, report, err = audit(capsys, *[f"example-driver-v0.1.0/{f}" for f in files])
        assert code == 0, err
        pods = {(p["namespace"], p["name"]): p for p in report["pods"]}
        assert set(pods) == {("gpu-test1", "pod0"), ("gpu-test1", "pod1"), ("gpu-test4", "pod0"),
                             ("gpu-test4", "pod1")}
        assert all(p["reason"] is None and p["closest"]["node"] == "kind-worker" for p in pods.values()), pods
        assert (report["devices"]["total"], report["devices"]["free"]) == (8, 8)
    code, _, err = audit(capsys, *[f"example-driver-v0.1.0/{f}" for f in base],
                         extra=("--runtime-config", "resource.k8s.io/v1beta1=false"))
    assert code == 2 and "resource.k8s.io/v1beta1" in err


def test_nvidia_v25_3_0(capsys: pytest.CaptureFixture[str]) -> None:
    code, report, err = audit(capsys, "nvidia-v25.3.0/deviceclass-gpu.yaml", "nvidia-v25.3.0/cluster.yaml",
                              "nvidia-v25.3.0/gpu-test2.yaml")
    assert code == 0, err
    [pod] = report["pods"]
    assert (pod["namespace"], pod["name"], pod["reason"], pod["closest"]["node"]) == (
        "gpu-test2", "pod", None, "gpu-node-1")
    assert (report["devices"]["total"], report["devices"]["free"]) == (2, 2)


def test_schedule_and_the_dump_record_see_v1(capsys: pytest.CaptureFixture[str]) -> None:
    """`dralab schedule` places the v0.1.0 demo as upstream does (three GPUs: two from the template, one shared);
    the record whatif folds carries the converted v1 manifests (core/analysis/dump.py)."""
    from dralab.core.analysis.dump import dump_record
    from dralab.core.log.events import ResourceSlicePublished

    files = [str(OLDER / "example-driver-v0.1.0" / f)
             for f in ("deviceclass.yaml", "cluster.yaml", "gpu-test1.yaml", "gpu-test4.yaml")]
    code = main(["schedule", *[a for f in files for a in ("-f", f)]])
    out, err = capsys.readouterr()
    assert code == 0, err
    bindings = yaml.safe_load(out)["bindings"]
    devices = {r["device"] for b in bindings for c in b["claims"] for r in c["allocation"]["devices"]["results"]}
    assert len(bindings) == 4 and {b["node"] for b in bindings} == {"kind-worker"} and len(devices) == 3
    record = dump_record(load_objects(files, profile=profile())).record
    [published] = [e for e in record.events if isinstance(e, ResourceSlicePublished)]
    assert published.manifest["apiVersion"] == V1 and "basic" not in published.manifest["spec"]["devices"][0]


def test_typed_list_of_an_older_version(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """A ResourceSliceList (as the API returns it) in v1beta1: its items omit their type, and the dump's release
    and runtime-config still see them (cli/dump_release.py)."""
    cluster = yaml.safe_load_all((OLDER / "example-driver-v0.1.0" / "cluster.yaml").read_text())
    node, resource_slice = list(cluster)
    typed = tmp_path / "slices.yaml"
    typed.write_text(yaml.safe_dump({"apiVersion": B1, "kind": "ResourceSliceList", "items": [
        {k: v for k, v in resource_slice.items() if k not in ("apiVersion", "kind")}]}))
    nodes = tmp_path / "nodes.yaml"
    nodes.write_text(yaml.safe_dump_all([node, device_class(V1)]))  # the list's items: the only v1beta1 objects
    code, report, err = audit(capsys, str(typed), str(nodes))
    assert code == 0, err
    assert report["devices"]["total"] == 8


def test_nvidia_gpu_test6_selector_survives_conversion(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """gpu-test6's v1beta1 template puts its CEL selector on the request itself; converted, it sits under
    `exactly` and still picks only an A100 with an even index: of gpu-0 and gpu-1, gpu-0."""
    pods = tmp_path / "pods.yaml"
    pods.write_text(yaml.safe_dump_all([
        {"apiVersion": "v1", "kind": "Pod", "metadata": {"namespace": "gpu-test6", "name": f"pod{i}"},
         "spec": {"containers": [{"name": "ctr", "image": "ubuntu", "resources": {"claims": [{"name": "gpu"}]}}],
                  "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "a100"}],
                  "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]}}
        for i in range(2)]))
    files = [str(OLDER / "nvidia-v25.3.0" / f) for f in ("deviceclass-gpu.yaml", "cluster.yaml", "gpu-test6.yaml")]
    inv = load_objects([*files, pods], profile=profile())
    request = inv.templates["gpu-test6/a100"]["spec"]["spec"]["devices"]["requests"][0]
    assert set(request) == {"name", "exactly"}
    assert "lowerAscii" in request["exactly"]["selectors"][0]["cel"]["expression"]
    code = main(["schedule", *[a for f in [*files, str(pods)] for a in ("-f", f)]])
    out, err = capsys.readouterr()
    assert code == 0, err
    result = yaml.safe_load(out)
    [bound] = result["bindings"]
    assert [r["device"] for c in bound["claims"] for r in c["allocation"]["devices"]["results"]] == ["gpu-0"]
    assert len(result["pending"]) == 1, result
