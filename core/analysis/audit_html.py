"""The page of `dralab audit -o html`: one self-contained HTML file (inline CSS, no script, no link, no font),
drawing the cluster as nodes × devices with the pending pods beside it (the data: core/analysis/audit_picture.py).

Each node is a block; inside, its devices grouped per topology domain (the attribute a claim's
``matchAttribute`` names: an NVLink domain, a PCIe root), partitions inside their parent counter set, one square
per device coloured by state (legend at the top). Hovering a square names the device, its attributes and
taints. Then the pending pods grouped by cause with what to do (core/analysis/audit_groups.py), and every
pending pod with its reason, closest node and message.

A dump is untrusted input: every string taken from it (node, pod, device, attribute, taint names and values,
messages) goes through :func:`html.escape` with quotes, in text and in attributes alike, so a node named
``<script>`` stays text. Colours are fixed (:data:`COLOURS`): tests find them in a screenshot.
"""

from __future__ import annotations

import html
from collections import Counter
from typing import Any

from .audit_picture import STATES, Cell, NodeBox, Parent, Picture

__all__ = ["COLOURS", "render"]

COLOURS = {"used": "#2f6fce", "free": "#3fae49", "stranded": "#f08c00", "tainted": "#8e44ad", "blocked": "#b8cdf0"}
LEGEND = {
    "used": "allocated to a claim",
    "free": "free, and a pending pod wants it (or none is pending)",
    "stranded": "free, but no pending pod can use it (no pending claim selects it, or its node is excluded)",
    "tainted": "free and wanted, but it carries a NoSchedule/NoExecute device taint",
    "blocked": "free partition whose shared counters are taken by an allocated sibling",
}
CSS = """
body { font-family: sans-serif; margin: 1.2em auto; padding: 0 1em; max-width: 1400px; color: #222; }
h1 { font-size: 1.4em; margin-bottom: 0.2em; }
h2 { font-size: 1.1em; margin-top: 1.4em; border-bottom: 1px solid #ccc; }
table { border-collapse: collapse; margin: 0.5em 0; font-size: 0.88em; }
th, td { border: 1px solid #ccc; padding: 3px 7px; text-align: left; vertical-align: top; }
th { background: #f2f2f2; font-weight: normal; }
td.num { text-align: right; }
.note { color: #555; font-size: 0.88em; max-width: 80em; }
.legend span.d { vertical-align: middle; }
.legend li { list-style: none; margin: 2px 0; font-size: 0.88em; }
.nodes { display: flex; flex-wrap: wrap; gap: 8px; align-items: flex-start; }
.node { border: 1px solid #999; border-radius: 4px; padding: 4px 6px; background: #fafafa; min-width: 120px;
        max-width: 420px; font-size: 0.8em; }
.node.down { background: #e4e4e4; border-style: dashed; }
.node.pool { background: #f4f8ff; }
.node header { font-weight: bold; margin-bottom: 2px; word-break: break-all; }
.node .status { font-weight: normal; color: #555; }
.node .taint { color: #8e44ad; font-weight: normal; word-break: break-all; }
.node .counts, .node .ext, .node .closest { color: #555; margin: 2px 0; word-break: break-all; }
.domain { border: 1px solid #ccc; border-radius: 3px; padding: 2px 3px; margin: 3px 0; background: #fff; }
.dlabel, .plabel { color: #666; font-size: 0.9em; word-break: break-all; }
.parent { display: inline-block; border: 1px solid #888; border-radius: 3px; padding: 1px 2px; margin: 1px;
          vertical-align: top; background: #f6f6f6; }
span.d { display: inline-block; width: 14px; height: 14px; margin: 1px; border-radius: 2px; }
""" + "".join(f"span.d.{s} {{ background: {c}; }}\n" for s, c in COLOURS.items())


def e(value: Any) -> str:
    """Escaped for text and for attribute values alike."""
    return html.escape(str(value), quote=True)


