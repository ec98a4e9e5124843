"""`dralab allocate -f FILE [-f FILE ...] [--node NAME] [-o json|yaml]`: one allocation, explained.

Exit 0 when the claims are allocated, 1 when they are unsatisfiable or the allocator reports an
error, 2 when the input is invalid (file, path to the field, what was expected).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from .inputs import InputError, emit, load_inventory


def add_parser(sub: Any) -> None:
    p = sub.add_parser("allocate", help="allocate DRA claims for a node from Kubernetes manifests, and say why not")
    p.add_argument("-f", "--filename", dest="files", action="append", required=True, metavar="FILE",
                   help="YAML with Nodes, DeviceClasses, ResourceSlices, ResourceClaims (repeatable; "
                        "multi-document or kind: List)")
    p.add_argument("--node", help="the node to allocate for (default: the only Node in the input)")
    p.add_argument("-o", "--output", choices=["text", "json", "yaml"], default="text")
    p.add_argument("--log-format", choices=["console", "json"], default="console")
    p.add_argument("--log-level", choices=["debug", "info", "warning", "error"], default="warning")


def render_text(report: dict[str, Any]) -> str:
    lines = [f"node {report['node']}: {report['outcome']}" + (f" — {report['message']}" if report["message"] else "")]
    for claim in report["claims"]:
        lines.append(f"  claim {claim['namespace']}/{claim['name']}:")
        for r in claim["allocation"]["devices"]["results"]:
            extra = " (admin access)" if r.get("adminAccess") else ""
            lines.append(f"    {r['request']}: {r['driver']}/{r['pool']}/{r['device']}{extra}")
    for e in report["explanations"]:
        where = f"{e['claim']}" + (f" request {e['request']}" if e.get("request") else "")
        lines.append(f"  why: [{e['kind']}] {where}: {e['message']}")
    return "\n".join(lines)


def cmd_allocate(args: argparse.Namespace) -> int:
    from dralab.core.dra.allocate import NodeChoiceError, allocate_inventory

    inventory = load_inventory(args.files)
    try:
        report = allocate_inventory(inventory, args.node).to_json()
    except NodeChoiceError as exc:
        raise InputError(str(exc)) from None
    if args.output == "text":
        sys.stdout.write(render_text(report) + "\n")
    else:
        emit(report, args.output)
    return 0 if report["outcome"] == "allocated" else 1
