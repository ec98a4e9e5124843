"""`dralab report`: the series checked against facts the fold states, the CLI's files and exit codes, and
the HTML rendered in headless Chromium (skipped only when chromium is not installed; CI installs it)."""

from __future__ import annotations

import re
import shutil
import subprocess
from collections import Counter
from pathlib import Path

import pytest

from dralab.cli import main
from dralab.core.analysis.metrics import compute_metrics
from dralab.core.analysis.waits import pending_cause
from dralab.core.log.events import Record, ScaleUpRequested, decode_record
from dralab.core.run.config import policies, run_config
from dralab.core.state.cluster import ClusterState
from dralab.inputs import load_scenario_input
from dralab.replay.logs.logfile import make_header, write_log
from dralab.replay.report.report_data import RunData, Steps, extract, resample
from dralab.replay.simulation.sim import Simulator

ROOT = Path(__file__).resolve().parents[1]
RUNS = {  # name -> (scenario file, --autoscaler)
    "quickstart": ("quickstart.yaml", None),
    "race": ("scale-down-race.yaml", None),
    "tm-count": ("topology-mismatch.yaml", "count"),
    "tm-dra": ("topology-mismatch.yaml", "dra"),
    "dra": ("dra-quickstart.yaml", None),
}


def _simulate(name: str) -> tuple[dict[str, object], list[tuple[int, bytes]]]:
    file, autoscaler = RUNS[name]
    scenario = load_scenario_input(str(ROOT / "scenarios" / file), autoscaler)
    seed = scenario.seed if scenario.seed is not None else 0
    entries = Simulator(scenario, seed).run().entries
    header = make_header(scenario=scenario.name, seed=seed, policy=policies(run_config(scenario)), mode="sim")
    return header, entries


@pytest.fixture(scope="module")
def logs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, list[tuple[int, Record]], RunData]]:
    """Every run simulated once: its log file, decoded records, and report data."""
    out = {}
    folder = tmp_path_factory.mktemp("logs")
    for name in RUNS:
        header, entries = _simulate(name)
        path = folder / f"{name}.dralog"
        write_log(path, header, entries)
        records = [(offset, decode_record(payload, offset)) for offset, payload in entries]
        out[name] = (path, records, extract(str(path), header, records))
    return out


def _fold_until(records: list[tuple[int, Record]], t_ms: int) -> ClusterState:
    state = ClusterState()
    for offset, record in records:
        if record.t > t_ms:
            break
        state.apply(offset, record)
    return state


# ---------------------------------------------------------------- data extraction


@pytest.mark.parametrize("name", list(RUNS))
def test_metrics_are_the_cores(logs, name):
    """The report's headline metrics are compute_metrics' over the same records (one fold, same numbers)."""
    _, records, data = logs[name]
    assert data.metrics == compute_metrics(records)


@pytest.mark.parametrize("name", ["quickstart", "race", "tm-count", "dra"])
def test_pending_by_reason_is_the_folds(logs, name):
    """At every record's time, the pending series by reason equals the fold's pending pods by cause."""
    _, records, data = logs[name]
    for t in sorted({r.t for _, r in records}):
        state = _fold_until(records, t)
        expected = Counter(pending_cause(state, p) for p in state.pending_pods())
        got = {k: data.pending.at(k, t / 1000) for k in data.pending.columns}
        assert {k: v for k, v in got.items() if v} == dict(expected), f"at t={t}ms"


@pytest.mark.parametrize("name", ["quickstart", "race", "tm-dra"])
def test_nodes_by_group_and_state_are_the_folds(logs, name):
    _, records, data = logs[name]
    for t in sorted({r.t for _, r in records}):
        state = _fold_until(records, t)
        expected: Counter[tuple[str, str]] = Counter()
        for node in state.nodes.values():
            expected[(node.group, "ready" if node.ready else "not ready")] += 1
        for vm in state.provisioning_nodes.values():
            expected[(vm.group, "provisioning")] += 1
        got = {k: data.nodes.at(k, t / 1000) for k in data.nodes.columns if k[1] != "deleted"}
        assert {k: v for k, v in got.items() if v} == dict(expected), f"at t={t}ms"


