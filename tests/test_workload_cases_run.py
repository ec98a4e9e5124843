"""Fidelity: upstream's workload-aware scheduling tables (tests/workload_cases/, restated as snapshots) played
against dralab's scheduler.

For each case that is not skipped: the release profile of its `spec.kubernetes` (core/kube/versions.py), its
manifests read as a cluster dump under that profile (core/dra/api.py `parse_documents`), the dump turned into
the events that lead to it (core/analysis/dump.py), folded; then the real ClaimController and Scheduler (the
latter with `kubernetes=profile_config(profile)`) decide on the fold until neither appends anything, time
advancing to the scheduler's wake-up (backoff, Permit deadlines) up to a horizon. `expect` is checked on the
resulting state: pods bound (to a node, or "*"), pods pending with a substring of their PodScheduled reason
or message, PodGroup conditions, exactly the pods evicted by the run, pods sharing one topology domain.

What a case holds that dralab does not model makes the case fail with the field named (never ignored): such a
case must carry `spec.skip` (see `_unsupported`). tests/workload_cases/README.md's "Results" table is checked
against the outcome per group (`test_results_match_readme`).
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from test_workload_cases import GROUPS, README, case_files, load_case

from dralab.core.analysis.dump import dump_record
from dralab.core.controllers.claims import ClaimController
from dralab.core.controllers.lifecycle import Lifecycle
from dralab.core.dra.api import parse_documents
from dralab.core.engine.contract import Reactor, decide
from dralab.core.kube.versions import Profile, make_profile, profile_config
from dralab.core.log.events import PodEvicted, PodTerminating, Record
from dralab.core.scheduler.queue import MAX_BACKOFF_MS
from dralab.core.scheduler.reactor import Scheduler
from dralab.core.state.cluster import ClusterState

SEED = 7
# kube-scheduler's default profile scores NodeResourcesFit with LeastAllocated (dralab's default is most-allocated);
# the integration cases (TestGangSchedulingPreemptionWithNNN) depend on it: the gang spreads over both nodes
SCORE = "least-allocated"
HORIZON_MS = 6 * MAX_BACKOFF_MS  # long enough for victims to go and the preemptor to be retried after backoff
MAX_ROUNDS = 50


def profile_of(spec: dict[str, Any]) -> Profile:
    k = spec.get("kubernetes") or {}
    return make_profile(str(k.get("version")), k.get("featureGates") or {}, k.get("runtimeConfig") or {})


def _unsupported(manifests: list[dict[str, Any]]) -> list[str]:
    """What the case holds that the dump cannot turn into what Kubernetes would do. Terminating pods,
    nominatedNodeName and schedulerName are modelled (core/analysis/dump.py); PodDisruptionBudgets are read by
    DefaultPreemption (given to the scheduler) but not by workload-aware preemption."""
    out = []
    for i, doc in enumerate(manifests):
        if doc.get("kind") == "PodDisruptionBudget" and any(d.get("kind") == "PodGroup" for d in manifests):
            out.append(f"documents[{i}]: PodDisruptionBudget {doc['metadata']['name']} (not read by PodGroup "
                       "preemption)")
    return out


class Run:
    """The case's dump folded, then the claim controller and the scheduler until neither has anything to do."""

    def __init__(self, spec: dict[str, Any], manifests: list[dict[str, Any]], name: str) -> None:
        self.profile = profile_of(spec)
        inv = parse_documents(manifests, name, profile=self.profile)
        self.dump = dump_record(inv)
        self.state = ClusterState()
        self.records: list[Record] = []
        self._append(self.dump.record)
        claims = ClaimController()
        lifecycle = Lifecycle()  # ends gracefully deleted victims (DefaultPreemption) after their grace period
        pdbs = [m for m in manifests if m.get("kind") == "PodDisruptionBudget"]  # DefaultPreemption reads them
        scheduler = Scheduler(kubernetes=profile_config(self.profile), score=SCORE, pdbs=pdbs)
        now = 0
        for _ in range(MAX_ROUNDS):
            wake = self._settle(now, claims, scheduler, lifecycle)
            if wake is None or wake > HORIZON_MS:
                break
            now = max(now + 1, wake)

    def _append(self, record: Record) -> None:
        self.records.append(record)
        self.state.apply(self.state.offset + 1, record)

    def _settle(self, now: int, *reactors: Reactor) -> int | None:
        wake: int | None = None
        for _ in range(MAX_ROUNDS):
            made = False
            for reactor in reactors:
                record, later = decide(reactor, self.state, now, SEED)
                if record is not None:
                    self._append(record)
                    made = True
                if later is not None and later > now:
                    wake = later if wake is None else min(wake, later)
            if not made:
                return wake
        raise AssertionError(f"the reactors did not settle at t={now}")

    def key(self, name: str) -> str:
        keys = [k for k in self.state.pods if k.rsplit("/", 1)[1] == name]
        assert len(keys) == 1, f"pod {name}: {len(keys)} pods of that name in the fold ({self.dump.skipped})"
        key: str = keys[0]
        return key

    def evicted(self) -> set[str]:
        return {e.pod.rsplit("/", 1)[1] for r in self.records[1:] for e in r.events
                if isinstance(e, (PodEvicted, PodTerminating))}  # a graceful deletion counts from its start


