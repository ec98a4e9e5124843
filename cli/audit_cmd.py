"""`dralab audit` (why is each pod pending?) and `dralab schedule` (one scheduling pass) over a cluster dump.

Both read what `kubectl get nodes,pods,resourceslices,resourceclaims,resourceclaimtemplates,deviceclasses
-A -o yaml` prints, plus optional gangs: Workloads (KEP-4671), scheduler-plugins PodGroups
(`podgroups.scheduling.x-k8s.io`), and 1.36/1.37 Workloads, PodGroups and CompositePodGroups
(`scheduling.k8s.io` v1alpha2/v1alpha3/v1beta1). Exit 0; exit 2 when the input is invalid (file, path to the
field, what was expected).

The dump's release and the gates its fields prove on: cli/dump_release.py.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from dralab.core.analysis.audit_groups import group_by_cause, group_lines

from .dump_release import dump_profile_input
from .inputs import InputError, add_profile_flags, emit, load_inventory, output_file, profile_flags


def _files(p: Any) -> None:
    p.add_argument("-f", "--filename", dest="files", action="append", required=True, metavar="FILE",
                   help="a cluster dump: Nodes, Pods, ResourceSlices, ResourceClaims, ResourceClaimTemplates, "
                        "DeviceClasses, Workloads, PodGroups (scheduling.x-k8s.io) (repeatable; multi-document or "
                        "kind: List)")
    add_profile_flags(p, dump=True)
    p.add_argument("--log-format", choices=["console", "json"], default="console")
    p.add_argument("--log-level", choices=["debug", "info", "warning", "error"], default="warning")


def _inventory(args: argparse.Namespace) -> tuple[Any, Any]:
    """The dump and its profile, read under the release it comes from, with the gates its fields prove on
    (cli/dump_release.py; docs/versions.md: how a dump picks a release)."""
    profile = dump_profile_input(args.files, profile_flags(args))
    return load_inventory(args.files, profile), profile


def add_parsers(sub: Any) -> None:
    a = sub.add_parser("audit", help="say why each pending pod is pending, and count free and stranded devices")
    _files(a)
    a.add_argument("-o", "--output", choices=["table", "json", "html"], default="table",
                   help="what goes to stdout: table (default), json, or html: a self-contained page drawing the "
                        "cluster as nodes x devices with the pending pods (docs/audit.md)")
    a.add_argument("--html", metavar="FILE",
                   help="also write the HTML page to FILE (then -o html prints nothing more)")
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
    said = [f"  {p['namespace']}/{p['name']}: {p['autoscaler']['reason']}: {p['autoscaler']['message']}"
            for p in report["pods"] if p.get("autoscaler")]
    if said:  # cluster-autoscaler's last Event on each pending pod (the dump's Events)
        lines += ["autoscaler:", *said]
    lines += group_lines(report.get("groups") or group_by_cause(report))  # by cause, what to do (causes.py)
    lines += [row["line"] for row in report.get("not_modelled") or []]  # fields the audit could not check
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

    html_file = getattr(args, "html", None)  # absent when another command's parser built args (kubectl plugin)
    output_file(html_file, "--html")  # refused before any work
    inv, profile = _inventory(args)
    view: dict[str, Any] = {}
    report = audit(inv, profile.version, view=view)
    report["groups"] = group_by_cause(report)
    page = _page(report, view) if args.output == "html" or html_file else None
    if html_file and page is not None:
        _write(html_file, page)
    if args.output == "json":
        emit(report, "json")
    elif args.output == "html":
        if not html_file and page is not None:
            sys.stdout.write(page)
    else:
        sys.stdout.write(render_table(report) + "\n")
    return 0


def _page(report: dict[str, Any], view: dict[str, Any]) -> str:
    """The HTML audit (core/analysis/audit_picture.py draws, audit_html.py renders)."""
    from dralab.core.analysis.audit_html import render
    from dralab.core.analysis.audit_picture import picture

    return render(picture(view["snap"], view["verdicts"], report), report, report["groups"])


def _write(path: str, text: str) -> None:
    from dralab.replay.logs.output_files import atomic_output

    try:
        with atomic_output(path, "--html", text=True) as f:
            f.write(text)
    except OSError as exc:
        raise InputError(f"--html: {path}: cannot write the page: {exc.strerror or exc}") from None


def cmd_schedule(args: argparse.Namespace) -> int:
    from dralab.core.analysis.audit import schedule

    inv, profile = _inventory(args)
    emit(schedule(inv, profile.version), args.output)
    return 0


COMMANDS = {"audit": cmd_audit, "schedule": cmd_schedule}
