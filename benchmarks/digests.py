"""Digests of every log dralab makes, to show that a change of structure changes no behaviour.

A refactoring (issue 19: core/ in layers, the scheduler as a framework) must leave every decision as it
was. The strongest cheap evidence is the log itself, byte for byte: this script simulates every scenario in
scenarios/ under each autoscaler policy and seeds 0-2, digests each run's log (offsets and payloads, as
benchmarks/day_bench.py does), digests the records of the committed fixture logs as this dralab reads them,
and digests the day benchmark's log (a short day by default; `--day-hours 24 --day-nodes 1000` for the
documented one).

    python benchmarks/digests.py -o json > now.json            # compute
    python benchmarks/digests.py --check benchmarks/digests.json  # compare: exit 1 on any difference

The "scenarios" section runs every scenario under the legacy profile (core/kube/versions.py LEGACY_PROFILE,
what dralab emulated before Kubernetes version profiles existed), whatever its spec.kubernetes says: that these
digests never changed is the proof that the 1.35 legacy model is unchanged (files that cannot load under it
are skipped and listed on stderr). "scenarios-own-profile" runs each file under its own profile (default 1.37).

tests/test_digests.py runs the scenario and fixture part against the committed benchmarks/digests.json.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
POLICIES = ("count", "dra", "atomic")
SEEDS = (0, 1, 2)


def digest(entries: Iterable[tuple[int, bytes]]) -> str:
    h = hashlib.sha256()
    for offset, payload in entries:
        h.update(offset.to_bytes(8, "big") + payload)
    return h.hexdigest()[:32]


def scenario_files() -> list[Path]:
    return sorted(p for p in (ROOT / "scenarios").rglob("*.yaml"))


def loads_under_legacy(path: Path) -> bool:
    """Whether the file loads under the legacy profile (a scenario using 1.36/1.37 APIs does not)."""
    from dralab.core.kube.versions import LEGACY_PROFILE
    from dralab.core.scenario.load import ScenarioError, load_scenario

    try:
        load_scenario(str(path), profile=LEGACY_PROFILE)
    except ScenarioError:
        return False
    return True


def scenario_digests(files: list[Path] | None = None, *, own_profile: bool = False,
                     skipped: list[str] | None = None) -> dict[str, str]:
    """Each scenario under each policy and seed: under the legacy profile, or (`own_profile`) its own.
    A file that cannot load under the legacy profile is left out and named in `skipped`."""
    import msgspec

    from dralab.core.kube.versions import LEGACY_PROFILE
    from dralab.core.scenario.load import Policy, ScenarioError, load_scenario
    from dralab.replay.simulation.sim import SimulationStuck, Simulator

    out: dict[str, str] = {}
    for path in files or scenario_files():
        try:
            base = load_scenario(str(path), profile=None if own_profile else LEGACY_PROFILE)
        except ScenarioError as exc:
            if own_profile:
                raise
            (skipped if skipped is not None else []).append(f"{path.relative_to(ROOT)}: {exc}")
            continue
        for policy in POLICIES:
            scenario = msgspec.structs.replace(base, policy=Policy(autoscaler=policy))  # type: ignore[arg-type]
            for seed in SEEDS:
                key = f"{path.relative_to(ROOT)}|{policy}|{seed}"
                try:
                    out[key] = digest(Simulator(scenario, seed).run().entries)
                except SimulationStuck as exc:  # a finding is a behaviour too: its message must not change
                    out[key] = "stuck:" + hashlib.sha256(str(exc).encode()).hexdigest()[:16]
    return out


def fixture_digests() -> dict[str, str]:
    from dralab.replay.logs.logfile import read_log

    out: dict[str, str] = {}
    for path in sorted((ROOT / "tests" / "fixtures").rglob("*.dralog")) + sorted(
            (ROOT / "scenarios").rglob("*.dralog")):
        log = read_log(path)
        out[str(path.relative_to(ROOT))] = digest(log.entries) + (f"|damage:{log.damage}" if log.damage else "")
    return out


def day_digest(hours: float, nodes: int, seed: int = 1) -> dict[str, str]:
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from day_bench import scenario

    from dralab.core.kube.versions import LEGACY_PROFILE
    from dralab.core.scenario.load import parse_scenario
    from dralab.replay.simulation.sim import Simulator

    # under the legacy profile, as the "scenarios" section: the same log as before profiles existed
    sc = parse_scenario(scenario(hours, nodes, seed), "day-bench", profile=LEGACY_PROFILE)
    return {f"day-bench|{hours:g}h|{nodes}|seed{seed}": digest(Simulator(sc, seed).run().entries)}


def compute(day_hours: float, day_nodes: int) -> dict[str, Any]:
    started = time.perf_counter()
    skipped: list[str] = []
    result = {"scenarios": scenario_digests(skipped=skipped),
              "scenarios-own-profile": scenario_digests(own_profile=True), "fixtures": fixture_digests(),
              "day": day_digest(day_hours, day_nodes) if day_hours > 0 else {}}
    for line in skipped:
        sys.stderr.write(f"digests: not under the legacy profile: {line}\n")
    sys.stderr.write(f"digests: {sum(len(v) for v in result.values())} in {time.perf_counter() - started:.1f} s\n")
    return result


def differences(expected: dict[str, Any], actual: dict[str, Any]) -> list[str]:
    out = []
    for part, want in expected.items():
        have = actual.get(part, {})
        for key, value in want.items():
            if key in have and have[key] != value:
                out.append(f"{part}: {key}: {value} -> {have[key]}")
            elif key not in have:
                out.append(f"{part}: {key}: missing now")
        out += [f"{part}: {key}: new" for key in have if key not in want]
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--day-hours", type=float, default=2.0, help="the day benchmark's length (0: skip; default 2)")
    ap.add_argument("--day-nodes", type=int, default=200, help="the day benchmark's nodes at start (default 200)")
    ap.add_argument("--check", metavar="FILE", help="compare with FILE; exit 1 on any difference")
    ap.add_argument("-o", "--output", choices=["text", "json"], default="text")
    args = ap.parse_args()
    result = compute(args.day_hours, args.day_nodes)
    if args.check:
        expected = json.loads(Path(args.check).read_text())
        if not args.day_hours:
            expected.pop("day", None)
        diff = differences(expected, result)
        for line in diff:
            print(line)
        print(f"{len(diff)} differences from {args.check}")
        return 1 if diff else 0
    if args.output == "json":
        print(json.dumps(result, indent=1, sort_keys=True))
    else:
        for part, values in result.items():
            for key, value in values.items():
                print(f"{part:9} {value}  {key}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
