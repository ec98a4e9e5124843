"""Public DRA manifests (issue 23) run through `dralab audit` / `dralab schedule`, each case checked against the
answer upstream gives (tests/fixtures/dumps/public/README.md: the origin and licence of every file, what was
written here, and how each expected answer follows from upstream's allocator).

Sources: AMD's ROCm/k8s-gpu-dra-driver examples (pre-made partitions), NVIDIA's k8s-dra-driver-gpu (two-GPU
quickstart demos, static MIG, a ComputeDomain), kube-scheduler's scheduler_perf DRA templates (partitionable
devices with counters, backtracking), and the kubernetes/website DRA examples (the tutorial and the concept page).
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from dralab.cli import main

PUBLIC = Path(__file__).parent / "fixtures" / "dumps" / "public"


def run(capsys: pytest.CaptureFixture[str], command: str, *files: Path | str,
        extra: tuple[str, ...] = ()) -> tuple[int, Any, str]:
    """`dralab <command> -o json -f ...` on fixture files (relative to PUBLIC) or written ones (absolute)."""
    args = [command, "-o", "json", *[a for f in files for a in ("-f", str(PUBLIC / f))], *extra]
    code = main(args)
    out, err = capsys.readouterr()
    return code, (yaml.safe_load(out) if out.strip() else None), err


def pods_of(report: dict[str, Any]) -> dict[tuple[str, str], dict[str, Any]]:
    return {(p["namespace"], p["name"]): p for p in report["pods"]}


def devices_of(binding: dict[str, Any]) -> list[tuple[str, str]]:
    return [(r["pool"], r["device"]) for c in binding["claims"] for r in c["allocation"]["devices"]["results"]]


def read(rel: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all((PUBLIC / rel).read_text()) if d]


def write(path: Path, docs: list[dict[str, Any]]) -> Path:
    path.write_text(yaml.safe_dump_all(docs, sort_keys=False))
    return path


# ------------------------------------------------------------------ AMD: ROCm/k8s-gpu-dra-driver examples

AMD = ("amd/deviceclass.yaml", "amd/cluster.yaml")


def test_amd_examples_single_gpu_fits_and_partition_pairs_stay_pending(capsys: pytest.CaptureFixture[str]) -> None:
    """Upstream answer: pod1 (one device of class gpu.amd.com) runs on the node; the two partition demos stay
    pending, because the driver publishes partitions with `parentDeviceID`, not the `deviceID` their constraint
    names, and the allocator rejects a device lacking a constraint's attribute (structured/allocator.go:
    matchAttributeConstraint.add / distinctAttributeConstraint.add return false when lookupAttribute is nil)."""
    code, report, err = run(capsys, "audit", *AMD, "amd/example.yaml", "amd/example-partitions-same-parent.yaml",
                            "amd/example-partitions-distinct-parents.yaml")
    assert code == 0, err
    pods = pods_of(report)
    assert pods["gpu-test", "pod1"]["reason"] is None and pods["gpu-test", "pod1"]["closest"]["node"] == "amd-worker"
    for name, rule in (("pod-two-partitions-same-parent", "matchAttribute"),
                       ("pod-two-partitions-distinct-parents", "distinctAttribute")):
        pod = pods["gpu-test", name]
        assert pod["node"] is None and pod["reason"] == "topology", pod
        assert "gpu.amd.com/deviceID" in pod["message"] and rule in pod["message"], pod["message"]
        assert "none of them has the attribute" in pod["message"], pod["message"]
    assert (report["devices"]["total"], report["devices"]["free"]) == (16, 16)


@pytest.mark.parametrize(("demo", "same"), [("example-partitions-same-parent.yaml", True),
                                            ("example-partitions-distinct-parents.yaml", False)])
def test_amd_partition_pairs_with_the_attribute_the_driver_publishes(
        capsys: pytest.CaptureFixture[str], tmp_path: Path, demo: str, same: bool) -> None:
    """The same demos with their constraint naming `gpu.amd.com/parentDeviceID` (what the driver publishes): the
    allocator then finds two partitions of one GPU (matchAttribute) or of two GPUs (distinctAttribute)."""
    docs = read(f"amd/{demo}")
    for d in docs:
        if d["kind"] == "ResourceClaim":
            for c in d["spec"]["devices"]["constraints"]:
                key = "matchAttribute" if "matchAttribute" in c else "distinctAttribute"
                c[key] = "gpu.amd.com/parentDeviceID"
    fixed = write(tmp_path / demo, docs)
    code, report, err = run(capsys, "schedule", *AMD, fixed)
    assert code == 0, err
    [binding] = report["bindings"]
    assert binding["node"] == "amd-worker" and not report["pending"]
    parents = {name: dev["attributes"]["parentDeviceID"]["string"]
               for doc in read("amd/cluster.yaml") if doc["kind"] == "ResourceSlice"
               for dev in doc["spec"]["devices"] for name in [dev["name"]]}
    chosen = [parents[device] for _, device in devices_of(binding)]
    assert len(chosen) == 2 and (chosen[0] == chosen[1]) is same, chosen


def test_amd_shared_claim_serves_both_pods(capsys: pytest.CaptureFixture[str]) -> None:
    """example-multiple-pod-share.yaml: two pods reference one pre-created claim; upstream allocates it once
    and both pods run on its node with the same device (docs/demo.md, section C)."""
    code, report, err = run(capsys, "schedule", *AMD, "amd/example-multiple-pod-share.yaml")
    assert code == 0, err
    assert not report["pending"] and len(report["bindings"]) == 2
    assert {b["node"] for b in report["bindings"]} == {"amd-worker"}
    assert len({tuple(devices_of(b)) for b in report["bindings"] if b["claims"]}) == 1


# ------------------------------------------------------------------ dra-example-driver: partitionable devices

EXAMPLE_PARTITIONS = ("example-driver/cluster-partitions.yaml", "example-driver/partitionable-devices.yaml")


def test_example_driver_partitionable_devices(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """demo/examples/partitionable-devices: pod0 asks for two devices of gpu.example.com on a node whose two GPUs
    are each four quarter partitions plus a full device, all drawing on the GPU's counter set. Upstream answer:
    pod0 gets two partitions (its README). Four more copies of pod0, scheduled one after another: the allocator
    takes devices in slice order, so pods 0-1 get gpu-0's four partitions, gpu-0-full no longer fits the counters,
    pods 2-3 get gpu-1's, and the fifth waits (counters): 8 quarters, 4 pods."""
    code, report, err = run(capsys, "audit", *EXAMPLE_PARTITIONS)
    assert code == 0, err
    [pod] = report["pods"]
    assert (pod["name"], pod["reason"], pod["closest"]["node"]) == ("pod0", None, "kind-worker")
    [template, pod0] = [d for d in read(EXAMPLE_PARTITIONS[1]) if d["kind"] != "Namespace"]
    pods = []
    for i in range(5):
        copy_ = copy.deepcopy(pod0)
        copy_["metadata"]["name"] = f"pod{i}"
        pods.append(copy_)
    code, report, err = run(capsys, "schedule", EXAMPLE_PARTITIONS[0], write(tmp_path / "pods.yaml", [template, *pods]))
    assert code == 0, err
    got = {b["name"]: sorted(d for _, d in devices_of(b)) for b in report["bindings"]}
    assert got == {f"pod{2 * g + k}": [f"gpu-{g}-partition-{2 * k}", f"gpu-{g}-partition-{2 * k + 1}"]
                   for g in (0, 1) for k in (0, 1)}
    [pending] = report["pending"]
    assert (pending["name"], pending["reason"]) == ("pod4", "counters"), pending