def test_deleted_nodes_are_counted(logs):
    """scale-down-race deletes a node: the cumulative deleted count ends at the summary's."""
    _, _, data = logs["race"]
    deleted = sum(v[-1] for (_, st), v in data.nodes.columns.items() if st == "deleted")
    assert deleted == sum(data.summary["nodes_deleted"].values()) >= 1


@pytest.mark.parametrize("name", list(RUNS))
def test_time_to_schedule_has_every_bound_pod(logs, name):
    _, records, data = logs[name]
    state = _fold_until(records, records[-1][1].t)
    bound = sorted((p.bound_t - p.created_t) / 1000 for p in state.pods.values() if p.bound_t >= 0)
    assert data.waits_s == bound
    assert data.never_scheduled == sum(1 for p in state.pods.values() if p.bound_t < 0)
    assert len(data.waits_s) + data.never_scheduled == data.summary["pods"]["total"]


def test_never_scheduled_pods_are_counted(logs):
    """topology-mismatch under `count` leaves its 4 pods pending for topology: none bound."""
    assert logs["tm-count"][2].never_scheduled == 4 and logs["tm-count"][2].waits_s == []
    assert logs["tm-dra"][2].never_scheduled == 0


@pytest.mark.parametrize("name", list(RUNS))
def test_scale_ups_at_their_times(logs, name):
    _, records, data = logs[name]
    expected = [(r.t / 1000, e.group, e.delta) for _, r in records for e in r.events if isinstance(e, ScaleUpRequested)]
    assert [(u.t_s, u.group, u.delta) for u in data.scale_ups] == expected
    if name in ("quickstart", "tm-count"):
        assert expected


@pytest.mark.parametrize("name", ["quickstart", "dra", "tm-count"])
def test_gpu_series_integrate_to_the_metrics(logs, name):
    """The GPU step series, integrated over cluster time, give the metrics' GPU-hours."""
    _, _, data = logs[name]
    g = data.gpus
    ends = [*g.t[1:], data.end_s]

    def hours(col: str) -> float:
        return sum(v * (b - a) for v, a, b in zip(g.columns[col], g.t, ends, strict=True)) / 3600

    assert hours("paid") == pytest.approx(data.metrics.gpu_hours_paid, abs=1e-6)
    assert hours("used") == pytest.approx(data.metrics.gpu_hours_used, abs=1e-6)
    assert hours("idle") == pytest.approx(data.metrics.gpu_hours_idle, abs=1e-5)
    assert data.metrics.gpu_hours_paid > 0


def test_resample_reads_the_step_function():
    steps = Steps([0.0, 10.0, 20.0], {"a": [1, 2, 3]})
    assert resample(steps, 10, 30.0).t == [0.0, 10.0, 20.0, 30.0]  # short: kept, held to the end
    long = Steps([float(i) for i in range(100)], {"a": list(range(100))})
    r = resample(long, 11, 100.0)
    assert len(r.t) == 11 and r.columns["a"] == [long.at("a", x) for x in r.t]


# ---------------------------------------------------------------- CLI


def test_cli_writes_the_report_and_pngs(logs, tmp_path, capsys):
    out, pngs = tmp_path / "r.html", tmp_path / "png"
    argv = ["report", str(logs["quickstart"][0]), "--html", str(out), "--png-dir", str(pngs), "--title", "T<1>"]
    assert main(argv) == 0
    stdout = capsys.readouterr().out
    assert stdout.count("\n") == 1 and str(out) in stdout
    text = out.read_text()
    assert text.count("<svg") == 5 and "T&lt;1&gt;" in text and "<script" not in text
    assert sorted(p.name for p in pngs.iterdir()) == sorted(
        f"{n}.png" for n in ("pending", "nodes", "gpus", "time_to_schedule", "scale_ups"))
    assert all(p.read_bytes().startswith(b"\x89PNG") for p in pngs.iterdir())
    assert "quickstart" in text and "idle GPU-hours" in text


def test_cli_two_logs_of_other_inputs_warns(logs, tmp_path, capsys):
    out = tmp_path / "r.html"
    assert main(["report", str(logs["quickstart"][0]), str(logs["tm-dra"][0]), "--html", str(out)]) == 0
    err = capsys.readouterr().err
    assert "not of the same inputs" in err
    assert "not of the same inputs" in out.read_text()


