"""Observability of a live run (actors/observability.py): the metric families as pure functions of the
driver's fold and the actors' stats, the /metrics endpoint scraped over HTTP while a real run (Redis,
Ray) goes on, the progress line, and the `actor` / `offset` fields of log lines."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterable
from pathlib import Path

import pytest
from conftest import QuickstartLive
from conftest import free_port as _free_port
from conftest import scrape as _scrape
from prometheus_client.core import Metric
from prometheus_client.exposition import generate_latest
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.registry import Collector, CollectorRegistry

from dralab.actors.bus import GroupInfo
from dralab.actors.observability import (
    LATENCY_BUCKETS,
    Observation,
    allocation_latencies,
    autoscaler_node_states,
    families,
    histogram_buckets,
    nodes_by_group_state,
    pending_by_reason,
    progress,
    progress_text,
)
from dralab.core.log.events import decode_record
from dralab.core.scenario.load import load_scenario
from dralab.core.state.cluster import ClusterState
from dralab.replay.simulation.sim import simulate

ROOT = Path(__file__).resolve().parents[1]
QUICKSTART = ROOT / "scenarios" / "quickstart.yaml"


# ---------------------------------------------------------------------------------- pure functions


def _states() -> list[ClusterState]:
    """The quickstart's state after every record of a simulated run (one state object, copied)."""
    import copy

    entries = simulate(load_scenario(QUICKSTART), 7).entries
    state, out = ClusterState(), []
    for offset, payload in entries:
        state.apply(offset, decode_record(payload, offset))
        out.append(copy.deepcopy(state))
    return out


@pytest.fixture(scope="module")
def states() -> list[ClusterState]:
    return _states()


def _samples(obs: Observation) -> dict[str, dict[tuple[tuple[str, str], ...], float]]:
    """Render the families as Prometheus text (as the endpoint does) and parse them back."""

    class Fixed(Collector):
        def collect(self) -> Iterable[Metric]:
            return families(obs)

    registry = CollectorRegistry(auto_describe=False)
    registry.register(Fixed())
    return _parse(generate_latest(registry).decode())


def _parse(text: str) -> dict[str, dict[tuple[tuple[str, str], ...], float]]:
    out: dict[str, dict[tuple[tuple[str, str], ...], float]] = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out.setdefault(s.name, {})[tuple(sorted(s.labels.items()))] = s.value
    return out


def test_histogram_buckets_are_cumulative() -> None:
    buckets, total = histogram_buckets([0.1, 1.0, 3.0, 1e9], (0.5, 1.0, 2.0))
    assert buckets == [("0.5", 1.0), ("1.0", 2.0), ("2.0", 2.0), ("+Inf", 4.0)]
    assert total == pytest.approx(1e9 + 4.1)
    assert histogram_buckets([], (1.0,)) == ([("1.0", 0.0), ("+Inf", 0.0)], 0.0)


def test_metrics_agree_with_the_fold_at_every_step(states: list[ClusterState]) -> None:
    saw_pending = saw_provisioning = saw_scale_up = False
    for state in states:
        reasons = pending_by_reason(state)
        assert sum(reasons.values()) == len(state.pods_by_phase["Pending"])
        nodes = nodes_by_group_state(state)
        assert sum(n for (_, st), n in nodes.items() if st != "Provisioning") == len(state.nodes)
        assert sum(n for (_, st), n in nodes.items() if st == "Ready") == sum(n.ready for n in state.nodes.values())
        ca = autoscaler_node_states(state)
        assert sum(ca.values()) == len(state.nodes) + len(state.provisioning_nodes)
        saw_pending |= any(r not in ("not-yet-tried", "gang") for r in reasons)
        saw_provisioning |= bool(state.provisioning_nodes)
        saw_scale_up |= bool(state.scale_ups)
    assert saw_pending and saw_provisioning and saw_scale_up, "the quickstart should exercise every family"


