"""Fidelity material: upstream's test tables for workload-aware scheduling, restated as dralab cases.

Each file in tests/workload_cases/ is a multi-document YAML: real Kubernetes manifests (v1 Node, Pod,
Namespace; scheduling.k8s.io PodGroup, Workload, CompositePodGroup; resource.k8s.io/v1 DeviceClass,
ResourceSlice, ResourceClaim; policy/v1 PodDisruptionBudget) plus one `dralab.io/v1alpha1 SchedulingTest`
document that names the upstream test entry and the outcome expected once the scheduler has acted on the
snapshot (see tests/workload_cases/README.md for the format).

This module checks the case files themselves, so that a runner can trust them: each parses, holds exactly
one SchedulingTest, names only pods, nodes and PodGroups that the file defines, uses a group and a
Kubernetes release dralab knows, and (unless skipped) loads under the release profile it asks for (gates
and API versions, through core/kube/versions.py, the same contract the scenarios use). It also checks that
the README's table of counts says what the files say. Running the cases against the scheduler is the
runner's job, not this module's.
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import yaml

from dralab.core.kube.fields import FieldError
from dralab.core.kube.versions import make_profile

CASES_DIR = Path(__file__).parent / "workload_cases"
README = CASES_DIR / "README.md"
GROUPS = ("gang", "podgroup-cycle", "topology", "preemption", "claims", "composite", "queueing")
VERSIONS = ("1.34", "1.35", "1.36", "1.37")
TEST_KIND = "SchedulingTest"
EXPECT_KEYS = {"bound", "pending", "podGroups", "evicted", "sameDomain"}
SPEC_KEYS = {"upstream", "origin", "upstreamSource", "group", "kubernetes", "skip", "expect", "upstreamExpect"}
GROUP_KINDS = {"PodGroup", "CompositePodGroup"}


def case_files() -> list[Path]:
    return sorted(CASES_DIR.glob("*.yaml"))


def load_case(path: Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The SchedulingTest document and the manifests of one case file."""
    docs = [d for d in yaml.safe_load_all(path.read_text()) if d is not None]
    tests = [d for d in docs if isinstance(d, dict) and d.get("kind") == TEST_KIND]
    assert len(tests) == 1, f"{path.name}: expected exactly one {TEST_KIND} document, found {len(tests)}"
    return tests[0], [d for d in docs if d is not tests[0]]


def _problems(path: Path) -> list[str]:
    """Everything wrong with one case file (empty when it is well formed)."""
    test, manifests = load_case(path)
    out: list[str] = []
    if test.get("apiVersion") != "dralab.io/v1alpha1":
        out.append(f"{TEST_KIND} apiVersion is {test.get('apiVersion')!r}, expected dralab.io/v1alpha1")
    if (test.get("metadata") or {}).get("name") != path.stem:
        out.append(f"{TEST_KIND} metadata.name must be the file's name, {path.stem!r}")
    spec = test.get("spec") or {}
    out += [f"unknown spec field {k!r}" for k in sorted(set(spec) - SPEC_KEYS)]
    group = spec.get("group")
    if group not in GROUPS:
        out.append(f"spec.group {group!r} is not one of {', '.join(GROUPS)}")
    elif not path.stem.startswith(group + "-"):
        out.append(f"file name must start with its group, {group!r}")
    if not isinstance(spec.get("upstream"), str):
        out.append("spec.upstream must be a string (\"\" for a dralab case)")
    elif not spec["upstream"] and spec.get("origin") != "dralab":
        out.append("spec.upstream is empty but spec.origin is not dralab")
    if not spec.get("upstreamSource"):
        out.append("spec.upstreamSource is missing")
    if "skip" in spec and not (isinstance(spec["skip"], str) and spec["skip"].strip()):
        out.append("spec.skip must say why")

    # every manifest is a named Kubernetes object; collect what the file defines
    pods: set[str] = set()
    nodes: set[str] = set()
    groups: set[str] = set()
    for i, m in enumerate(manifests):
        name = ((m.get("metadata") or {}) if isinstance(m, dict) else {}).get("name")
        if not (isinstance(m, dict) and m.get("apiVersion") and m.get("kind") and name):
            out.append(f"document {i}: needs apiVersion, kind and metadata.name")
            continue
        kind = m["kind"]
        if kind == "Pod":
            if name in pods:
                out.append(f"pod name {name!r} is used twice (expectations name pods without namespace)")
            pods.add(name)
        elif kind == "Node":
            nodes.add(name)
        elif kind in GROUP_KINDS:
            groups.add(name)

    expect = spec.get("expect")
    if not isinstance(expect, dict):
        return out + ["spec.expect must be a mapping"]
    out += [f"unknown expect field {k!r}" for k in sorted(set(expect) - EXPECT_KEYS)]
    for pod, where in (expect.get("bound") or {}).items():
        if pod not in pods:
            out.append(f"expect.bound names pod {pod!r}, which the file does not define")
        if where != "*" and where not in nodes:
            out.append(f"expect.bound puts {pod!r} on node {where!r}, which the file does not define")
    for pod, reason in (expect.get("pending") or {}).items():
        if pod not in pods:
            out.append(f"expect.pending names pod {pod!r}, which the file does not define")
        if not isinstance(reason, str):
            out.append(f"expect.pending[{pod}] must be a (possibly empty) substring of the reason")
    both = set(expect.get("bound") or {}) & set(expect.get("pending") or {})
    out += [f"pod {p!r} is expected both bound and pending" for p in sorted(both)]
    evicted = expect.get("evicted")
    if evicted is not None:
        if not isinstance(evicted, list):
            out.append("expect.evicted must be a list")
        else:
            out += [f"expect.evicted names pod {p!r}, which the file does not define" for p in evicted if p not in pods]
    for pg, cond in (expect.get("podGroups") or {}).items():
        if pg not in groups:
            out.append(f"expect.podGroups names {pg!r}, which the file does not define")
        if not (isinstance(cond, dict) and cond.get("type") and cond.get("status") in ("True", "False")):
            out.append(f"expect.podGroups[{pg}] needs type and status True or False")
    same = expect.get("sameDomain")
    if same is not None:
        if not (isinstance(same, dict) and same.get("key") and isinstance(same.get("pods"), list)):
            out.append("expect.sameDomain needs key and pods")
        else:
            out += [f"expect.sameDomain names pod {p!r}, which the file does not define"
                    for p in same["pods"] if p not in pods]
    if not spec.get("skip") and not any(expect.get(k) is not None for k in EXPECT_KEYS):
        out.append("a case that is not skipped must expect something")

    kube = spec.get("kubernetes") or {}
    version = kube.get("version")
    if version not in VERSIONS:
        return out + [f"spec.kubernetes.version {version!r} is not one of {', '.join(VERSIONS)}"]
    if spec.get("skip"):
        return out  # a skipped case may be one dralab refuses to load (that is often why it is skipped)
    try:
        profile = make_profile(version, kube.get("featureGates") or {}, kube.get("runtimeConfig") or {})
        for i, m in enumerate(manifests):
            profile.check_api(m["apiVersion"], m["kind"], f"documents[{i}]")
    except FieldError as exc:
        out.append(f"does not load under its profile: {exc}")
    return out


