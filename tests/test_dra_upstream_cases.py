"""Fidelity: the upstream DRA allocator test table, restated as dralab cases, run through `dralab allocate`.

Each file in tests/dra_cases/ is a multi-document YAML: real resource.k8s.io/v1 manifests (DeviceClass,
ResourceSlice, ResourceClaim -- those with `status.allocation` are in use --, v1 Node, sometimes a v1
Namespace) plus one `dralab.io/v1alpha1 AllocationTest` document with the expectation:

    spec:
      upstream: <upstream case name>        # or origin: dralab for our own cases
      upstreamSource: v0.35.6 | 1.36 | master-2026
      group: <topic>
      skip: <reason>                        # optional
      featureGates: {DRADeviceTaints: false, ...}  # optional: the case needs gates off; run through the
                                            # Python API (Allocator(features=...)), not the command
      node: node-1
      expect:
        outcome: allocated | unsatisfiable | error
        alsoAccept: [invalid, ...]          # optional; "invalid" means exit 2 (refused at load)
        errorContains: [...]                # optional; each must appear in the message (any case)
                                            # whenever the outcome is not "allocated"
        upstreamError: "..."                # information only
        upstreamAllocateOneCalls: 75        # information only
        claims:                             # for allocated: every claim that was to be allocated
        - name, namespace
          results: [...]                    # in allocation order; shareID: <any> means "present, a UUID"
          nodeSelector: {...}               # compared ignoring the order of terms, requirements, values
          config: [...]                     # optional; when absent the allocation must have no config

The AllocationTest document is dralab's own kind: it is stripped before the manifests are handed to the
command. The command is run in-process (`dralab.cli.main(argv)`) when importable, else as a subprocess.
`dralab allocate` always runs with every allocator feature on; cases that upstream runs with a feature
gate off (spec.featureGates) go through the same Python API the command uses, with those features off.

Until `dralab allocate` and the allocator exist, these tests fail; `test_case_files_are_well_formed`
checks the case files themselves and passes on its own.
"""

from __future__ import annotations

import io
import json
import subprocess
import sys
import uuid
from collections import Counter
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path
from typing import Any

import pytest
import yaml

from dralab.core.dra.features import GATE_FEATURES  # Kubernetes feature gate -> field of the allocator's Features

CASES_DIR = Path(__file__).parent / "dra_cases"
OUTCOMES = {"allocated", "unsatisfiable", "error"}
EXIT_CODES = {"allocated": 0, "unsatisfiable": 1, "error": 1, "invalid": 2}
MANIFEST_KINDS = {"Node", "Namespace", "DeviceClass", "ResourceSlice", "ResourceClaim"}


def case_files() -> list[Path]:
    return sorted(CASES_DIR.glob("*.yaml"))