def test_exposition_of_a_mid_run_state(states: list[ClusterState]) -> None:
    # the first state with a provisioning node and an unschedulable pod: a scale-up under way
    state = next(s for s in states if s.provisioning_nodes and s.pending_pods() and s.scale_ups)
    obs = Observation(
        state=state, cluster_time_s=state.t / 1000,
        records_by_source={"scenario": 5, "scheduler": 3}, events_by_source={"scenario": 9, "scheduler": 4},
        actors={"scheduler": {"applied": 40, "acked": 39, "decisions": 3, "conflicts": 1, "view_offset": 40},
                "autoscaler": {"error": "RayActorError: restarting"}},
        restarts={"scheduler": 1},
        groups={"scheduler": GroupInfo(last_delivered=38, pending=2), "recorder": GroupInfo(42, 0)},
        log_end=42, trimmed=7,
    )
    m = _samples(obs)
    assert m["dralab_log_records_total"] == {(("source", "scenario"),): 5, (("source", "scheduler"),): 3}
    assert m["dralab_log_events_total"][(("source", "scheduler"),)] == 4
    assert m["dralab_consumer_group_lag"] == {(("group", "recorder"),): 0, (("group", "scheduler"),): 4}
    assert m["dralab_consumer_group_pending"][(("group", "scheduler"),)] == 2
    assert m["dralab_actor_up"] == {(("actor", "autoscaler"),): 0, (("actor", "scheduler"),): 1}
    assert m["dralab_actor_restarts_total"][(("actor", "scheduler"),)] == 1
    assert m["dralab_actor_entries_applied_total"] == {(("actor", "scheduler"),): 40}
    assert m["dralab_actor_conflicts_total"][(("actor", "scheduler"),)] == 1
    assert m["dralab_log_trimmed_entries_total"][()] == 7
    pending = {dict(k)["reason"]: v for k, v in m["dralab_pending_pods"].items()}
    assert pending == pending_by_reason(state) and sum(pending.values()) == len(state.pending_pods())
    queues = {dict(k)["queue"]: v for k, v in m["scheduler_pending_pods"].items()}
    assert queues["active"] + queues["unschedulable"] == len(state.pending_pods()) - pending.get("gang", 0)
    nodes = {(dict(k)["node_group"], dict(k)["state"]): v for k, v in m["dralab_nodes"].items()}
    assert nodes == {k: float(v) for k, v in nodes_by_group_state(state).items()}
    assert any(st == "Provisioning" for _, st in nodes)
    assert m["cluster_autoscaler_nodes_count"][(("state", "unregistered"),)] == len(state.provisioning_nodes)
    assert m["cluster_autoscaler_node_groups_count"][(("node_group_type", "autoscaled"),)] == len(state.node_groups)
    assert m["cluster_autoscaler_scaled_up_nodes_total"][()] == sum(d for _, _, d in state.scale_ups)
    assert sum(m["dralab_scale_ups_total"].values()) == len(state.scale_ups)
    bound = allocation_latencies(state)
    assert m["dralab_pod_scheduling_sli_duration_seconds_count"][()] == len(bound) == state.runs
    assert m["dralab_pod_scheduling_sli_duration_seconds_sum"][()] == pytest.approx(sum(bound))
    assert len(m["dralab_pod_scheduling_sli_duration_seconds_bucket"]) == len(LATENCY_BUCKETS) + 1
    assert m["scheduler_schedule_attempts_total"][(("result", "scheduled"),)] == state.runs


def test_progress_line_fields_and_text(states: list[ClusterState]) -> None:
    state = next(s for s in states if s.provisioning_nodes and s.pending_pods())
    fields = progress(Observation(state=state, cluster_time_s=123.45, restarts={"scheduler": 2}), 52.34)
    assert fields["cluster_time_s"] == 123.5 and fields["events_per_s"] == 52.3
    assert fields["actors_restarted"] == 2 and fields["pods_pending"] == len(state.pending_pods())
    text = progress_text(fields)
    assert "\n" not in text and text.startswith("t=123.5s")
    assert f"pending {len(state.pending_pods())} (" in text and "coming" in text and "restarts 2" in text
    json.dumps(fields)  # a run.progress log line in JSON