@pytest.mark.parametrize("path", case_files(), ids=lambda p: p.stem)
def test_case_files_are_well_formed(path: Path) -> None:
    problems = _problems(path)
    assert not problems, f"{path.name}:\n  " + "\n  ".join(problems)


def test_there_are_cases_and_upstream_names_are_unique_per_group() -> None:
    files = case_files()
    assert len(files) >= 100, f"only {len(files)} case files"
    seen: Counter[tuple[str, str, str]] = Counter()
    for path in files:
        test, _ = load_case(path)
        spec = test["spec"]
        if spec["upstream"]:
            flags = tuple(sorted((spec["kubernetes"].get("featureGates") or {}).items()))
            seen[(spec["upstream"], spec["upstreamSource"], repr(flags))] += 1
    dup = [k for k, n in seen.items() if n > 1]
    assert not dup, f"one upstream entry restated twice under the same gates: {dup}"


def _file_counts() -> dict[str, tuple[int, int, int, int]]:
    """group -> (upstream cases found, restated, skipped, dralab cases), from the files."""
    found: Counter[str] = Counter()
    skipped: Counter[str] = Counter()
    own: Counter[str] = Counter()
    for path in case_files():
        spec = load_case(path)[0]["spec"]
        group = spec["group"]
        if spec["upstream"]:
            found[group] += 1
            if spec.get("skip"):
                skipped[group] += 1
        else:
            own[group] += 1
    return {g: (found[g], found[g] - skipped[g], skipped[g], own[g]) for g in GROUPS}


def _readme_counts() -> dict[str, tuple[int, int, int, int]]:
    """The README's table: | group | upstream cases found | restated | skipped | dralab cases | ... |"""
    rows: dict[str, tuple[int, int, int, int]] = {}
    for line in README.read_text().splitlines():
        cells = [c.strip().strip("`*") for c in line.strip().strip("|").split("|")]
        if len(cells) >= 5 and (cells[0] in GROUPS or cells[0] == "total") and all(
                re.fullmatch(r"\d+", c) for c in cells[1:5]):
            rows[cells[0]] = (int(cells[1]), int(cells[2]), int(cells[3]), int(cells[4]))
    return rows


def test_counts_match_readme() -> None:
    files = _file_counts()
    readme = _readme_counts()
    assert set(readme) == set(GROUPS) | {"total"}, f"README table rows: {sorted(readme)}"
    for group in GROUPS:
        assert readme[group] == files[group], (
            f"README row {group!r} says found/restated/skipped/dralab = {readme[group]}, the files say {files[group]}")
    total = tuple(sum(v[i] for v in files.values()) for i in range(4))
    assert readme["total"] == total, f"README total {readme['total']}, files {total}"


def test_a_broken_case_is_caught(tmp_path: Path) -> None:
    """The checks bite: a case that names a pod it does not define, in an unknown group, is refused."""
    good = CASES_DIR / "gang-preenqueue-passes.yaml"
    test, manifests = load_case(good)
    test["spec"]["group"] = "nonsense"
    test["spec"]["expect"]["bound"]["ghost"] = "node9"
    broken = tmp_path / "gang-broken.yaml"
    broken.write_text(yaml.safe_dump_all([*manifests, test]))
    problems = "\n".join(_problems(broken))
    for needle in ("spec.group 'nonsense'", "pod 'ghost'", "node 'node9'", "metadata.name"):
        assert needle in problems, f"{needle!r} not reported in:\n{problems}"
