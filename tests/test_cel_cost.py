"""The worst-case cost estimate of DRA selectors (core/dra/cel_cost.py) against upstream's numbers.

Every row is a case of kubernetes/kubernetes staging/src/k8s.io/dynamic-resource-allocation/cel/compile_test.go
that applies to 1.35 (no list-type attributes) with its ``expectCost``: the estimate cel-go's checker makes
with Kubernetes' cost library and the DRA environment's sizes. Validation refuses a selector whose estimate
exceeds resource.CELSelectorExpressionMaxCost (1,000,000).
"""

from __future__ import annotations

import pytest

from dralab.core.dra.cel import CelMatcher
from dralab.core.dra.cel_cost import MAX_COST, estimate
from dralab.core.dra.cel_parse import parse
from dralab.core.dra.cel_syntax import RETURN_TYPES

D = 'device.attributes["dra.example.com"]'
C = 'device.capacity["dra.example.com"]'
ALL = f"""
{C}.quantity.isGreaterThan(quantity("1Ki")) &&
{D}.bool &&
{D}.int > 0 &&
{D}.string == "fish" &&
{D}.version.isGreaterThan(semver("0.0.1")) &&
{C}["quantity"].isGreaterThan(quantity("1Ki")) &&
{D}["bool"] &&
{D}["int"] > 0 &&
{D}["string"] == "fish" &&
{D}["version"].isGreaterThan(semver("0.0.1"))
"""
TEN = "[1, 2, 3, 4, 5, 6, 7, 8, 9, 10]"
EXPENSIVE = (f"{TEN}.all(x, {TEN}.all(y, {TEN}.all(z, {TEN}.all(z2, {TEN}.all(z3, {TEN}.all(z4, {TEN}.all(z5, "
             "int('1'.find('[0-9]*')) < 100)))))))")
MAX_VALUE = 64  # DeviceAttributeMaxValueLength: what a comprehension over an attribute value may iterate

NO = 'device.attributes["no-such-domain"]'
UPSTREAM = [
    ("runtime-error-lookup-identifier", f'{NO}.noSuchAttr.isGreaterThan(quantity("0"))', 6),
    ("runtime-error-lookup-map", f'{NO}["noSuchAttr"].isGreaterThan(quantity("0"))', 6),
    ("domain-check-negative", '"no-such-domain" in device.attributes', 3),
    ("empty-driver-name", 'device.driver == ""', 2),
    ("real-driver-name", 'device.driver == "dra.example.com"', 4),
    ("driver-name-qualifier", f"{D}.name", 4),
    ("driver-name-qualifier-map-lookup", f'{D}["name"]', 4),
    ("bind", f"cel.bind(dra, {D}, dra.name)", 15),
    ("int", f"{D}.name > 0", 5),
    ("string", f'{D}.name == "fish"', 5),
    ("macro-exists-on-int", f"{D}.name.exists(x, x > 0)", 5 + (3 + 3) * MAX_VALUE),
    ("macro-exists-on-bool", f"{D}.name.exists(x, x == true)", 5 + (3 + 3) * MAX_VALUE),
    ("macro-exists-on-string", f'{D}.name.exists(x, x == "fish")', 5 + (3 + 3) * MAX_VALUE),
    ("macro-exists-on-version", f'{D}.name.exists(x, x.isGreaterThan(semver("0.0.1")))', 5 + (3 + 4) * MAX_VALUE),
    ("version", f'{D}.name.isGreaterThan(semver("0.0.1"))', 6),
    ("version_v", f'{D}.name.isGreaterThan(semver("v0.0.1", true)) && isSemver("v1.0.0", true)', 7),
    ("quantity", f'{C}.name.isGreaterThan(quantity("1Ki"))', 6),
    ("check-positive", f'"name" in {C} && {C}.name.isGreaterThan(quantity("1Ki"))', 10),
    ("check-negative", f'!("name" in {C}) || {C}.name.isGreaterThan(quantity("1Ki"))', 11),
    ("all", ALL, 52),
    ("many", f"{D}.a && {D}.b && {D}.c", 12),
    ("check_attribute_domains", 'device.attributes.exists_one(x, x == "dra.example.com")', 164),
    ("check_attribute_ids", f'{D}.exists_one(x, x == "services")', 133),
    ("split_attribute", f'{D}.services.split("example").size() >= 2', 19),
    ("regexp_attribute", f'{D}.services.matches("[^a]?sym")', 18),
    ("check_capacity_domains", 'device.capacity.exists_one(x, x == "dra.example.com")', 164),
    ("check_capacity_ids", f'{C}.exists_one(x, x == "memory")', 133),
    ("expensive", EXPENSIVE, 85555551),
    ("allow_multiple_allocations", "device.allowMultipleAllocations == true", 3),
]


