"""`dralab audit` (why is each pod pending?) and `dralab schedule` (one scheduling pass) over a cluster dump.

Both read what `kubectl get nodes,pods,resourceslices,resourceclaims,resourceclaimtemplates,deviceclasses
-A -o yaml` prints, plus optional gangs: Workloads (KEP-4671) and scheduler-plugins PodGroups
(`podgroups.scheduling.x-k8s.io`). Exit 0; exit 2 when the input is invalid (file, path to the field, what
was expected).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from .inputs import add_profile_flags, dump_profile_input, emit, load_inventory, profile_flags


def _files(p: Any) -> None:
    p.add_argument("-f", "--filename", dest="files", action="append", required=True, metavar="FILE",
                   help="a cluster dump: Nodes, Pods, ResourceSlices, ResourceClaims, ResourceClaimTemplates, "
                        "DeviceClasses, Workloads, PodGroups (scheduling.x-k8s.io) (repeatable; multi-document or "
                        "kind: List)")
    add_profile_flags(p, dump=True)
    p.add_argument("--log-format", choices=["console", "json"], default="console")
    p.add_argument("--log-level", choices=["debug", "info", "warning", "error"], default="warning")


def _inventory(args: argparse.Namespace) -> Any:
    """The dump, read under the release it comes from (docs/versions.md: how a dump picks a release)."""
    return load_inventory(args.files, dump_profile_input(args.files, profile_flags(args)))


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
    return "\n".join(lines)


def cmd_audit(args: argparse.Namespace) -> int:
    from dralab.core.analysis.audit import audit

    report = audit(_inventory(args))
    if args.output == "json":
        emit(report, "json")
    else:
        sys.stdout.write(render_table(report) + "\n")
    return 0


def cmd_schedule(args: argparse.Namespace) -> int:
    from dralab.core.analysis.audit import schedule

    emit(schedule(_inventory(args)), args.output)
    return 0


COMMANDS = {"audit": cmd_audit, "schedule": cmd_schedule}
