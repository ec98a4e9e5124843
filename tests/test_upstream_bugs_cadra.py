"""The upstream bugs of issue 22's cluster-autoscaler slice (core/kube/bugs.py), each with its scenario under
scenarios/upstream/ and both outcomes: with the bug (as the release has it) and without it (the switch off)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from dralab.core.log.events import ProvisioningRequestCondition, ScaleUpRequested, decode_record
from dralab.core.scenario.load import parse_scenario
from dralab.replay.simulation.sim import SimResult, simulate

ROOT = Path(__file__).resolve().parents[1]
UPSTREAM = ROOT / "scenarios" / "upstream"


def run(name: str, bugs: dict[str, bool] | None = None, seed: int = 1) -> SimResult:
    data: dict[str, Any] = yaml.safe_load((UPSTREAM / f"{name}.yaml").read_text())
    if bugs is not None:
        data["spec"]["kubernetes"]["bugs"] = bugs
    result = simulate(parse_scenario(data, f"{name}.yaml"), seed)
    assert result.violations == [], result.violations
    return result


def conditions(result: SimResult, request: str) -> list[tuple[int, str, str, str]]:
    """(t in s, condition, status, reason) of one ProvisioningRequest, in log order."""
    out = []
    for offset, payload in result.entries:
        record = decode_record(payload, offset)
        out += [(record.t // 1000, e.condition, e.status, e.reason) for e in record.events
                if isinstance(e, ProvisioningRequestCondition) and e.request.endswith("/" + request)]
    return out


def scale_ups(result: SimResult) -> list[tuple[int, str, int]]:
    out = []
    for offset, payload in result.entries:
        record = decode_record(payload, offset)
        out += [(record.t // 1000, e.group, e.delta) for e in record.events if isinstance(e, ScaleUpRequested)]
    return out


def test_autoscaler_10065_check_capacity_never_finds_capacity_for_template_claims() -> None:
    buggy = conditions(run("provreq-claim-templates"), "check")
    assert ("Provisioned", "True", "CapacityIsFound") not in [c[1:] for c in buggy]
    assert ("Provisioned", "False", "CapacityIsNotFound") in [c[1:] for c in buggy]
    fixed = conditions(run("provreq-claim-templates", {"autoscaler#10065": False}), "check")
    assert [c[1:] for c in fixed][:2] == [("Accepted", "True", "Accepted"), ("Provisioned", "True", "CapacityIsFound")]


def test_autoscaler_9805_a_consumed_booking_still_counts_and_hides_free_capacity() -> None:
    buggy = run("booking-double-count")  # 1.36: the bug
    assert [c for c in conditions(buggy, "pretrain") if c[1] == "BookingExpired"] == [
        (600, "BookingExpired", "True", "CapacityReservationTimeExpired")]
    probe = conditions(buggy, "probe")
    assert ("Provisioned", "True", "CapacityIsFound") not in [c[1:] for c in probe]
    assert [c[0] for c in probe if c[3] == "CapacityIsNotFound"][:4] == [10, 70, 190, 430]
    fixed = run("booking-double-count", {"autoscaler#9805": False})
    assert (10, "BookingExpired", "True", "CapacityBookingConsumed") in conditions(fixed, "pretrain")
    assert (10, "Provisioned", "True", "CapacityIsFound") in conditions(fixed, "probe")


def test_autoscaler_9805_follows_the_release() -> None:
    from dralab.core.kube.versions import make_profile
    assert make_profile("1.36").bug("autoscaler#9805") and not make_profile("1.37").bug("autoscaler#9805")
    assert make_profile("1.37").bug("autoscaler#10065") and make_profile("1.37").bug("autoscaler#7683")