def render(pic: Picture, report: dict[str, Any], groups: list[dict[str, Any]], *, title: str = "dralab audit"
           ) -> str:
    """The page: headline, legend, pending pods by cause, the nodes, the pending pods, what was not checked."""
    d = report["devices"]
    pending = sum(g["count"] for g in groups)
    drawn = len(pic.nodes) + pic.hidden_nodes
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>{e(title)}</title>",
        f"<style>{CSS}</style></head><body>",
        f"<h1>{e(title)}</h1>",
        f'<p class="headline">{drawn} node(s), {pending} pending pod(s) that do not fit; devices: {d["total"]} '
        f'total, {d["allocated"]} allocated, {d["free"]} free, {d["stranded"]} stranded.</p>',
        _legend(pic),
        "<h2>Pending pods by cause</h2>",
        _groups(groups),
        "<h2>Cluster</h2>",
        _domains_note(pic),
        '<div class="nodes">',
        *(_node(box) for box in pic.nodes),
        "</div>",
    ]
    if pic.hidden_nodes:
        counts = ", ".join(f"{pic.hidden_counts[s]} {s}" for s in STATES if pic.hidden_counts[s])
        parts.append(f'<p class="note hidden-nodes">{pic.hidden_nodes} more node(s) not drawn (the ones drawn: '
                     f"pending pods' closest nodes, then most stranded, tainted, free devices); their devices: "
                     f"{e(counts or 'none')}.</p>")
    if pic.shared:
        parts += ["<h2>Devices not local to one node</h2>",
                  '<p class="note">Pools whose slices select nodes by selector or all nodes.</p>',
                  '<div class="nodes">', *(_node(box) for box in pic.shared), "</div>"]
        if pic.hidden_pools:
            parts.append(f'<p class="note">{pic.hidden_pools} more pool(s) not drawn.</p>')
    if report.get("pod_groups"):
        parts += ["<h2>PodGroups</h2>", _pod_groups(report["pod_groups"])]
    parts += ["<h2>Pending pods</h2>", _pods(pic)]
    unmodelled = report.get("not_modelled") or []
    if unmodelled:
        parts += ["<h2>Not checked</h2>", *(f'<p class="note">{e(row["line"])}</p>' for row in unmodelled)]
    parts.append("</body></html>\n")
    return "\n".join(parts)


def _legend(pic: Picture) -> str:
    items = [f'<li><span class="d {s}"></span> {s} ({pic.totals[s]}): {e(LEGEND[s])}</li>' for s in STATES]
    return '<ul class="legend">' + "".join(items) + "</ul>"


def _domains_note(pic: Picture) -> str:
    names = ", ".join(pic.domain_attributes)
    return (f'<p class="note">Each block is a node; inside, its devices by topology domain (the first of these '
            f"attributes a device has: {e(names)}); partitions sit inside the counter set they share. "
            "Greyed, dashed: not Ready or cordoned. Hover a square for the device.</p>")


def _groups(groups: list[dict[str, Any]]) -> str:
    if not groups:
        return '<p class="note">No pending pod is kept from a node.</p>'
    rows = ["<tr><th>cause</th><th>pods</th><th>which</th><th>what it means; what to do</th></tr>"]
    for g in groups:
        shown = ", ".join(g["pods"][:10]) + (f", and {g['count'] - 10} more" if g["count"] > 10 else "")
        if g.get("pod_groups"):
            shown += "; PodGroups: " + ", ".join(g["pod_groups"])
        meaning = f"{g['meaning']}; " if g["meaning"] else ""
        rows.append(f'<tr class="cause" data-cause="{e(g["cause"])}"><td>{e(g["cause"])}</td>'
                    f'<td class="num">{g["count"]}</td><td>{e(shown)}</td><td>{e(meaning + g["advice"])}</td></tr>')
    return '<table class="groups">' + "".join(rows) + "</table>"


def _cell(cell: Cell) -> str:
    return f'<span class="d {cell.state}" title="{e(cell.title)}"></span>'


