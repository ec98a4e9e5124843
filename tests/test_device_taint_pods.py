"""How the device taint eviction controller finds a claim's pods (core/controllers/device_taint_eviction.py
`pod_claims`, `uses`): from the pod, as upstream's podEvictionTime does (resourceclaim.Name per spec entry, the
extended-resource claim of the pod's status, the owner check of generated claims), not from the claim's reservedFor
alone. Each test changes one fact of an upstream case (tests/scheduler_cases/device-taints/) and checks that the
outcome follows that fact."""

from __future__ import annotations

import copy
from typing import Any

import yaml
from test_device_taint_cases import CASES, TaintRun
from test_workload_cases import load_case
from test_workload_cases_run import profile_of

from dralab.core.analysis.dump import dump_record
from dralab.core.controllers.device_taint_eviction import DeviceTaintEviction, pod_claims, uses
from dralab.core.dra.api import parse_documents
from dralab.core.dra.extended import POD_CLAIM
from dralab.core.kube.versions import profile_config
from dralab.core.log.events import DeviceTaintRuleCreated, Record
from dralab.core.state.cluster import ClusterState

POD = "pod/default/my-pod"
CLAIM = "claim/default/my-pod-my-resource"


def _case(name: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    test, manifests = load_case(CASES / f"{name}.yaml")
    return test["spec"], copy.deepcopy(manifests)


def _doc(manifests: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    return next(m for m in manifests if m["kind"] == kind)


def _evicted(spec: dict[str, Any], manifests: list[dict[str, Any]]) -> list[str]:
    return sorted(TaintRun(spec, manifests, "variant.yaml").evicted_at())


def _view(spec: dict[str, Any], manifests: list[dict[str, Any]]) -> ClusterState:
    """The dump folded, no reactor run."""
    state = ClusterState()
    inventory = parse_documents(manifests, "variant.yaml", profile=profile_of(spec))
    state.apply(state.offset + 1, dump_record(inventory).record)
    return state


def test_extended_claim_is_found_through_the_pods_status() -> None:
    """evict-pod-extended-resourceclaim evicts because the pod's status.extendedResourceClaimStatus names the
    claim: without it the claim, still reserved for the pod, evicts nothing (it used to, through reservedFor)."""
    spec, manifests = _case("eviction-evict-pod-extended-resourceclaim")
    assert _evicted(spec, manifests) == ["my-pod"]
    del _doc(manifests, "Pod")["status"]["extendedResourceClaimStatus"]
    assert _evicted(spec, manifests) == []


def test_extended_claim_the_scheduler_recorded() -> None:
    """In a run the scheduler records the special claim as the pod's `<extended-resources>` claim (pod_claims):
    that is the pod's extended-resource claim too, owner checked."""
    spec, manifests = _case("eviction-evict-pod-extended-resourceclaim")
    del _doc(manifests, "Pod")["status"]["extendedResourceClaimStatus"]
    view = _view(spec, manifests)
    pod = view.pods[POD]
    assert pod_claims(view, pod) == [] and not uses(view, pod, CLAIM)
    view.dra.pod_claims.setdefault(POD, {})[POD_CLAIM] = CLAIM
    assert pod_claims(view, pod) == [(CLAIM, True)] and uses(view, pod, CLAIM)


def test_owner_uid_decides_when_both_have_one() -> None:
    """metav1.IsControlledBy compares uids: an owner reference with the pod's uid but another name is the pod's,
    one with the pod's name but another uid is not (no-evict-wrong-resourceclaim)."""
    spec, manifests = _case("eviction-evict-pod-resourceclaimtemplate")
    owner = _doc(manifests, "ResourceClaim")["metadata"]["ownerReferences"][0]
    owner["name"] = "renamed"
    assert _evicted(spec, manifests) == ["my-pod"]
    owner["name"], owner["uid"] = "my-pod", "1234-other"
    assert _evicted(spec, manifests) == []


def test_owner_name_stands_in_without_uids() -> None:
    """dralab's own pods may have no uid, nor then the claims made for them: the owner's name decides."""
    spec, manifests = _case("eviction-evict-pod-resourceclaimtemplate")
    del _doc(manifests, "Pod")["metadata"]["uid"]
    owner = _doc(manifests, "ResourceClaim")["metadata"]["ownerReferences"][0]
    del owner["uid"]
    assert _evicted(spec, manifests) == ["my-pod"]
    owner["name"] = "other-pod"
    assert _evicted(spec, manifests) == []
    del _doc(manifests, "ResourceClaim")["metadata"]["ownerReferences"]  # no owner: not the pod's either
    assert _evicted(spec, manifests) == []


def test_claim_named_in_spec_needs_no_owner() -> None:
    """A spec entry naming a claim (resourceClaimName) uses it whoever owns it (resourceclaim.Name: mustCheckOwner
    false); evict-pod-resourceclaim's claim has no owner at all."""
    spec, manifests = _case("eviction-evict-pod-resourceclaim")
    assert "ownerReferences" not in _doc(manifests, "ResourceClaim")["metadata"]
    assert _evicted(spec, manifests) == ["my-pod"]
    view = _view(spec, manifests)
    assert pod_claims(view, view.pods[POD]) == [(CLAIM, False)]


def test_template_claim_of_the_status_entry() -> None:
    """A template entry is the claim its status entry names; no entry, or one naming no claim, is no claim."""
    spec, manifests = _case("eviction-evict-pod-resourceclaimtemplate")
    view = _view(spec, manifests)
    assert pod_claims(view, view.pods[POD]) == [(CLAIM, True)]
    for status in ([], [{"name": "r0"}]):
        _doc(manifests, "Pod")["status"]["resourceClaimStatuses"] = status
        assert _evicted(spec, manifests) == [], status


EXTENDED_RUN = """
apiVersion: v1
kind: Node
metadata: {name: worker}
status: {allocatable: {cpu: '8', memory: 16Gi, pods: '110'}}
---
apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata: {name: my-resource-class}
spec:
  selectors: [{cel: {expression: device.driver == "some-driver"}}]
  extendedResourceName: example.com/gpu
---
apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata: {name: worker-some-driver}
spec:
  driver: some-driver
  nodeName: worker
  pool: {name: worker, generation: 1, resourceSliceCount: 1}
  devices: [{name: instance}]
---
apiVersion: v1
kind: Pod
metadata: {name: my-pod, namespace: default}
spec:
  containers:
  - name: c
    image: i
    resources: {requests: {example.com/gpu: '1'}, limits: {example.com/gpu: '1'}}
"""


def test_extended_claim_of_a_run_is_evicted() -> None:
    """End to end: the scheduler binds the pod with its special claim (owned by it, recorded as its
    `<extended-resources>` claim; the pod's manifest has no status), then a NoExecute rule evicts it at once."""
    spec = {"kubernetes": {"version": "1.37"}}
    run = TaintRun(spec, list(yaml.safe_load_all(EXTENDED_RUN)), "extended.yaml")
    pod = run.state.pods[POD]
    assert pod.node == "worker" and "status" not in pod.manifest
    [(claim, owned)] = pod_claims(run.state, pod)
    assert owned and run.state.dra.pod_claims[POD][POD_CLAIM] == claim and uses(run.state, pod, claim)
    rule = {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceTaintRule", "metadata": {"name": "evict"},
            "spec": {"deviceSelector": {"driver": "some-driver"},
                     "taint": {"key": "example.com/taint", "effect": "NoExecute"}}}
    run._append(Record(id="rule", source="scenario", view=-1, t=1000,
                       events=(DeviceTaintRuleCreated(manifest=rule, time_added_ms=1000),)))
    run._settle(1000, DeviceTaintEviction(kubernetes=profile_config(run.profile)))
    assert run.evicted_at() == {"my-pod": 1000}
