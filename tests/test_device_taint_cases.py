"""Fidelity: upstream's device taint tables (tests/scheduler_cases/device-taints/, restated as dumps) played against
dralab's scheduler and device taint eviction controller.

The case format and the expectation checks are those of tests/workload_cases (test_workload_cases.py,
test_workload_cases_run.py), imported; a device-taints case may also expect `evictedAt` (pod -> cluster ms of its
eviction, the dump being t=0), `ruleConditions` (rule -> its EvictionInProgress status, reason and message at the
end), `cause` (pod -> its pending cause) and `devices` (claim -> the devices allocated). The run: the dump folded,
then the claim controller, the scheduler and the eviction controller until none has anything to do, time advancing
to their wake-ups up to two hours. The README's table is checked against the files.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from test_workload_cases import load_case
from test_workload_cases_run import SCORE, Run, check, profile_of

from dralab.core.analysis.dump import dump_record
from dralab.core.controllers.claims import ClaimController
from dralab.core.controllers.device_taint_eviction import REASON, DeviceTaintEviction
from dralab.core.dra.api import parse_documents
from dralab.core.kube.versions import profile_config
from dralab.core.log.events import PodEvicted, PodTerminating
from dralab.core.scheduler.reactor import Scheduler
from dralab.core.state.cluster import ClusterState

CASES = Path(__file__).parent / "scheduler_cases" / "device-taints"
README = CASES / "README.md"
GROUPS = ("eviction", "scheduling")
EXTRA = ("evictedAt", "ruleConditions", "cause", "devices")
HORIZON_MS = 2 * 3600 * 1000


class TaintRun(Run):
    """Run's fold and bookkeeping (its `_append`, `_settle`, `key`, `evicted`), with the eviction controller too."""

    def __init__(self, spec: dict[str, Any], manifests: list[dict[str, Any]], name: str) -> None:  # noqa: D107
        # The tables restate upstream's TestController as it is with kubernetes#141290 fixed (its
        # evict-pod-extended-resourceclaim entries came with the fix, resourceclaim.PodClaims): the switch off.
        profile = profile_of(spec)
        self.profile = replace(profile, bugs={**profile.bugs, "kubernetes#141290": False})
        self.dump = dump_record(parse_documents(manifests, name, profile=self.profile))
        self.state, self.records = ClusterState(), []
        self._append(self.dump.record)
        kubernetes = profile_config(self.profile)
        reactors = (ClaimController(), Scheduler(kubernetes=kubernetes, score=SCORE),
                    DeviceTaintEviction(kubernetes=kubernetes))
        now: int | None = 0
        while now is not None and now <= HORIZON_MS:
            wake = self._settle(now, *reactors)
            now = None if wake is None else max(now + 1, wake)

    def evicted_at(self) -> dict[str, int]:
        """When each pod was evicted: upstream's tests see the controller's delete call, which in release profiles
        is the start of the pod's graceful deletion (PodTerminating), its end coming a grace period later."""
        return {e.pod.rsplit("/", 1)[1]: r.t for r in self.records[1:] for e in r.events
                if isinstance(e, PodEvicted) or (isinstance(e, PodTerminating) and e.condition == REASON)}


def check_extra(run: TaintRun, expect: dict[str, Any]) -> list[str]:
    out: list[str] = []
    at = run.evicted_at()
    for pod, t in (expect.get("evictedAt") or {}).items():
        if at.get(pod) != t:
            out.append(f"evictedAt {pod}: expected {t}, got {at.get(pod)}")
    for name, want in (expect.get("ruleConditions") or {}).items():
        state = run.state.dra.taint_rules.rules.get(name)
        got = {k: (state.condition or {}).get(k) for k in want} if state is not None else None
        if got != want:
            out.append(f"ruleConditions {name}: expected {want}, got {got}")
    for pod, cause in (expect.get("cause") or {}).items():
        cond = run.state.pods[run.key(pod)].condition
        if cond is None or cond.cause != cause:
            out.append(f"cause {pod}: expected {cause}, got {cond and (cond.cause, cond.detail)}")
    for claim, devices in (expect.get("devices") or {}).items():
        state = next((c for k, c in run.state.dra.claims.items() if k.endswith("/" + claim)), None)
        allocation = state.allocation if state is not None else None
        allocated = [r["device"] for r in allocation["devices"]["results"]] if allocation else None
        if allocated != devices:
            out.append(f"devices {claim}: expected {devices}, got {allocated}")
    return out


def case_files() -> list[Path]:
    return sorted(CASES.glob("*.yaml"))


@pytest.mark.parametrize("path", case_files(), ids=lambda p: p.stem)
def test_case(path: Path) -> None:
    """One case: skipped with its reason, or played and every expectation met."""
    test, manifests = load_case(path)
    spec = test["spec"]
    assert test["metadata"]["name"] == path.stem and spec["group"] in GROUPS and path.stem.startswith(spec["group"])
    assert set(spec["expect"]) <= {"bound", "pending", "evicted", *EXTRA}, spec["expect"]
    if spec.get("skip"):
        pytest.skip(str(spec["skip"]))
    run = TaintRun(spec, manifests, path.name)
    problems = check(run, spec["expect"]) + check_extra(run, spec["expect"])
    assert not problems, f"{path.name}:\n  " + "\n  ".join(problems)


def test_counts_match_readme() -> None:
    """The README's | group | cases | restated | skipped | dralab | table counts the files."""
    counts: dict[str, Counter[str]] = {g: Counter() for g in GROUPS}
    for path in case_files():
        spec = load_case(path)[0]["spec"]
        c = counts[spec["group"]]
        c["cases"] += 1
        c["skipped" if spec.get("skip") else "restated"] += 1
        c["dralab"] += spec.get("origin") == "dralab"
    files = {g: (c["cases"], c["restated"], c["skipped"], c["dralab"]) for g, c in counts.items()}
    files["total"] = tuple(sum(v[i] for v in files.values()) for i in range(4))  # type: ignore[assignment]
    table = {m.group(1): tuple(int(m.group(i)) for i in range(2, 6))
             for m in re.finditer(r"^\|\s*([a-z]+)\s*\|\s*(\d+)\s*\|\s*(\d+)\s*\|\s*(\d+)\s*\|\s*(\d+)\s*\|",
                                  README.read_text(), re.M)}
    assert table == files, f"README table {table}, the files {files}"