def check(run: Run, expect: dict[str, Any]) -> list[str]:
    """What in `expect` the run does not meet (empty: the case passes)."""
    out: list[str] = []
    pods = run.state.pods
    for name, node in (expect.get("bound") or {}).items():
        got = pods[run.key(name)].node
        if got is None or (node != "*" and got != node):
            cond = pods[run.key(name)].condition
            why = f" ({cond.reason}: {cond.message})" if cond is not None else ""
            out.append(f"bound {name}: expected {node}, got {got}{why}")
    for name, text in (expect.get("pending") or {}).items():
        pod = pods[run.key(name)]
        cond = pod.condition
        said = f"{cond.reason}: {cond.message}" if cond is not None else ""
        if pod.node is not None:
            out.append(f"pending {name}: bound to {pod.node}")
        elif text and (cond is None or (text not in cond.reason and text not in cond.message)):
            out.append(f"pending {name}: expected {text!r} in reason or message, got {said!r}")
    for name, want in (expect.get("podGroups") or {}).items():
        groups = {k.split("/", 1)[1]: g for k, g in run.state.gang.podgroups.items()}
        groups.update({k.split("/", 1)[1]: g for k, g in run.state.gang.composites.items()})
        cond = groups[name].conditions.get(want["type"]) if name in groups else None
        got = (cond.status, cond.reason) if cond is not None else None
        if cond is None or cond.status != want["status"] or ("reason" in want and cond.reason != want["reason"]):
            out.append(f"podGroup {name} {want['type']}: expected {want.get('status')}/{want.get('reason', '*')}, "
                       f"got {got}")
    if "evicted" in expect:
        got_evicted = run.evicted()
        if got_evicted != set(expect["evicted"] or []):
            out.append(f"evicted: expected {sorted(expect['evicted'] or [])}, got {sorted(got_evicted)}")
    same = expect.get("sameDomain")
    if same:
        values = {}
        for name in same["pods"]:
            node = pods[run.key(name)].node
            labels = (run.state.nodes[node].manifest.get("metadata") or {}).get("labels") or {} if node else {}
            values[name] = labels.get(same["key"]) if node else None
        if None in values.values() or len(set(values.values())) != 1:
            out.append(f"sameDomain {same['key']}: {values}")
    return out


def outcome(path: Path) -> tuple[str, list[str]]:
    """("skip", [reason]) | ("pass", []) | ("fail", problems) for one case file."""
    test, manifests = load_case(path)
    spec = test["spec"]
    if spec.get("skip"):
        return "skip", [str(spec["skip"])]
    missing = _unsupported(manifests)
    if missing:
        return "fail", [f"holds what dralab does not model; mark it skip: {m}" for m in missing]
    run = Run(spec, manifests, path.name)
    problems = check(run, spec.get("expect") or {})
    return ("fail" if problems else "pass"), problems


@pytest.mark.parametrize("path", case_files(), ids=lambda p: p.stem)
def test_case(path: Path) -> None:
    result, details = outcome(path)
    if result == "skip":
        pytest.skip(details[0])
    assert result == "pass", f"{path.name}:\n  " + "\n  ".join(details)


def _readme_results() -> dict[str, tuple[int, int, int]]:
    """The README's "Results" table: | group | cases | pass | skip |."""
    text = README.read_text()
    section = text.split("## Results", 1)[1].split("\n## ", 1)[0] if "## Results" in text else ""
    out = {}
    for line in section.splitlines():
        m = re.match(r"\|\s*([a-z-]+)\s*\|\s*(\d+)\s*\|\s*(\d+)\s*\|\s*(\d+)\s*\|", line)
        if m:
            out[m.group(1)] = (int(m.group(2)), int(m.group(3)), int(m.group(4)))
    return out


def test_results_match_readme() -> None:
    """Every case file counts once: cases = pass + skip, where "pass" is every case not skipped (each of those
    must pass test_case, so a failing case fails there, never silently here)."""
    counts: dict[str, Counter[str]] = {g: Counter() for g in GROUPS}
    for path in case_files():
        test, _ = load_case(path)
        counts[test["spec"]["group"]]["cases"] += 1
        counts[test["spec"]["group"]]["skip" if test["spec"].get("skip") else "pass"] += 1
    files = {g: (c["cases"], c["pass"], c["skip"]) for g, c in counts.items()}
    files["total"] = tuple(sum(v[i] for v in files.values()) for i in range(3))  # type: ignore[assignment]
    assert _readme_results() == files, f"README Results table: {_readme_results()}, the files: {files}"