def _item(item: Cell | Parent) -> str:
    if isinstance(item, Cell):
        return _cell(item)
    used = sum(1 for c in item.cells if c.state == "used")
    return (f'<span class="parent" title="{e(f"counter set {item.name}: {used} of {len(item.cells)} in use")}">'
            f'<span class="plabel">{e(item.name)}</span><br>' + "".join(_cell(c) for c in item.cells) + "</span>")


def _node(box: NodeBox) -> str:
    kind = "pool" if box.status == "pool" else ("down" if box.status != "Ready" else "")
    head = f'<header>{e(box.name)} <span class="status">{e(box.status)}</span>'
    head += "".join(f' <span class="taint">taint {e(t)}</span>' for t in box.taints) + "</header>"
    out = [f'<section class="node {kind}" data-node="{e(box.name)}">', head]
    counts = ", ".join(f"{box.counts[s]} {s}" for s in STATES if box.counts[s]) or "no devices"
    out.append(f'<div class="counts">{e(counts)}</div>')
    out += [f'<div class="ext">{e(x)}</div>' for x in box.extended]
    for label, items in box.domains:
        inner = "".join(_item(i) for i in items)
        caption = f'<div class="dlabel">{e(label)}</div>' if label else ""
        out.append(f'<div class="domain">{caption}{inner}</div>')
    if box.hidden_devices:
        out.append(f'<div class="counts">{box.hidden_devices} more device(s) not drawn</div>')
    if box.pending:
        out.append(f'<div class="closest">{e(_closest(box.pending))}</div>')
    out.append("</section>")
    return "".join(out)


def _closest(pending: list[tuple[str, str]], shown: int = 3) -> str:
    """The pending pods a node is closest for: how many by reason, and the first few by name."""
    reasons = Counter(reason for _, reason in pending)
    by = ", ".join(f"{n} {r}" for r, n in sorted(reasons.items(), key=lambda kv: (-kv[1], kv[0])))
    names = ", ".join(f"{pod} ({reason})" for pod, reason in pending[:shown])
    more = f", and {len(pending) - shown} more" if len(pending) > shown else ""
    return f"closest node of {len(pending)} pending pod(s): {by}; {names}{more}"


def _pod_groups(rows: list[dict[str, Any]]) -> str:
    """The 1.36+ PodGroups (the report's `pod_groups`): policy, pods, what is in the way and why."""
    out = ["<tr><th>PodGroup</th><th>policy</th><th>pending</th><th>bound</th><th>blocked by</th><th>why</th></tr>"]
    for g in rows:
        blocked = g["blocked_by"] or ("-" if not g["pods"]["pending"] else "(fits)")
        out.append(f'<tr class="podgroup"><td>{e(g["name"])}</td><td>{e(g["policy"])}</td>'
                   f'<td class="num">{g["pods"]["pending"]}</td><td class="num">{g["pods"]["bound"]}</td>'
                   f"<td>{e(blocked)}</td><td>{e(g['why'])}</td></tr>")
    return '<table class="podgroups">' + "".join(out) + "</table>"


def _pods(pic: Picture) -> str:
    if not pic.pods:
        return '<p class="note">none</p>'
    groups = any(p.get("pod_group") for p in pic.pods)  # the PodGroup column only where there are some
    head = "<th>PodGroup</th>" if groups else ""
    rows = [f"<tr><th>namespace/name</th><th>reason</th><th>closest node</th>{head}<th>message</th></tr>"]
    for p in pic.pods:
        node = (p.get("closest") or {}).get("node") or "-"
        group = f'<td>{e(p.get("pod_group") or "")}</td>' if groups else ""
        rows.append(f'<tr class="pod" data-reason="{e(p["reason"])}"><td>{e(p["namespace"])}/{e(p["name"])}</td>'
                    f'<td>{e(p["reason"])}</td><td>{e(node)}</td>{group}<td>{e(p["message"])}</td></tr>')
    more = f'<p class="note">and {pic.hidden_pods} more (all of them: -o json)</p>' if pic.hidden_pods else ""
    return '<table class="pods">' + "".join(rows) + "</table>" + more
