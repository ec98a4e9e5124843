"""The API server's checks of topologySpreadConstraints and pod (anti-)affinity (core/kube/affinity.py, called
from the Pod check), the plugins' argument checks, and the LabelSelector semantics they rely on."""

from __future__ import annotations

from typing import Any

import pytest
from builders import pod

from dralab.core.kube.affinity import compile_selector, merged_selector, selector_matches
from dralab.core.kube.fields import FieldError
from dralab.core.kube.manifests import check_pod
from dralab.core.scheduler.plugins import inter_pod_affinity, pod_topology_spread

TSC = {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule",
       "labelSelector": {"matchLabels": {"app": "web"}}}


def with_spec(**spec: Any) -> dict[str, Any]:
    manifest = pod("p", cpu="1")
    manifest["metadata"]["labels"] = {"app": "web"}
    manifest["spec"].update(spec)
    return manifest


@pytest.mark.parametrize(("spec", "path", "text"), [
    ({"topologySpreadConstraints": [{**TSC, "maxSkew": 0}]}, "spec.topologySpreadConstraints[0].maxSkew", ">= 1"),
    ({"topologySpreadConstraints": [{**TSC, "whenUnsatisfiable": "Never"}]},
     "spec.topologySpreadConstraints[0].whenUnsatisfiable", "DoNotSchedule"),
    ({"topologySpreadConstraints": [{**TSC, "whenUnsatisfiable": "ScheduleAnyway", "minDomains": 2}]},
     "spec.topologySpreadConstraints[0].minDomains", "whenUnsatisfiable=DoNotSchedule"),
    ({"topologySpreadConstraints": [TSC, TSC]}, "spec.topologySpreadConstraints[1]", "duplicate"),
    ({"topologySpreadConstraints": [{**TSC, "nodeTaintsPolicy": "Always"}]},
     "spec.topologySpreadConstraints[0].nodeTaintsPolicy", "Honor"),
    ({"topologySpreadConstraints": [{**TSC, "matchLabelKeys": ["app"]}]},
     "spec.topologySpreadConstraints[0].matchLabelKeys[0]", "labelSelector"),
    ({"topologySpreadConstraints": [{**TSC, "labelSelector": {"matchExpressions": [
        {"key": "app", "operator": "In"}]}}]},
     "spec.topologySpreadConstraints[0].labelSelector.matchExpressions[0].values", "must be specified"),
    ({"affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": {"app": "web"}}}]}}},
     "spec.affinity.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution[0].topologyKey", "missing"),
    ({"affinity": {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"topologyKey": "zone", "labelSelector": {}, "namespaceSelector": {"matchLabels": {"team": "a"}}}]}}},
     "spec.affinity.podAffinity.requiredDuringSchedulingIgnoredDuringExecution[0].namespaceSelector",
     "not modelled by dralab"),
    ({"affinity": {"podAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 101, "podAffinityTerm": {"topologyKey": "zone"}}]}}},
     "spec.affinity.podAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].weight", "<= 100"),
    ({"affinity": {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"topologyKey": "zone", "labelSelector": {}, "matchLabelKeys": ["app"], "mismatchLabelKeys": ["app"]}]}}},
     "spec.affinity.podAffinity.requiredDuringSchedulingIgnoredDuringExecution[0].mismatchLabelKeys[0]",
     "both"),
])
def test_the_api_servers_checks(spec: dict[str, Any], path: str, text: str) -> None:
    with pytest.raises(FieldError) as err:
        check_pod(with_spec(**spec))
    assert err.value.path == path and text in str(err.value), str(err.value)


def test_valid_fields_pass_and_an_empty_namespace_selector_is_every_namespace() -> None:
    check_pod(with_spec(topologySpreadConstraints=[{**TSC, "minDomains": 3, "matchLabelKeys": ["pod-template-hash"],
                                                    "nodeAffinityPolicy": "Ignore", "nodeTaintsPolicy": "Honor"}],
                        affinity={"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                            {"topologyKey": "kubernetes.io/hostname", "labelSelector": {"matchLabels": {"a": "b"}},
                             "namespaceSelector": {}}]}}))


def test_label_selector_semantics() -> None:
    assert not selector_matches(compile_selector(None), {"a": "b"})  # nil: nothing
    assert selector_matches(compile_selector({}), {})  # empty: everything
    sel = compile_selector({"matchLabels": {"a": "1"}, "matchExpressions": [
        {"key": "b", "operator": "NotIn", "values": ["x"]}, {"key": "c", "operator": "DoesNotExist"}]})
    assert selector_matches(sel, {"a": "1", "b": "y"}) and not selector_matches(sel, {"a": "1", "b": "x"})
    assert not selector_matches(sel, {"a": "1", "c": ""})
    merged = merged_selector(compile_selector({"matchLabels": {"app": "web"}}), ["hash", "absent"], {"hash": "h1"})
    assert selector_matches(merged, {"app": "web", "hash": "h1"})
    assert not selector_matches(merged, {"app": "web", "hash": "h2"})  # matchLabelKeys: In [the pod's value]
    mismatch = merged_selector(compile_selector({}), ["tenant"], {"tenant": "t1"}, mismatch=True)
    assert not selector_matches(mismatch, {"tenant": "t1"}) and selector_matches(mismatch, {"tenant": "t2"})


def test_plugin_args() -> None:
    pod_topology_spread.check_args({"defaultingType": "List", "defaultConstraints": [
        {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "ScheduleAnyway"}]}, "args")
    with pytest.raises(FieldError, match="must be empty"):
        pod_topology_spread.check_args({"defaultConstraints": [
            {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "ScheduleAnyway"}]}, "args")
    with pytest.raises(FieldError) as err:
        pod_topology_spread.check_args({"defaultingType": "List", "defaultConstraints": [
            {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "ScheduleAnyway",
             "labelSelector": {}}]}, "args")
    assert err.value.path == "args.defaultConstraints[0].labelSelector"
    inter_pod_affinity.check_args({"hardPodAffinityWeight": 0, "ignorePreferredTermsOfExistingPods": True}, "a")
    with pytest.raises(FieldError):
        inter_pod_affinity.check_args({"hardPodAffinityWeight": 101}, "a")