def test_example_driver_multiple_allocations_of_one_partition(capsys: pytest.CaptureFixture[str]) -> None:
    """demo/examples/gpu-allow-multiple-allocations-partitionable: two claims each asking 8Gi and 10 compute of a
    device that allows multiple allocations. Upstream answer (its README): both pods run on the same partition,
    gpu-0-partition-0, each with its share recorded as consumed capacity."""
    code, report, err = run(capsys, "schedule", "example-driver/cluster-partitions-multi.yaml",
                            "example-driver/gpu-allow-multiple-allocations-partitionable.yaml")
    assert code == 0, err
    assert not report["pending"] and sorted(b["name"] for b in report["bindings"]) == ["pod0", "pod1"]
    for b in report["bindings"]:
        [result] = [r for c in b["claims"] for r in c["allocation"]["devices"]["results"]]
        assert result["device"] == "gpu-0-partition-0", result
        assert result["consumedCapacity"] == {"compute": "10", "memory": "8Gi"}, result


# ------------------------------------------------------------------ NVIDIA: k8s-dra-driver-gpu demos

NV_GPUS = ("nvidia/deviceclasses.yaml", "nvidia/cluster-gpus.yaml")


def test_nvidia_gpu_test7_and_gpu_test8_each_need_both_gpus(capsys: pytest.CaptureFixture[str]) -> None:
    """gpu-test7 (two claims from one template, one GPU each) and gpu-test8 (one claim, count 2), v1beta1, on a
    node with two GPUs: each fits alone (audit); together only the first in queue order runs, the other waits
    for devices (schedule): upstream allocates whole devices, never one GPU to two claims."""
    code, report, err = run(capsys, "audit", *NV_GPUS, "nvidia/gpu-test7.yaml", "nvidia/gpu-test8.yaml")
    assert code == 0, err
    assert all(p["reason"] is None and p["closest"]["node"] == "gpu-node" for p in report["pods"]), report["pods"]
    code, report, err = run(capsys, "schedule", *NV_GPUS, "nvidia/gpu-test7.yaml", "nvidia/gpu-test8.yaml")
    assert code == 0, err
    [bound] = report["bindings"]
    [pending] = report["pending"]
    assert (bound["namespace"], bound["node"]) == ("gpu-test7", "gpu-node")
    assert sorted(d for _, d in devices_of(bound)) == ["gpu-0", "gpu-1"]
    assert (pending["namespace"], pending["reason"]) == ("gpu-test8", "capacity"), pending