def load_case(path: Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    docs = [d for d in yaml.safe_load_all(path.read_text()) if d is not None]
    tests = [d for d in docs if d.get("kind") == "AllocationTest"]
    assert len(tests) == 1, f"{path.name}: expected exactly one AllocationTest document, found {len(tests)}"
    return tests[0], [d for d in docs if d.get("kind") != "AllocationTest"]


# ----------------------------------------------------------------------------- running the command


def run_allocate(files: list[Path], node: str) -> tuple[int, str, str]:
    argv = ["allocate"]
    for f in files:
        argv += ["-f", str(f)]
    argv += ["--node", node, "-o", "json"]
    try:
        from dralab.cli import main
    except ImportError:  # pragma: no cover - only when the package is not importable
        proc = subprocess.run([sys.executable, "-m", "dralab", *argv], capture_output=True, text=True, timeout=120)
        return proc.returncode, proc.stdout, proc.stderr
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        try:
            rc = main(argv)
        except SystemExit as exc:  # argparse refuses (e.g. no `allocate` command yet)
            rc = exc.code if isinstance(exc.code, int) else 2
    return int(rc or 0), out.getvalue(), err.getvalue()




def run_with_gates(manifests: list[dict[str, Any]], node: str, gates: dict[str, bool]) -> tuple[int, str, str]:
    """What `dralab allocate` does, through the Python API, with some allocator features off (the command
    has no feature-gate option: it always runs with every feature on)."""
    try:
        from dralab.core.dra.allocated import AllocatedState
        from dralab.core.dra.allocator import Allocator, Features
        from dralab.core.dra.api import ManifestError, parse_documents
        from dralab.core.dra.cel import CelMatcher, SelectorError
        from dralab.core.dra.prepare import AllocationError
    except ImportError as exc:  # pragma: no cover
        pytest.skip(f"allocator Python API not available: {exc}")
    try:
        inventory = parse_documents(manifests, "<case>")
    except ManifestError as exc:
        return 2, "", str(exc)
    features = Features(**{field: gates.get(gate, True) for gate, field in GATE_FEATURES.items()})
    claims = list(inventory.claims.values())
    pending = [c for c in claims if c.allocation is None]
    allocator = Allocator(list(inventory.slices.values()), inventory.classes,
                          AllocatedState.from_claims([c for c in claims if c.allocation is not None]), CelMatcher(),
                          features=features)
    try:
        out = allocator.allocate(inventory.nodes[node], pending)
        report = {"node": node, "outcome": out.outcome, "message": out.message,
                  "claims": [{"name": c.name, "namespace": c.namespace, "allocation": out.allocations[c.key]}
                             for c in pending if c.key in out.allocations]}
    except (AllocationError, SelectorError) as exc:
        report = {"node": node, "outcome": "error", "message": str(exc), "claims": []}
    return (0 if report["outcome"] == "allocated" else 1), json.dumps(report), ""


def parse_report(stdout: str) -> dict[str, Any] | None:
    text = stdout.strip()
    if not text:
        return None
    try:
        report = json.loads(text)
    except json.JSONDecodeError:
        report = json.loads(text.splitlines()[-1])
    assert isinstance(report, dict), f"stdout is not one JSON object: {text[:500]}"
    return report


# ----------------------------------------------------------------------------- normalising for comparison


def _quantity(value: Any) -> Any:
    from dralab.core.kube.quantity import parse_quantity

    return parse_quantity(str(value))


def norm_toleration(t: dict[str, Any]) -> dict[str, Any]:
    out = {"operator": t.get("operator") or "Equal"}
    for k in ("key", "value", "effect"):
        if t.get(k):
            out[k] = t[k]
    if t.get("tolerationSeconds") is not None:
        out["tolerationSeconds"] = t["tolerationSeconds"]
    return out


def norm_result(r: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {k: r.get(k) for k in ("request", "driver", "pool", "device")}
    if r.get("adminAccess"):
        out["adminAccess"] = True
    if r.get("tolerations"):
        out["tolerations"] = [norm_toleration(t) for t in r["tolerations"]]
    for k in ("bindingConditions", "bindingFailureConditions"):
        if r.get(k):
            out[k] = list(r[k])
    if r.get("shareID"):
        out["shareID"] = "<any>"
    if r.get("consumedCapacity"):
        out["consumedCapacity"] = {k: _quantity(v) for k, v in r["consumedCapacity"].items()}
    return out


def norm_node_selector(sel: dict[str, Any] | None) -> Any:
    if not sel:
        return None
    terms = []
    for term in sel.get("nodeSelectorTerms") or []:
        reqs = []
        for kind in ("matchExpressions", "matchFields"):
            for req in term.get(kind) or []:
                reqs.append((kind, req["key"], req["operator"], tuple(sorted(req.get("values") or []))))
        terms.append(tuple(sorted(reqs)))
    return tuple(sorted(terms))


def norm_config(cfgs: list[dict[str, Any]] | None) -> list[dict[str, Any]]:
    out = []
    for c in cfgs or []:
        opaque = dict(c.get("opaque") or {})
        params = opaque.get("parameters")
        if isinstance(params, str):
            params = json.loads(params)
        out.append({"source": c.get("source"), "requests": list(c.get("requests") or []),
                    "driver": opaque.get("driver"), "parameters": params})
    return out


def _nulls(obj: Any, path: str = "") -> list[str]:
    """Paths of explicit nulls: Kubernetes omits empty optional fields rather than writing null."""
    found = []
    if isinstance(obj, dict):
        for k, v in obj.items():
            found += [f"{path}.{k}"] if v is None else _nulls(v, f"{path}.{k}")
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            found += _nulls(v, f"{path}[{i}]")
    return found


# ----------------------------------------------------------------------------- the tests


def test_case_files_are_well_formed() -> None:
    """Every case parses with yaml.safe_load_all and is self-consistent (needs no allocator)."""
    files = case_files()
    assert files, f"no case files in {CASES_DIR}"
    upstream_v035: set[str] = set()
    for path in files:
        test, manifests = load_case(path)
        assert test["apiVersion"] == "dralab.io/v1alpha1", path.name
        assert test["metadata"]["name"] == path.stem, path.name
        spec = test["spec"]
        assert ("upstream" in spec) != ("origin" in spec), f"{path.name}: say upstream or origin"
        if spec.get("upstreamSource") == "v0.35.6" and "/" not in spec["upstream"]:  # not interrupt/off
            upstream_v035.add(spec["upstream"])
        assert set(spec.get("featureGates", {})) <= set(GATE_FEATURES) | {"DRAResourceClaimDeviceStatus"}, path.name
        exp = spec["expect"]
        assert exp["outcome"] in OUTCOMES, path.name
        assert set(exp.get("alsoAccept", [])) <= OUTCOMES | {"invalid"}, path.name
        assert (exp["outcome"] == "allocated") == ("claims" in exp), path.name
        kinds = Counter(d["kind"] for d in manifests)
        assert set(kinds) <= MANIFEST_KINDS, f"{path.name}: {kinds}"
        assert any(d["kind"] == "Node" and d["metadata"]["name"] == spec["node"] for d in manifests), path.name
        for d in manifests:
            if d["kind"] != "Node" and d["kind"] != "Namespace":
                assert d["apiVersion"] == "resource.k8s.io/v1", path.name
        slice_names = [d["metadata"]["name"] for d in manifests if d["kind"] == "ResourceSlice"]
        assert len(slice_names) == len(set(slice_names)), f"{path.name}: duplicate slice names"
        claim_keys = [(d["metadata"]["namespace"], d["metadata"]["name"]) for d in manifests
                      if d["kind"] == "ResourceClaim"]
        assert len(claim_keys) == len(set(claim_keys)), f"{path.name}: duplicate claim names"
        devices = {(d["spec"]["driver"], d["spec"]["pool"]["name"], dev["name"])
                   for d in manifests if d["kind"] == "ResourceSlice" for dev in d["spec"].get("devices", [])}
        pending = {(d["metadata"]["namespace"], d["metadata"]["name"]): d for d in manifests
                   if d["kind"] == "ResourceClaim" and not (d.get("status") or {}).get("allocation")}
        for c in exp.get("claims", []):
            claim = pending[(c["namespace"], c["name"])]
            names = set()
            for rq in claim["spec"]["devices"]["requests"]:
                if "exactly" in rq:
                    names.add(rq["name"])
                for s in rq.get("firstAvailable", []):
                    names.add(f"{rq['name']}/{s['name']}")
            for r in c["results"]:
                assert (r["driver"], r["pool"], r["device"]) in devices, f"{path.name}: {r}"
                assert r["request"] in names, f"{path.name}: {r}"
        if exp["outcome"] == "allocated":
            assert {(c["namespace"], c["name"]) for c in exp["claims"]} == set(pending), path.name
    # The v0.35.6 table has 180 cases; every one is restated (some skipped with a reason).
    assert len(upstream_v035) == 180, len(upstream_v035)


@pytest.mark.parametrize("path", case_files(), ids=lambda p: p.stem)
def test_upstream_case(path: Path, tmp_path: Path) -> None:
    test, manifests = load_case(path)
    spec = test["spec"]
    if spec.get("skip"):
        pytest.skip(spec["skip"])
    exp = spec["expect"]
    accepted = [exp["outcome"], *exp.get("alsoAccept", [])]

    input_file = tmp_path / "input.yaml"
    input_file.write_text(yaml.safe_dump_all(manifests, sort_keys=False))
    if spec.get("featureGates"):
        rc, stdout, stderr = run_with_gates(manifests, spec["node"], spec["featureGates"])
    else:
        rc, stdout, stderr = run_allocate([input_file], spec["node"])
    where = f"{path.name}\n--- stdout\n{stdout[-3000:]}\n--- stderr\n{stderr[-3000:]}"

    report = parse_report(stdout) if rc != 2 else None
    outcome = report["outcome"] if report is not None else ("invalid" if rc == 2 else None)
    assert outcome in accepted, f"outcome {outcome!r} (exit {rc}), expected {accepted}: {where}"
    assert rc == EXIT_CODES[outcome], f"exit {rc} does not fit outcome {outcome!r}: {where}"

    message = (report or {}).get("message") or ""
    if outcome != "allocated":
        text = (message + "\n" + stderr).lower()
        for token in exp.get("errorContains", []):
            assert token.lower() in text, f"message lacks {token!r}: {message or stderr}: {where}"
    if outcome in ("error", "invalid"):
        return
    assert report is not None
    assert report.get("node") == spec["node"], where
    claims_out = report.get("claims") or []
    if outcome == "unsatisfiable":
        assert not [c for c in claims_out if c.get("allocation")], f"unsatisfiable but allocations given: {where}"
        return

    # allocated
    actual = {(c["namespace"], c["name"]): c.get("allocation") for c in claims_out}
    expected = {(c["namespace"], c["name"]): c for c in exp["claims"]}
    assert set(actual) == set(expected), f"claims {sorted(actual)} != {sorted(expected)}: {where}"
    share_ids: list[str] = []
    for key, want in expected.items():
        got = actual[key]
        assert got, f"{key}: no allocation: {where}"
        assert not _nulls(got), f"{key}: explicit nulls at {_nulls(got)}: {where}"
        got_results = (got.get("devices") or {}).get("results") or []
        for r in got_results:
            if r.get("shareID"):
                uuid.UUID(str(r["shareID"]))  # must be a UUID
                share_ids.append(str(r["shareID"]))
        got_norm = [norm_result(r) for r in got_results]
        want_norm = [norm_result(r) for r in want["results"]]
        if got_norm != want_norm:
            same_set = sorted(map(repr, got_norm)) == sorted(map(repr, want_norm))
            hint = " (same results, different order)" if same_set else ""
            pytest.fail(f"{key}: results differ{hint}\n got:  {got_norm}\n want: {want_norm}\n{where}")
        assert norm_node_selector(got.get("nodeSelector")) == norm_node_selector(want.get("nodeSelector")), (
            f"{key}: nodeSelector {got.get('nodeSelector')} != {want.get('nodeSelector')}: {where}")
        got_config = norm_config((got.get("devices") or {}).get("config"))
        assert got_config == norm_config(want.get("config")), (
            f"{key}: config\n got:  {got_config}\n want: {norm_config(want.get('config'))}\n{where}")
    assert len(share_ids) == len(set(share_ids)), f"shareIDs repeat: {share_ids}: {where}"
