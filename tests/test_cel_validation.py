"""The API server's validation of CEL selectors, at load (issue 23): one test per error kind.

Each case starts from a real manifest (tests/fixtures/cel_validation/README.md: dra-example-driver's CEL
selector template, NVIDIA's MIG DeviceClass) that loads as it is, changes one selector into an error the API
server refuses when the object is created (pkg/apis/resource/validation ``validateCELSelector``; the detail
from k8s.io/dynamic-resource-allocation/cel ``CompileCELExpression``), and checks the refusal: exit 2 from
the CLI before any work, the file, document, object and field path, and upstream's words.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from dralab.cli import main
from dralab.core.dra.api import ManifestError, parse_documents
from dralab.core.dra.cel_env import new_expression_error
from dralab.core.kube.versions import LEGACY_PROFILE, make_profile
from dralab.core.scenario.load import ScenarioError, parse_scenario

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "cel_validation"
EXAMPLE = FIXTURES / "example-driver-cel-selector.yaml"  # ResourceClaimTemplate cel-selector/single-gpu-cel
MIG = FIXTURES / "nvidia-mig-1g-12gb.yaml"  # DeviceClass mig-1g-12gb.gpu.nvidia.com

TEMPLATE_SELECTOR = "spec.spec.devices.requests[0].exactly.selectors[{i}].cel.expression"
CLASS_SELECTOR = "spec.selectors[0].cel.expression"

# upstream's "CEL-cost" validation case (from validatingadmissionpolicy_test.go); its worst-case cost is
# 85,555,551 (compile_test.go "expensive"), over resource.CELSelectorExpressionMaxCost = 1,000,000
EXPENSIVE = (
    "[1, 2, 3, 4, 5, 6, 7, 8, 9, 10].all(x, [1, 2, 3, 4, 5, 6, 7, 8, 9, 10].all(y, [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]"
    ".all(z, [1, 2, 3, 4, 5, 6, 7, 8, 9, 10].all(z2, [1, 2, 3, 4, 5, 6, 7, 8, 9, 10].all(z3, [1, 2, 3, 4, 5, 6, 7, 8,"
    " 9, 10].all(z4, [1, 2, 3, 4, 5, 6, 7, 8, 9, 10].all(z5, int('1'.find('[0-9]*')) < 100)))))))"
)


def load(path: Path) -> dict[str, Any]:
    doc: dict[str, Any] = yaml.safe_load(path.read_text())
    return doc


def template_with(expression: str, i: int = 1) -> dict[str, Any]:
    doc = copy.deepcopy(load(EXAMPLE))
    doc["spec"]["spec"]["devices"]["requests"][0]["exactly"]["selectors"][i]["cel"]["expression"] = expression
    return doc


def class_with(expression: str) -> dict[str, Any]:
    doc = copy.deepcopy(load(MIG))
    doc["spec"]["selectors"][0]["cel"]["expression"] = expression
    return doc


def refusal(docs: list[dict[str, Any]]) -> ManifestError:
    with pytest.raises(ManifestError) as info:
        parse_documents(docs, "dump.yaml")
    return info.value


def test_the_real_manifests_load() -> None:
    inventory = parse_documents([load(EXAMPLE), load(MIG)], "real.yaml")
    assert "mig-1g-12gb.gpu.nvidia.com" in inventory.classes


# --- one test per error kind ---------------------------------------------------------------------------------


def test_semver_with_an_ordering_operator_is_refused_at_load() -> None:
    expr = "device.attributes['gpu.dra-example-driver.sigs.k8s.io'].driverVersion >= semver('1.2.0')"
    e = refusal([load(MIG), template_with(expr)])
    assert e.path == "documents[1]." + TEMPLATE_SELECTOR.format(i=1)
    col = expr.index(">=") + 1
    assert e.message == (
        f"ResourceClaimTemplate cel-selector/single-gpu-cel is invalid: Invalid value: {yaml_json(expr)}: "
        f"compilation failed: ERROR: <input>:1:{col}: found no matching overload for '_>=_' applied to "
        f"'(dyn, kubernetes.Semver)'\n | {expr}\n | {'.' * (col - 1)}^"
    )


def test_a_result_that_is_not_bool_is_refused() -> None:
    expr = "device.capacity['gpu.dra-example-driver.sigs.k8s.io'].memory.compareTo(quantity('4Gi'))"
    e = refusal([template_with(expr)])
    assert e.path == TEMPLATE_SELECTOR.format(i=1)
    assert e.message.endswith(f"Invalid value: {yaml_json(expr)}: must evaluate to bool or the unknown type, not int")


@pytest.mark.parametrize("pattern", ["^(?=1g)", "(1g)\\\\1", "1g(?<=g)", "a++"])
def test_a_constant_regex_re2_refuses_is_refused(pattern: str) -> None:
    """cel.ValidateRegexLiterals (the base environment since 1.29): lookaround, backreferences and possessive
    quantifiers are not RE2."""
    expr = f"device.attributes['gpu.nvidia.com'].profile.matches('{pattern}')"
    e = refusal([class_with(expr)])
    assert e.path == CLASS_SELECTOR
    col = expr.index("'", expr.index("matches")) + 1
    assert e.message.startswith("DeviceClass mig-1g-12gb.gpu.nvidia.com is invalid: Invalid value: ")
    assert f"compilation failed: ERROR: <input>:1:{col}: invalid matches argument" in e.message


def test_a_syntax_error_is_refused_with_its_position() -> None:
    expr = "device.driver == 'gpu.nvidia.com' &&"
    e = refusal([class_with(expr)])
    assert "compilation failed: ERROR: <input>:1:37: Syntax error: unexpected end of input" in e.message


def test_an_undefined_field_and_an_undeclared_reference_are_refused() -> None:
    e = refusal([class_with("device.attribute['gpu.nvidia.com'].type == 'mig'")])
    assert "ERROR: <input>:1:7: undefined field 'attribute'" in e.message
    e = refusal([class_with("gpu.type == 'mig'")])
    assert "ERROR: <input>:1:1: undeclared reference to 'gpu' (in container '')" in e.message


def test_a_mixed_list_literal_is_refused() -> None:
    """cel.ValidateHomogeneousAggregateLiterals."""
    e = refusal([class_with("device.attributes['gpu.nvidia.com'].profile in ['1g.12gb', 2]")])
    assert "expected type 'string' but found 'int'" in e.message


def test_a_bad_duration_literal_is_refused() -> None:
    e = refusal([class_with("duration('5 minutes') > duration('1s')")])
    assert "invalid duration argument" in e.message


def test_the_cost_limit_is_forbidden() -> None:
    e = refusal([template_with(EXPENSIVE, i=0)])
    assert e.path == TEMPLATE_SELECTOR.format(i=0)
    assert e.message == ("ResourceClaimTemplate cel-selector/single-gpu-cel is invalid: "
                         "Forbidden: too complex, exceeds cost limit")


def test_an_expression_over_10_kib_is_too_long() -> None:
    expr = "device.driver == '" + "x" * (10 * 1024) + "'"
    e = refusal([class_with(expr)])
    assert e.message.endswith("Too long: may not be more than 10240 bytes")


def test_a_claim_and_a_first_available_subrequest_are_checked() -> None:
    claim = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
             "metadata": {"name": "mig", "namespace": "ml"},
             "spec": {"devices": {"requests": [{"name": "gpu", "firstAvailable": [
                 {"name": "big", "deviceClassName": "mig-1g-12gb.gpu.nvidia.com"},
                 {"name": "small", "deviceClassName": "mig-1g-12gb.gpu.nvidia.com",
                  "selectors": [{"cel": {"expression": "device.attributes['gpu.nvidia.com'].memory"}},
                                {"cel": {"expression": "1"}}]}]}]}}}
    e = refusal([load(MIG), claim])
    assert e.path == "documents[1].spec.devices.requests[0].firstAvailable[1].selectors[1].cel.expression"
    assert e.message.startswith("ResourceClaim ml/mig is invalid: Invalid value: \"1\": must evaluate to bool")


# --- every command refuses it with exit 2 ----------------------------------------------------------------------


def test_the_cli_exits_2_naming_file_object_and_field(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump_all([load(MIG), template_with("device.driver.matches('(?i)a(?!b)')")]))
    for command in ("audit", "schedule", "allocate"):
        code = main([command, "-f", str(bad)])
        out, err = capsys.readouterr()
        assert code == 2 and out == "", err
        assert (f"{bad}: documents[1].spec.spec.devices.requests[0].exactly.selectors[1].cel.expression: "
                "ResourceClaimTemplate cel-selector/single-gpu-cel is invalid: Invalid value: ") in err
        assert "invalid matches argument" in err


def scenario(objects: list[dict[str, Any]], version: str | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "duration": "1m",
        "objects": objects,
        "nodeGroups": [{"name": "g", "max": 1, "template": {"status": {"allocatable": {"cpu": "8", "pods": "10"}}}}],
    }
    if version is not None:
        spec["kubernetes"] = {"version": version}
    return {"apiVersion": "dralab.io/v1alpha1", "kind": "Scenario", "metadata": {"name": "t"}, "spec": spec}


def test_a_scenario_is_refused_at_load() -> None:
    with pytest.raises(ScenarioError) as info:
        parse_scenario(scenario([class_with("device.attributes['gpu.nvidia.com'].type = 'mig'")]))
    assert "spec.objects[0].spec.selectors[0].cel.expression" in str(info.value)
    assert "Syntax error" in str(info.value)


# --- the release's environment for new objects (NewExpressions) -------------------------------------------------

SHARED = "device.driver == 'gpu.nvidia.com' && device.allowMultipleAllocations"


@pytest.mark.parametrize(("version", "refused"), [("1.34", True), ("1.35", True), ("1.36", False), ("1.37", False)])
def test_allow_multiple_allocations_needs_consumable_capacity_in_new_objects(version: str, refused: bool) -> None:
    """compile_test.go "allow_multiple_allocations_disabled": with DRAConsumableCapacity off (alpha in 1.34 and
    1.35) a new selector may not read device.allowMultipleAllocations; a stored one (a dump) may."""
    error = new_expression_error(SHARED, make_profile(version, {}, {}))
    assert (error is not None) is refused
    if refused:
        assert error is not None and "undefined field 'allowMultipleAllocations'" in error
        with pytest.raises(ScenarioError) as info:
            parse_scenario(scenario([class_with(SHARED)], version))
        assert "spec.objects[0].spec.selectors[0].cel.expression" in str(info.value)
    else:
        parse_scenario(scenario([class_with(SHARED)], version))
    assert new_expression_error(SHARED, LEGACY_PROFILE) is None  # the legacy model has the gate on
    parse_documents([class_with(SHARED)], "dump.yaml", profile=make_profile(version, {}, {}))  # stored objects


def yaml_json(text: str) -> str:
    """A value as the API server quotes it in `Invalid value` (JSON)."""
    import json

    return json.dumps(text)