def test_nvidia_static_mig_any_mig_device(capsys: pytest.CaptureFixture[str]) -> None:
    """The driver's bats spec gpu-anymig (one device of class mig.nvidia.com) on a GPU that mig-parted split into
    two 3g.20gb instances beforehand (static MIG: no counters): the pod gets one of them."""
    code, report, err = run(capsys, "schedule", "nvidia/deviceclasses.yaml", "nvidia/cluster-static-mig.yaml",
                            "nvidia/gpu-anymig.yaml")
    assert code == 0, err
    [binding] = report["bindings"]
    [(pool, device)] = devices_of(binding)
    assert binding["node"] == "mig-static-node" and device.startswith("gpu-0-mig-3g20gb-9-"), binding


def test_nvidia_compute_domain_is_refused_as_not_modelled(capsys: pytest.CaptureFixture[str]) -> None:
    """channel-injection.yaml's pod uses the ResourceClaimTemplate the ComputeDomain controller creates (and
    devices the IMEX daemons it starts publish): dralab does not model that controller, so a ComputeDomain whose
    template the input lacks is refused by name, exit 2, rather than read as a pod waiting for a template
    someone forgot (core/dra/foreign_kinds.py)."""
    code, _, err = run(capsys, "audit", *NV_GPUS, "nvidia/channel-injection.yaml")
    assert code == 2
    assert "channel-injection.yaml: documents[0].spec.channel.resourceClaimTemplate.name" in err, err
    assert "`ComputeDomain` (resource.nvidia.com) is not modelled" in err and "default/imex-channel-0" in err, err


