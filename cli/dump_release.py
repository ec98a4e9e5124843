"""The release a cluster dump comes from, and the gates its objects prove were on (audit, schedule, whatif).

A dump is what a running cluster served. Its objects' API versions say which releases it can come from
(core/kube/versions.py dump_profile: a dump with scheduling.k8s.io/v1alpha1 objects comes from 1.35), and their
gated fields say which gates were on: a PodGroup carrying `schedulingConstraints` proves that
TopologyAwareWorkloadScheduling was on, a pod with `spec.schedulingGroup` that GenericWorkload was (the API server
drops a gated field on create while its gate is off). Those gates are turned on for the dump's release unless
--feature-gates says otherwise. The files are read once for both.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import yaml

from .inputs import InputError

# fields of a scheduling.k8s.io Workload/PodGroup/CompositePodGroup spec (templates included) -> the gate it needs
_FIELD_GATES = {"schedulingConstraints": "TopologyAwareWorkloadScheduling",
                "resourceClaims": "DRAWorkloadResourceClaims",
                "preemptionPolicy": "PodGroupPreemptionPolicy",
                "parentCompositePodGroupName": "CompositePodGroup",
                "compositePodGroupTemplates": "CompositePodGroup"}
# v1alpha2 (1.36): these were WorkloadAwarePreemption's
_V1ALPHA2_GATES = {"disruptionMode": "WorkloadAwarePreemption", "priorityClassName": "WorkloadAwarePreemption",
                   "priority": "WorkloadAwarePreemption"}
_SCHEDULING_KINDS = ("Workload", "PodGroup", "CompositePodGroup")


def _spec_keys(value: object, out: set[str]) -> None:
    """Every mapping key anywhere under ``value``."""
    if isinstance(value, dict):
        for k, v in value.items():
            out.add(str(k))
            _spec_keys(v, out)
    elif isinstance(value, list):
        for v in value:
            _spec_keys(v, out)


def _items(files: Sequence[str]) -> list[dict[str, Any]]:
    """Every object of the dump's files (a List's items included); files that cannot be read are skipped:
    load_inventory says what is wrong with them."""
    out: list[dict[str, Any]] = []
    for file in files:
        try:
            with open(file, encoding="utf-8") as f:
                docs = list(yaml.safe_load_all(f))
        except (OSError, yaml.YAMLError):
            continue
        for doc in docs:
            items = doc.get("items") if isinstance(doc, dict) and doc.get("kind") == "List" else [doc]
            if isinstance(doc, dict) and str(doc.get("kind", "")).endswith("List") and doc.get("kind") != "List" \
                    and isinstance(doc.get("items"), list):  # a typed list (ResourceSliceList): its items omit type
                items = [{"apiVersion": doc.get("apiVersion"), "kind": doc["kind"][:-4], **item}
                         for item in doc["items"] if isinstance(item, dict)]
            if isinstance(items, list):
                out.extend(item for item in items if isinstance(item, dict))
    return out


def implied_gates(items: list[dict[str, Any]]) -> set[str]:
    """The gates the dump's objects prove were on, by the gated fields they carry: its scheduling.k8s.io objects'
    (`_FIELD_GATES`) and its pods' group (`schedulingGroup`, 1.35's `workloadRef`: GenericWorkload)."""
    gates: set[str] = set()
    for item in items:
        if item.get("kind") == "Pod" and isinstance(item.get("spec"), dict) \
                and ("schedulingGroup" in item["spec"] or "workloadRef" in item["spec"]):
            gates.add("GenericWorkload")  # a pod in a group: the API server kept the gated field
            continue
        api_version = str(item.get("apiVersion", ""))
        if not (item.get("kind") in _SCHEDULING_KINDS and api_version.startswith("scheduling.k8s.io/")):
            continue
        keys: set[str] = set()
        _spec_keys(item.get("spec"), keys)
        table = {**_FIELD_GATES, **(_V1ALPHA2_GATES if api_version.endswith("/v1alpha2") else {})}
        gates |= {gate for name, gate in table.items() if name in keys}
    return gates


def dump_profile_input(files: Sequence[str], flags: Any) -> Any:
    """The profile of the cluster a dump comes from: the release its objects' API versions and the flags allow,
    with the gates its fields prove on (--feature-gates wins); InputError when they do not fit one release."""
    from dralab.core.kube.fields import FieldError
    from dralab.core.kube.versions import GATES, dump_profile

    items = _items(files)
    seen = {(item["apiVersion"], item["kind"]) for item in items
            if isinstance(item.get("apiVersion"), str) and isinstance(item.get("kind"), str)}

    def profile(gates: dict[str, bool]) -> Any:
        try:
            return dump_profile(seen, flags.version, gates or None, flags.runtime_config or None,
                                bugs=flags.bugs or None, kueue=flags.kueue)
        except FieldError as exc:
            raise InputError(f"{', '.join(files)}: {exc}") from None

    release = profile(flags.gates)
    extra = {gate: True for gate in implied_gates(items) if gate not in flags.gates
             and (spec := GATES.get(gate, {}).get(release.version)) is not None
             and spec.stage not in ("removed", "locked")}
    return profile({**extra, **flags.gates}) if extra else release