@pytest.mark.parametrize(("expression", "cost"), [c[1:] for c in UPSTREAM], ids=[c[0] for c in UPSTREAM])
def test_upstream_expect_cost(expression: str, cost: int) -> None:
    assert estimate(parse(expression), RETURN_TYPES)[1] == cost


def test_the_limit() -> None:
    """Three nested comprehensions over a device's attribute domains fit (32^3 steps), four do not (32^4 steps
    of about 12 units: 12,785,859); upstream's "expensive" does not either."""
    three = "device.attributes.all(a, device.attributes.all(b, device.attributes.all(c, a != c)))"
    four = ("device.attributes.all(a, device.attributes.all(b, device.attributes.all(c, "
            "device.attributes.all(d, a != d))))")
    assert estimate(parse(three), RETURN_TYPES)[1] < MAX_COST < estimate(parse(four), RETURN_TYPES)[1]
    assert CelMatcher().validation_error(three) is None
    assert CelMatcher().validation_error(four) == ("forbidden", "too complex, exceeds cost limit")
    assert CelMatcher().validation_error(EXPENSIVE) == ("forbidden", "too complex, exceeds cost limit")


def test_equality_of_two_unsized_values_is_priced_one() -> None:
    """dralab's one deliberate difference (core/dra/cel_cost.py _compare): cel-go's formula saturates when
    neither operand has a known size; dralab prices the comparison 1 and accepts the selector."""
    assert estimate(parse('device.capacity["d"].memory == quantity("80Gi")'), RETURN_TYPES)[1] == 6
    assert estimate(parse('device.capacity["d"]["memory"] == quantity("80Gi")'), RETURN_TYPES)[1] == 5  # size 0


def test_a_comprehension_over_a_list_of_unknown_size_is_too_complex() -> None:
    """A list whose size nothing bounds (here a findAll result of a string of unknown length: a map key
    read through a variable that is not a device field) saturates the estimate, as cel-go's does."""
    expr = 'device.attributes["d"].all(k, [k + k].all(s, s.findAll("x").all(y, y == "x")))'
    assert estimate(parse(expr), RETURN_TYPES)[1] > MAX_COST


@pytest.mark.parametrize(("expression", "cost"), [
    ('sets.contains(["a", "b", "c"], ["a"])', 10 + 10 + 3 * 1 + 1),  # two list literals, |a| * |b| + 1
    ('sets.equivalent(["a", "b"], ["b", "a"])', 10 + 10 + 2 * 2 * 2 + 1),  # twice: both directions
    ('sets.intersects(device.attributes["d"].s.split(","), ["x"])', 4 + 13 + 10 + 64 * 1 + 1),  # split: <= 64
])
def test_sets_are_priced_by_their_sizes(expression: str, cost: int) -> None:
    """cel-go ext/sets.go estimateSetsCost (ext.Sets is in Kubernetes' base environment since 1.29)."""
    assert estimate(parse(expression), RETURN_TYPES)[1] == cost