def test_nvidia_compute_domain_with_its_controllers_template_is_read(capsys: pytest.CaptureFixture[str],
                                                                     tmp_path: Path) -> None:
    """A real cluster's dump holds the template the controller made (computedomain.go: device class
    compute-domain-default-channel.nvidia.com); then the pod is judged as usual -- here pending, as upstream's
    would be until an IMEX daemon publishes a channel device: no device of that class exists yet."""
    made = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
            "metadata": {"name": "imex-channel-0", "namespace": "default"},
            "spec": {"spec": {"devices": {"requests": [{"name": "channel", "exactly": {
                "deviceClassName": "compute-domain-default-channel.nvidia.com"}}]}}}}
    channel_class = {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass",
                     "metadata": {"name": "compute-domain-default-channel.nvidia.com"},
                     "spec": {"selectors": [{"cel": {"expression": "device.driver == 'compute-domain.nvidia.com' && "
                                                     "device.attributes['compute-domain.nvidia.com'].type == "
                                                     "'channel' && device.attributes['compute-domain.nvidia.com']"
                                                     ".id == 0"}}]}}
    extra = write(tmp_path / "controller-made.yaml", [made, channel_class])
    code, report, err = run(capsys, "audit", *NV_GPUS, "nvidia/channel-injection.yaml", extra)
    assert code == 0, err
    [pod] = report["pods"]
    assert pod["name"] == "imex-channel-injection" and pod["node"] is None and pod["reason"] is not None, pod


# ------------------------------------------------------------------ kube-scheduler's scheduler_perf templates


def render(rel: str, index: int, **replace: str) -> dict[str, Any]:
    """One object from a scheduler_perf template as its createAny/createNodes/createPods opcodes make it: the
    template's `{{.Index}}` is the object's index (test/integration/scheduler_perf/create.go executes the
    template with Index set); a `generateName` becomes a name."""
    text = (PUBLIC / "scheduler_perf" / rel).read_text()
    text = text.replace("{{.Index}}", str(index)).replace("{{ .Index }}", str(index))
    [doc] = [d for d in yaml.safe_load_all(text) if d]
    meta = doc["metadata"]
    if "generateName" in meta:
        meta["name"] = f"{meta.pop('generateName')}{index}"
    for key, value in replace.items():
        meta[key] = value
    return dict(doc)


def plain_node() -> dict[str, Any]:
    node = render("node-with-dra-test-driver.yaml", 0)  # createNodes without a template: no DRA label
    node["metadata"] = {"name": "scheduler-perf-plain-0"}
    return node


def split_slice(combined: dict[str, Any]) -> list[dict[str, Any]]:
    """A 1.34-shape slice (counters and devices together) as two 1.35 slices of one pool, as upstream split the
    templates (resourceslice-*-countersets.yaml / -devices.yaml) when PR #134189 made the fields exclusive."""
    counters, devices = copy.deepcopy(combined), copy.deepcopy(combined)
    del counters["spec"]["devices"], devices["spec"]["sharedCounters"]
    for doc, suffix in ((counters, "countersets"), (devices, "devices")):
        doc["metadata"]["name"] = doc["metadata"]["name"].replace("resourceslice-", f"resourceslice-{suffix}-")
        doc["spec"]["pool"]["resourceSliceCount"] = 2
    return [counters, devices]


def partitionable(tmp_path: Path, pods: int) -> Path:
    """The `Partitionable` workload, `fast` parameters (dra/partitionabledevices/performance-config.yaml): one
    node without DRA, one with; 10 pools of counters and devices; 10 `init` claims allocated first
    (allocResourceClaims: each takes the one `preallocate` device with 2 counters of a pool); a template for two
    devices of one pool (matchAttribute dra.example.com/slice); then the pods."""
    docs = [plain_node(), render("node-with-dra-test-driver.yaml", 0), render("deviceclass.yaml", 0)]
    for i in range(10):
        docs += partitionable_pool(i)
        claim = render("resourceclaim-with-selector.yaml", i, namespace="init")
        claim["status"] = {"allocation": {
            "devices": {"results": [{"request": "req-0", "driver": "test-driver.cdi.k8s.io",
                                     "pool": f"resourceslice-{i}", "device": "device-2-counters-1"}]},
            "nodeSelector": copy.deepcopy(docs[-1]["spec"]["nodeSelector"])}}
        docs.append(claim)
    docs.append(render("resourceclaimtemplate-for-two-devices.yaml", 0, namespace="test"))
    docs += [render("pod-with-claim-template.yaml", i, namespace="test") for i in range(pods)]
    return write(tmp_path / "partitionable.yaml", docs)


