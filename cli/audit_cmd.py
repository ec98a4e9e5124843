"""`dralab audit` (why is each pod pending?) and `dralab schedule` (one scheduling pass) over a cluster dump.

Both read what `kubectl get nodes,pods,resourceslices,resourceclaims,resourceclaimtemplates,deviceclasses
-A -o yaml` prints, plus optional gangs: Workloads (KEP-4671), scheduler-plugins PodGroups
(`podgroups.scheduling.x-k8s.io`), and 1.36/1.37 Workloads, PodGroups and CompositePodGroups
(`scheduling.k8s.io` v1alpha2/v1alpha3/v1beta1). Exit 0; exit 2 when the input is invalid (file, path to the
field, what was expected).

A dump is what a running cluster served: a PodGroup that carries `schedulingConstraints` proves that
TopologyAwareWorkloadScheduling was on, a pod with `spec.schedulingGroup` that GenericWorkload was (the API
server drops a gated field on create while its gate is off), so the gates such fields need are turned on for
the dump's release unless --feature-gates says otherwise (`implied_gates`).
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from typing import Any

import yaml

from .inputs import add_profile_flags, dump_profile_input, emit, load_inventory, profile_flags

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


def _files(p: Any) -> None:
    p.add_argument("-f", "--filename", dest="files", action="append", required=True, metavar="FILE",
                   help="a cluster dump: Nodes, Pods, ResourceSlices, ResourceClaims, ResourceClaimTemplates, "
                        "DeviceClasses, Workloads, PodGroups (scheduling.x-k8s.io) (repeatable; multi-document or "
                        "kind: List)")
    add_profile_flags(p, dump=True)
    p.add_argument("--log-format", choices=["console", "json"], default="console")
    p.add_argument("--log-level", choices=["debug", "info", "warning", "error"], default="warning")


def _spec_keys(value: object, out: set[str]) -> None:
    """Every mapping key anywhere under ``value``."""
    if isinstance(value, dict):
        for k, v in value.items():
            out.add(str(k))
            _spec_keys(v, out)
    elif isinstance(value, list):
        for v in value:
            _spec_keys(v, out)


def implied_gates(files: list[str]) -> set[str]:
    """The gates the dump's objects prove were on, by the gated fields they carry: its scheduling.k8s.io objects'
    (`_FIELD_GATES`) and its pods' group (`schedulingGroup`, 1.35's `workloadRef`: GenericWorkload)."""
    gates: set[str] = set()
    for file in files:
        try:
            with open(file, encoding="utf-8") as f:
                docs = list(yaml.safe_load_all(f))
        except (OSError, yaml.YAMLError):
            continue  # load_inventory says what is wrong with the file
        for doc in docs:
            items = doc.get("items") if isinstance(doc, dict) and doc.get("kind") == "List" else [doc]
            for item in items if isinstance(items, list) else []:
                if isinstance(item, dict) and item.get("kind") == "Pod" and isinstance(item.get("spec"), dict) \
                        and ("schedulingGroup" in item["spec"] or "workloadRef" in item["spec"]):
                    gates.add("GenericWorkload")  # a pod in a group: the API server kept the gated field
                    continue
                if not (isinstance(item, dict) and item.get("kind") in _SCHEDULING_KINDS
                        and str(item.get("apiVersion", "")).startswith("scheduling.k8s.io/")):
                    continue
                keys: set[str] = set()
                _spec_keys(item.get("spec"), keys)
                table = {**_FIELD_GATES, **(_V1ALPHA2_GATES if item["apiVersion"].endswith("/v1alpha2") else {})}
                gates |= {gate for name, gate in table.items() if name in keys}
    return gates


def _inventory(args: argparse.Namespace) -> tuple[Any, Any]:
    """The dump and its profile, read under the release it comes from (docs/versions.md: how a dump picks a
    release), with the gates its objects' fields prove on (`implied_gates`; --feature-gates wins)."""
    from dralab.core.kube.versions import GATES

    flags = profile_flags(args)
    profile = dump_profile_input(args.files, flags)
    extra = {gate: True for gate in implied_gates(args.files) if gate not in flags.gates
             and (spec := GATES.get(gate, {}).get(profile.version)) is not None
             and spec.stage not in ("removed", "locked")}
    if extra:
        flags = dataclasses.replace(flags, gates={**extra, **flags.gates})
        profile = dump_profile_input(args.files, flags)
    return load_inventory(args.files, profile), profile


