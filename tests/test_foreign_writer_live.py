"""The `foreign-writer` fault on the live path (real Ray, the session's redis-server): a stranger appends
junk to the run's stream in both forms of issue 18 (an auto-id `XADD * p junk`, and an entry at the
run's next offset without the payload field). The run completes, its log is complete and verifies, and
every junk entry is in the dead-letter stream exactly once (docs/delivery.md, "Foreign entries")."""

from __future__ import annotations

import uuid
from collections import Counter
from pathlib import Path

import pytest
import yaml

from dralab.actors.live import LiveOptions, run_live_async
from dralab.actors.redis_bus import RedisBus
from dralab.core.log.events import decode_record
from dralab.core.scenario.faults import FieldError, check_fault
from dralab.core.scenario.load import parse_scenario
from dralab.replay.logs.logfile import make_header, read_log, write_log
from dralab.replay.simulation.chaos import DEFAULT_KINDS, LIVE_KINDS, chaos_schedule
from dralab.replay.simulation.verify import verify

QUICKSTART = Path(__file__).resolve().parents[1] / "scenarios" / "quickstart.yaml"
FAULTS = [{"at": "20s", "kind": "foreign-writer", "entries": 4},  # form both: 2 without payload, 2 auto-id
          {"at": "40s", "kind": "foreign-writer", "entries": 2, "form": "auto-id"},
          {"at": "60s", "kind": "foreign-writer", "entries": 1, "form": "no-payload"}]


def test_the_kind_is_checked_with_paths_and_drawn_live_only() -> None:
    with pytest.raises(FieldError, match=r"^spec.faults\[0\].entries: required for a foreign-writer fault"):
        check_fault({"at": "1s", "kind": "foreign-writer"}, 60_000, "spec.faults[0]")
    with pytest.raises(FieldError, match=r"^f.form: "):
        check_fault({"at": "1s", "kind": "foreign-writer", "entries": 1, "form": "pickle"}, 60_000, "f")
    with pytest.raises(FieldError, match=r"^f.entries: "):
        check_fault({"at": "1s", "kind": "foreign-writer", "entries": 0}, 60_000, "f")
    with pytest.raises(FieldError, match=r"^f.node: a foreign-writer fault takes no node"):
        check_fault({"at": "1s", "kind": "foreign-writer", "entries": 1, "node": "n"}, 60_000, "f")
    assert "foreign-writer" not in DEFAULT_KINDS and "foreign-writer" in LIVE_KINDS
    scenario = parse_scenario(yaml.safe_load(QUICKSTART.read_text()), str(QUICKSTART))
    drawn = [f for seed in range(1, 40) for f in chaos_schedule(scenario, seed, ("foreign-writer",), 60.0)]
    assert drawn and all(1 <= f.params["entries"] <= 5 for f in drawn)


@pytest.mark.live
async def test_a_foreign_writer_never_loses_the_run(redis_url: str, ray_session: None, tmp_path: Path) -> None:
    doc = yaml.safe_load(QUICKSTART.read_text())
    doc["spec"]["faults"] = FAULTS
    scenario = parse_scenario(doc, "quickstart-foreign")
    stream = f"t-foreign-{uuid.uuid4().hex[:6]}"
    live = await run_live_async(scenario, LiveOptions(seed=7, redis_url=redis_url, stream=stream, speed=40.0,
                                                      timeout_s=120, progress_every_s=0))
    assert live.error is None and live.completed, live.error
    assert [o for o, _ in live.entries] == list(range(1, len(live.entries) + 1))
    assert live.violations == [] and live.state.anomalies == []
    played = [p for p in live.extra["faults"]["played"] if p["kind"] == "foreign-writer"]
    assert len(played) == 3 and live.extra["faults"]["skipped"] == []
    written = [w for p in played for w in p["written"]]
    assert Counter(w["form"] for w in written) == {"auto-id": 4, "no-payload": 3 - sum(p["refused"] for p in played)}
    # The log is written and verifies; a no-payload entry is the no-op every consumer folded.
    path = tmp_path / "run.dralog"
    write_log(path, make_header(scenario=scenario.name, seed=7, policy={}, mode="local"), live.entries)
    kept = read_log(path)
    assert verify(kept).ok
    records = {o: decode_record(p, o) for o, p in kept.entries}
    bus = await RedisBus.connect(redis_url, stream)
    try:
        letters = await bus.dead_letters()
    finally:
        await bus.close()
    # Each auto-id entry once. (Two can share an id: after a repair puts the stream's last id back, an
    # auto id in the same millisecond is the one a deleted entry had; each physical entry has its letter.)
    assert Counter(d.stream_id for d in letters if d.stream_id) == Counter(
        w["id"] for w in written if w["form"] == "auto-id")
    for w in written:
        if w["form"] != "auto-id":
            offset = int(w["id"].split("-")[0])
            assert [d.offset for d in letters].count(offset) == 1, w
            assert records[offset].id == f"dead-letter/{offset}" and records[offset].events == ()
    assert len(letters) == len(written)  # nothing else was set aside