def partitionable_pool(i: int) -> list[dict[str, Any]]:
    """resourceslice-partitionable-{countersets,devices}.yaml at index ``i``."""
    return [render("resourceslice-partitionable-countersets.yaml", i),
            render("resourceslice-partitionable-devices.yaml", i)]


def test_scheduler_perf_partitionable_fast(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """Upstream answer: the workload's 10 pods are all scheduled (scheduler_perf fails the test otherwise), on the
    one DRA node. Each pool has device-2-counters-1 (counter1+counter2) taken, so the only pair of devices left
    whose counters fit is device-1-counter-3 + device-1-counter-4: the allocator first tries
    device-2-counters-2 (counter3+counter4), finds no second device, and backtracks ("the allocator will have to
    backtrack once"). Ten pools serve ten pods; an eleventh finds no pool left."""
    code, report, err = run(capsys, "schedule", partitionable(tmp_path, 11))
    assert code == 0, err
    assert len(report["bindings"]) == 10 and {b["node"] for b in report["bindings"]} == {"scheduler-perf-dra-0"}
    used = [sorted(devices_of(b)) for b in report["bindings"]]
    assert all([d for _, d in pair] == ["device-1-counter-3", "device-1-counter-4"] for pair in used), used
    assert len({pair[0][0] for pair in used}) == 10  # one pod per pool
    [pending] = report["pending"]
    assert pending["reason"] == "counters", pending


def test_scheduler_perf_partitionable_backtracking(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """PartitionableBacktracking, `fast`: one pool, a claim for 7 of its 8 devices; device-1 takes 20Gi of the
    70Gi `mem` counter, the others 10Gi, so only device-2..device-8 fit together. Upstream: the pod is scheduled
    (the allocator backtracks out of every choice that includes device-1)."""
    docs = [plain_node(), render("node-with-dra-test-driver.yaml", 0), render("deviceclass.yaml", 0),
            *split_slice(render("resourceslice-partitionable-backtracking.yaml", 0)),
            render("resourceclaimtemplate-backtracking.yaml", 0, namespace="test"),
            render("pod-with-claim-template.yaml", 0, namespace="test")]
    code, report, err = run(capsys, "schedule", write(tmp_path / "backtracking.yaml", docs))
    assert code == 0, err
    [binding] = report["bindings"]
    assert sorted(d for _, d in devices_of(binding)) == [f"device-{i}" for i in range(2, 9)], binding


@pytest.mark.parametrize("version", ["1.35", "1.36", "1.37"])
def test_scheduler_perf_combined_slice_is_invalid_from_1_35(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                                            version: str) -> None:
    """resourceslice-partitionable-backtracking.yaml as stored (sharedCounters and devices in one slice): from
    1.35 kube-apiserver refuses it with "only one of `sharedCounters` or `devices` is allowed" (PR #134189;
    the message as NVIDIA's driver met it: kubernetes-sigs/dra-driver-nvidia-gpu#859)."""
    docs = [render("node-with-dra-test-driver.yaml", 0), render("resourceslice-partitionable-backtracking.yaml", 0)]
    code, _, err = run(capsys, "audit", write(tmp_path / "combined.yaml", docs),
                       extra=("--kubernetes-version", version))
    assert code == 2 and "only one of `sharedCounters` or `devices` is allowed" in err, err


@pytest.mark.xfail(strict=True, reason="dralab refuses a slice with both sharedCounters and devices at every "
                   "release; 1.34 (DRAPartitionableDevices alpha) served that shape (core/dra/convert.py)")
def test_scheduler_perf_combined_slice_is_valid_in_1_34(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    docs = [render("node-with-dra-test-driver.yaml", 0), render("deviceclass.yaml", 0),
            render("resourceslice-partitionable-backtracking.yaml", 0),
            render("resourceclaimtemplate-backtracking.yaml", 0, namespace="test"),
            render("pod-with-claim-template.yaml", 0, namespace="test")]
    code, report, err = run(capsys, "schedule", write(tmp_path / "combined.yaml", docs),
                            extra=("--kubernetes-version", "1.34", "--feature-gates", "DRAPartitionableDevices=true"))
    assert code == 0, err
    assert len(report["bindings"]) == 1


# ------------------------------------------------------------------ kubernetes/website examples


def test_website_tutorial_pod_fits(capsys: pytest.CaptureFixture[str]) -> None:
    """The DRA tutorial (install-use-dra.md): DeviceClass gpu.example.com, claim some-gpu (memory >= 10Gi), pod0;
    the example driver's GPUs have 80Gi, so pod0 runs on the worker (the tutorial shows it Running)."""
    code, report, err = run(capsys, "audit", "website/tutorial-deviceclass.yaml", "website/tutorial-cluster.yaml",
                            "website/tutorial-resourceclaim.yaml", "website/tutorial-pod.yaml")
    assert code == 0, err
    [pod] = report["pods"]
    assert (pod["namespace"], pod["name"], pod["reason"], pod["closest"]["node"]) == (
        "dra-tutorial", "pod0", None, "kind-worker")


def test_website_concept_claim_is_refused_as_the_api_server_refuses_it(capsys: pytest.CaptureFixture[str]) -> None:
    """examples/dra/resourceclaim.yaml indents `expression` beside `cel`, not under it: kube-apiserver's strict
    field validation (kubectl's default) answers `unknown field "spec.devices.requests[0].exactly.selectors[0]
    .expression"`; dralab names the same path and exits 2 before any work."""
    code, _, err = run(capsys, "audit", "website/deviceclass.yaml", "website/concepts-cluster.yaml",
                       "website/resourceclaim.yaml", "website/resourceclaimtemplate.yaml")
    assert code == 2
    assert "website/resourceclaim.yaml" in err
    assert "spec.devices.requests[0].exactly.selectors[0].expression" in err and "unknown field" in err, err


def job_pods(count: int) -> list[dict[str, Any]]:
    """The pods examples/dra/dra-example-job.yaml's Job makes first (parallelism 2): its template, unchanged."""
    [job] = read("website/dra-example-job.yaml")
    out = []
    for i in range(count):
        spec = copy.deepcopy(job["spec"]["template"]["spec"])
        out.append({"apiVersion": "v1", "kind": "Pod",
                    "metadata": {"name": f"example-dra-job-{i}", "namespace": "default"}, "spec": spec})
    return out


def test_website_concept_job(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """The concept page's Job. Without its shared claim (refused, above) its pods wait for a claim that does not
    exist (the DRA plugin's PreFilter: resourceclaim not found). With the claim's indentation fixed, the shared
    claim's `allocationMode: All` wants every matching device -- both 64Gi GPUs -- while each pod's own claim
    needs one more: upstream cannot allocate the pod's claims together, so the pods stay pending."""
    pods = write(tmp_path / "job-pods.yaml", job_pods(2))
    base = ("website/deviceclass.yaml", "website/concepts-cluster.yaml", "website/resourceclaimtemplate.yaml", pods)
    code, report, err = run(capsys, "audit", *base)
    assert code == 0, err
    assert {p["reason"] for p in report["pods"]} == {"missing"}, report["pods"]
    assert all("example-resource-claim" in p["message"] for p in report["pods"])
    text = (PUBLIC / "website/resourceclaim.yaml").read_text()
    claim = yaml.safe_load(text.replace("- cel:\n          expression", "- cel:\n            expression"))
    assert claim["spec"]["devices"]["requests"][0]["exactly"]["selectors"][0]["cel"]["expression"]
    fixed = write(tmp_path / "resourceclaim.yaml", [claim])
    code, report, err = run(capsys, "audit", *base, fixed)
    assert code == 0, err
    assert all(p["node"] is None and p["reason"] is not None for p in report["pods"]), report["pods"]
    code, report, err = run(capsys, "schedule", *base, fixed)
    assert code == 0, err
    assert not report["bindings"] and len(report["pending"]) == 2