def add_parsers(sub: Any) -> None:
    a = sub.add_parser("audit", help="say why each pending pod is pending, and count free and stranded devices")
    _files(a)
    a.add_argument("-o", "--output", choices=["table", "json"], default="table")
    s = sub.add_parser("schedule", help="one greedy scheduling pass over a cluster dump (gangs all-or-nothing): "
                                        "bindings and what stays pending, with reasons")
    _files(s)
    s.add_argument("-o", "--output", choices=["json", "yaml"], default="json")


def render_table(report: dict[str, Any]) -> str:
    rows = [("NAMESPACE", "NAME", "REASON", "CLOSEST", "MESSAGE")]
    for pod in report["pods"]:
        if pod["node"] is not None:
            continue
        closest = (pod.get("closest") or {}).get("node") or "-"
        rows.append((pod["namespace"], pod["name"], pod["reason"] or "(fits)", closest, pod["message"]))
    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r[:4], widths, strict=True)) + "  " + r[4] for r in rows]
    if len(rows) == 1:
        lines = ["no pending pods"]
    d = report["devices"]
    lines.append(f"devices: {d['total']} total, {d['allocated']} allocated, {d['free']} free, "
                 f"{d['stranded']} stranded")
    if report.get("pod_groups"):
        lines += ["", *render_groups(report["pod_groups"])]
    return "\n".join(lines)


def render_groups(groups: list[dict[str, Any]]) -> list[str]:
    """The PodGroup table: policy, pods, what is in the way (core/analysis/podgroups.py's words) and why; under
    each group its topology domains' room and its own conditions, quoted."""
    rows = [("PODGROUP", "POLICY", "PENDING", "BOUND", "BLOCKED BY", "WHY")]
    extra: dict[str, list[str]] = {}
    for g in groups:
        blocked = g["blocked_by"] or ("-" if not g["pods"]["pending"] else "(fits)")
        why = g["why"] if g["blocked_by"] else (f"binds {len(g.get('bindings') or [])} pod(s)"
                                                 + (f" in {g['domain']}" if g.get("domain") else "")
                                                 if g["pods"]["pending"] else g["why"])
        rows.append((g["name"], g["policy"], str(g["pods"]["pending"]), str(g["pods"]["bound"]), blocked, why))
        more = extra.setdefault(g["name"], [])
        if g.get("composite"):
            more.append(f"  in CompositePodGroup {g['composite']}")
        domains = g["evidence"].get("domains")
        if domains:
            shown = ", ".join(f"{d['domain']}: {d['room']}" for d in domains)
            more.append(f"  room per {g['evidence']['key']} domain (minCount {g['evidence']['minCount']}): {shown}; "
                        f"closest {g['evidence']['closest']}; whole cluster {g['evidence']['cluster_room']}")
        for c in g["conditions"]:
            reason = f" {c['reason']}" if c.get("reason") else ""
            message = f": {c['message']}" if c.get("message") else ""
            more.append(f"  condition {c.get('type')}={c.get('status')}{reason}{message}")
    widths = [max(len(r[i]) for r in rows) for i in range(5)]
    out = []
    for r in rows:
        out.append("  ".join(c.ljust(w) for c, w in zip(r[:5], widths, strict=True)) + "  " + r[5])
        out += extra.get(r[0], []) if r is not rows[0] else []
    return out


def cmd_audit(args: argparse.Namespace) -> int:
    from dralab.core.analysis.audit import audit

    inv, profile = _inventory(args)
    report = audit(inv, profile.version)
    if args.output == "json":
        emit(report, "json")
    else:
        sys.stdout.write(render_table(report) + "\n")
    return 0


def cmd_schedule(args: argparse.Namespace) -> int:
    from dralab.core.analysis.audit import schedule

    inv, profile = _inventory(args)
    emit(schedule(inv, profile.version), args.output)
    return 0


COMMANDS = {"audit": cmd_audit, "schedule": cmd_schedule}
