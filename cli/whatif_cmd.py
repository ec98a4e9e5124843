"""`dralab whatif`: what would each autoscaler policy add for a cluster dump's pending pods, and would they run?

Reads the dump as `dralab audit` does and a file of candidate node groups (the scenario's `spec.nodeGroups[]`
entries, as a list or under `nodeGroups:`), runs the real claim controller, scheduler and autoscaler on it
(dralab.core.analysis.whatif) and prints per policy the scale-ups, their cost and which pods would then run. Exit 0;
exit 2 when an input is invalid (file, path to the field, what was expected).
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from typing import Any

from .bounds import seed_arg
from .dump_release import dump_profile_input
from .inputs import InputError, add_profile_flags, emit, load_inventory, profile_flags

POLICIES = ("count", "dra", "atomic")
EXPANDERS = ("least-waste", "most-pods", "price", "priority", "random")
SHOWN = 10  # pods named per list in the table; the JSON has them all


def add_parser(sub: Any) -> None:
    p = sub.add_parser("whatif", help="what each autoscaler policy would add for a cluster dump's pending pods, "
                                      "and whether they would then run")
    p.add_argument("-f", "--filename", "--file", dest="files", action="append", required=True, metavar="FILE",
                   help="a cluster dump, as for `dralab audit` (repeatable; multi-document or kind: List)")
    p.add_argument("--node-groups", required=True, metavar="FILE",
                   help="candidate node groups: a YAML list of scenario spec.nodeGroups[] entries, or {nodeGroups: "
                        "[...]}")
    p.add_argument("--policy", action="append", choices=POLICIES, metavar="POLICY",
                   help="an autoscaler policy to try: count, dra or atomic (repeatable; default: all three)")
    p.add_argument("--expander", choices=EXPANDERS, default="least-waste",
                   help="how the autoscaler picks among groups that would help (default least-waste)")
    p.add_argument("--seed", type=seed_arg, default=0, help="random seed for ties and generated names (default 0)")
    p.add_argument("-o", "--output", choices=["table", "json"], default="table")
    add_profile_flags(p, dump=True)
    p.add_argument("--log-format", choices=["console", "json"], default="console")
    p.add_argument("--log-level", choices=["debug", "info", "warning", "error"], default="warning")


def load_node_groups(file: str, profile: Any = None) -> Any:
    """The node groups of `file`, checked by the scenario's parser (their gated fields against the dump's
    release `profile`); InputError names the file and field."""
    from dralab.core.analysis.whatif import parse_node_groups
    from dralab.core.kube.fields import FieldError
    from dralab.core.kube.yaml_files import YamlError, load_yaml_file
    from dralab.core.scenario.load import MAX_FILE_BYTES, ScenarioError

    try:
        data = load_yaml_file(file, max_bytes=MAX_FILE_BYTES)
    except YamlError as e:
        raise InputError(str(ScenarioError(file, "", e.message, line=e.line, column=e.column))) from None
    try:
        return parse_node_groups(data, profile)
    except FieldError as e:
        raise InputError(str(ScenarioError(file, e.path, e.message))) from None


def _money(amount: float) -> str:
    return f"${amount:,.0f}/h" if amount == int(amount) else f"${amount:,.2f}/h"


def _some(names: list[str]) -> str:
    return ", ".join(names[:SHOWN]) + (f", ... and {len(names) - SHOWN} more" if len(names) > SHOWN else "")


def render_table(report: dict[str, Any]) -> str:
    """One line per policy ("count: +1 split ($20/h) -> 0 of 2 pending pods would run (2 topology)"), then
    the pods it leaves pending, with the scheduler's reason."""
    total = report["pending_before"]
    fits = report["fits_now"]
    lines = [f"{total} pending pod{'s' if total != 1 else ''}"
             + (f", {len(fits)} fit the cluster as it is ({_some(fits)})" if fits else "")]
    width = max((len(p["policy"]) for p in report["policies"]), default=0) + 1
    for result in report["policies"]:
        added = result["nodes_added"]
        adds = (", ".join(f"+{n} {g}" for g, n in added.items()) + f" ({_money(result['cost_per_hour_added'])})"
                if added else "adds nothing")
        bound = len(result["pods"]["bound"])
        still = result["pods"]["still_pending"]
        line = f"{(result['policy'] + ':').ljust(width)} {adds} -> {bound} of {total} pending pods would run"
        if still:
            reasons = Counter(pod["reason"] for pod in still)
            line += " (" + ", ".join(f"{n} {r}" for r, n in reasons.most_common()) + ")"  # most first
        lines.append(line)
        for pod in still[:SHOWN]:
            lines.append(f"  {pod['namespace']}/{pod['name']}  {pod['reason']}  {pod['message']}")
        if len(still) > SHOWN:
            lines.append(f"  ... and {len(still) - SHOWN} more (-o json lists every pod)")
    lines += [row["line"] for row in report.get("not_modelled") or []]  # fields simulated as if absent
    return "\n".join(lines)


def cmd_whatif(args: argparse.Namespace) -> int:
    from dralab.core.analysis.whatif import whatif
    from dralab.core.kube.versions import profile_config

    profile = dump_profile_input(args.files, profile_flags(args))
    inv = load_inventory(args.files, profile)
    groups = load_node_groups(args.node_groups, profile)
    report = whatif(inv, groups, policies=args.policy or POLICIES, seed=args.seed, expander=args.expander,
                    kubernetes=profile_config(profile))
    if args.output == "json":
        emit(report, "json")
    else:
        sys.stdout.write(render_table(report) + "\n")
    return 0


COMMANDS = {"whatif": cmd_whatif}