def test_status_line_is_cleared_around_log_lines(capsys: pytest.CaptureFixture[str]) -> None:
    import structlog

    from dralab.actors.logs import clear_status, configure, show_status

    configure("console")
    try:
        show_status("t=1.0s events 3")
        structlog.get_logger("t").info("hello")
        show_status("t=2.0s events 5")
        clear_status()
    finally:
        clear_status()
    err = capsys.readouterr().err
    assert err.startswith("\r\x1b[Kt=1.0s events 3\r\x1b[K")  # the line, cleared before the log line
    assert "hello" in err and err.endswith("t=2.0s events 5\n")


# ---------------------------------------------------------------------------------- a live run


@pytest.mark.live
@pytest.mark.timeout(180)
async def test_metrics_endpoint_during_a_live_run(quickstart_live: QuickstartLive) -> None:
    """The session's live quickstart run (conftest.py; tests/test_live.py checks its end state) had the
    endpoint on: it was scraped (up to twice, at two log offsets) while the run went on."""
    url, scrapes = quickstart_live.url, [{**s, "metrics": _parse(s["raw"])} for s in quickstart_live.scrapes]
    live = quickstart_live.live
    assert live.completed
    assert scrapes, "the run ended before the endpoint could be scraped"
    m, raw = scrapes[-1]["metrics"], scrapes[-1]["raw"]
    assert "# HELP dralab_pod_scheduling_sli_duration_seconds" in raw and "CLUSTER seconds" in raw
    for actor in ("scheduler", "autoscaler", "cloud", "lifecycle"):
        assert m["dralab_actor_up"][(("actor", actor),)] == 1
        assert m["dralab_actor_entries_applied_total"][(("actor", actor),)] > 0
        assert (("group", actor),) in m["dralab_consumer_group_lag"]
    assert (("group", "recorder"),) in m["dralab_consumer_group_lag"]
    assert all(v >= 0 for v in m["dralab_consumer_group_lag"].values())
    assert m["dralab_log_records_total"][(("source", "scenario"),)] > 0
    assert m["dralab_log_records_total"][(("source", "scheduler"),)] >= 1
    assert m["dralab_log_offset"][()] >= scrapes[-1]["offset"]
    assert m["dralab_cluster_time_seconds"][()] > 0
    assert m["dralab_pod_scheduling_sli_duration_seconds_count"][()] >= 1
    assert m["scheduler_schedule_attempts_total"][(("result", "scheduled"),)] >= 1
    assert sum(v for k, v in m["dralab_nodes"].items() if dict(k)["state"] == "Ready") >= 1
    assert "scheduler_pending_pods" in m and "cluster_autoscaler_nodes_count" in m
    assert m["cluster_autoscaler_node_groups_count"][(("node_group_type", "autoscaled"),)] >= 1
    # the endpoint goes away with the run
    with pytest.raises(urllib.error.URLError):
        await asyncio.to_thread(_scrape, url)


def test_progress_on_stderr_never_in_json_stdout(redis_url: str, tmp_path: Path) -> None:
    """`dralab run -o json` with console logs on a pipe: progress as run.progress lines on stderr, with
    the new fields; stdout is the one summary object."""
    proc = subprocess.run(
        [sys.executable, "-m", "dralab", "run", str(QUICKSTART), "--redis", redis_url, "--speed", "60", "-o", "json",
         "--progress-every", "0.5", "--metrics-port", str(_free_port())],
        capture_output=True, text=True, timeout=240,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = json.loads(proc.stdout)  # exactly one object: nothing else on stdout
    assert summary["pods"]["pending"] == 0
    assert "run.progress" not in proc.stdout and "\r" not in proc.stdout
    progress_lines = [line for line in proc.stderr.splitlines() if "run.progress" in line]
    assert progress_lines, proc.stderr[-2000:]
    assert all("events_per_s=" in line and "actors_restarted=" in line for line in progress_lines)
    assert "run.metrics" in proc.stderr and "http://127.0.0.1:" in proc.stderr


def test_run_refuses_a_bad_metrics_port() -> None:
    proc = subprocess.run([sys.executable, "-m", "dralab", "run", str(QUICKSTART), "--metrics-port", "70000"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "--metrics-port" in proc.stderr