def test_cli_escapes_strings_from_the_log(logs, tmp_path):
    _, entries = _simulate("quickstart")
    evil = tmp_path / "evil.dralog"
    write_log(evil, make_header(scenario="<script>alert(1)</script>", seed=1, policy={"autoscaler": "<b>x</b>"},
                                mode="sim"), entries)
    out = tmp_path / "r.html"
    assert main(["report", str(evil), "--html", str(out)]) == 0
    text = out.read_text()
    assert "<script" not in text and "&lt;script&gt;" in text and "<b>x" not in text


def test_cli_bad_input_exits_2(logs, tmp_path, capsys):
    good = str(logs["quickstart"][0])
    out = str(tmp_path / "r.html")
    garbage = tmp_path / "garbage.dralog"
    garbage.write_bytes(b"not a log at all")
    damaged = tmp_path / "damaged.dralog"
    damaged.write_bytes(Path(good).read_bytes()[:-40])
    cases = [
        (["report", good, good, good, "--html", out], "at most two"),
        (["report", str(tmp_path / "missing.dralog"), "--html", out], "missing.dralog"),
        (["report", str(garbage), "--html", out], "garbage.dralog"),
        (["report", good, "--html", str(tmp_path / "no" / "such" / "r.html")], "r.html"),
        (["report", good, "--html", str(tmp_path)], "directory"),
    ]
    for argv, said in cases:
        assert main(argv) == 2, argv
        captured = capsys.readouterr()
        assert said in captured.err and captured.out == "", (argv, captured.err)


def test_a_log_cut_short_is_drawn_up_to_its_damage(logs, tmp_path, capsys):
    """A recording cut short (the file ends without its index): the intact prefix is drawn, and said."""
    good = Path(logs["quickstart"][0])
    damaged = tmp_path / "cut.dralog"
    damaged.write_bytes(good.read_bytes()[:-40])
    out = tmp_path / "r.html"
    assert main(["report", str(damaged), "--html", str(out)]) == 0
    captured = capsys.readouterr()
    assert "cut.dralog: damaged log, drawn up to the damage" in captured.err
    assert "damaged log, drawn up to the damage" in out.read_text()
    nothing = tmp_path / "nothing.dralog"
    nothing.write_bytes(good.read_bytes()[:20])
    assert main(["report", str(nothing), "--html", str(out)]) == 2
    assert "nothing.dralog" in capsys.readouterr().err


# ---------------------------------------------------------------- rendered in a browser


def _png_colours(path: Path) -> int:
    """Distinct colours of a PNG (decoded by matplotlib: numpy, fast on a 1400x4000 screenshot)."""
    import matplotlib.image
    import numpy

    rgb = (matplotlib.image.imread(str(path))[..., :3] * 255).astype(numpy.uint32)
    return len(numpy.unique((rgb[..., 0] << 16) | (rgb[..., 1] << 8) | rgb[..., 2]))


def test_report_renders_in_chromium(logs, tmp_path):
    chromium = shutil.which("chromium")
    if chromium is None:
        pytest.skip("chromium is not installed (CI installs it: .ci/run)")
    out = tmp_path / "report.html"
    assert main(["report", str(logs["tm-count"][0]), str(logs["tm-dra"][0]), "--html", str(out)]) == 0
    base = [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
            f"--user-data-dir={tmp_path / 'profile'}"]
    dom = subprocess.run([*base, "--dump-dom", out.as_uri()], capture_output=True, text=True, timeout=60,
                         check=True).stdout
    svgs = re.findall(r"<svg\b.*?</svg>", dom, flags=re.S)
    assert len(svgs) == 5
    assert all(svg.count("<path") > 20 for svg in svgs)
    assert "<table" in dom and "autoscaler dra" in dom
    assert "end at different cluster times" in dom  # count waits on to the end, dra's log ends early
    shot = tmp_path / "shot.png"
    subprocess.run([*base, f"--screenshot={shot}", "--window-size=1400,4000", out.as_uri()],
                   capture_output=True, timeout=60, check=True)
    assert shot.exists() and _png_colours(shot) > 50
