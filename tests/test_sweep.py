"""Sweeps without Ray: the grid (generic over ReplayConfig, ranges, did-you-mean), the
in-process run path, resume after a kill, the statistics across seeds (checked against
hand-computed Student-t intervals) and the report's sweep page."""

from __future__ import annotations

import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from typer.testing import CliRunner

from gpu_trace.cli import app
from gpu_trace.display import duration_text
from gpu_trace.errors import GpuTraceError
from gpu_trace.replay import sweep as sw
from gpu_trace.replay import sweep_grid as sg
from gpu_trace.replay import sweep_stats as st
from gpu_trace.store.scan import scan

runner = CliRunner()
ROOT = Path(__file__).resolve().parents[1]

# two-sided 95 % Student-t critical values (any printed t table)
T95 = {2: 12.7062, 3: 4.3027, 10: 2.2622}

WINDOW = {"window_start": "1970-05-01", "window_end": "1970-05-08"}


def cli(*args: object) -> Any:
    return runner.invoke(app, [str(a) for a in args])


def toml(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


# --- the grid -----------------------------------------------------------------------


def test_ranges_expand_exactly_both_ends_included() -> None:
    spec = sg.parse(
        {"source": "openb", "grid": {"load": "0.8:1.4:0.1", "seed": "0-9", "placement": "a,b"}},
        "t",
    )
    assert spec.axes["load"] == (0.8, 0.9, 1.0, 1.1, 1.2, 1.3, 1.4)
    assert spec.axes["seed"] == tuple(range(10))
    assert spec.axes["placement"] == ("a", "b")
    assert len(spec.points()) == 7 * 10 * 2
    # the last axis varies fastest
    assert spec.points()[:2] == [
        {"load": 0.8, "seed": 0, "placement": "a"},
        {"load": 0.8, "seed": 0, "placement": "b"},
    ]


def test_any_replayconfig_field_is_sweepable_and_typed() -> None:
    spec = sg.parse(
        {
            "source": "openb",
            "fixed": {"departures": "false", "restore_s": 30},
            "grid": {"inflate_to": "1.0:1.2:0.1", "cluster": ["32x8", "64x8"]},
        },
        "t",
    )
    assert spec.fixed == {"departures": False, "restore_s": 30.0}
    assert spec.axes["inflate_to"] == (1.0, 1.1, 1.2)
    configs = [c for _, c in spec.configs()]
    assert len(configs) == 6
    assert {c.cluster for c in configs} == {"32x8", "64x8"}
    assert all(c.departures is False and c.restore_s == 30.0 for c in configs)


@pytest.mark.parametrize(
    ("doc", "message"),
    [
        ({"source": "openb", "grid": {"schedular": ["fifo"]}}, "did you mean 'scheduler'?"),
        ({"source": "openb", "fixed": {"lod": 1.0}}, "did you mean 'load'?"),
        ({"source": "openb", "gird": {}}, "did you mean 'grid'?"),
        ({"source": "openb", "grid": {"load": "abc"}}, "'abc' is not a number"),
        ({"source": "openb", "grid": {"load": "1.4:0.8:0.1"}}, "ends before it starts"),
        ({"source": "openb", "grid": {"load": "0.8:1.4:0"}}, "needs a step > 0"),
        ({"source": "openb", "grid": {"seed": "0:2:0.5"}}, "is not all integers"),
        ({"source": "openb", "grid": {"seed": [1, 1]}}, "1 is listed twice"),
        ({"source": "openb", "grid": {"load": [True]}}, "True is not a float"),
        ({"source": "openb", "grid": {"run_id": ["x"]}}, "run ids are derived"),
        ({"grid": {"seed": [1]}}, "`source` (the replayed source, e.g. openb) is required"),
        (
            {"source": "openb", "fixed": {"seed": 1}, "grid": {"seed": [2]}},
            "seed is both fixed and swept",
        ),
    ],
)
def test_bad_grids_fail_with_one_line_naming_the_key(doc: dict[str, Any], message: str) -> None:
    with pytest.raises(sg.SweepSpecError) as exc:
        sg.parse(doc, "s.toml")
    text = str(exc.value)
    assert text.startswith("s.toml: ")
    assert message in text
    assert "\n" not in text


def test_a_policy_typo_names_the_file_before_anything_runs(tmp_path: Path) -> None:
    path = toml(tmp_path / "s.toml", 'source = "openb"\n[grid]\nscheduler = ["fifo", "fifx"]\n')
    with pytest.raises(sg.SweepSpecError, match=r"s\.toml: unknown scheduling policy 'fifx'"):
        sg.load(path).configs()


def test_toml_syntax_error_names_line(openb_store: Path, tmp_path: Path) -> None:
    path = toml(tmp_path / "s.toml", 'source = "openb"\n[grid]\nseed = 0-2\n')
    result = cli(
        "replay", "sweep", path, "--out", tmp_path / "out", "--workers", "1",
        "--store", openb_store,
    )  # fmt: skip
    assert result.exit_code == 1
    line = result.stderr.strip().splitlines()[-1]
    assert "s.toml: " in line and "(at line 3, column 9)" in line


# --- statistics (hand-computed) -----------------------------------------------------


def test_t_critical_values_match_the_table() -> None:
    for n, t in T95.items():
        got = st.t_critical(n)
        assert got is not None and abs(got - t) < 1e-4
    assert st.t_critical(1) is None


def test_mean_and_interval_across_three_seeds() -> None:
    runs = pl.DataFrame(
        {
            "scheduler": ["fifo"] * 3 + ["sjf"] * 3 + ["las"],
            "seed": [0, 1, 2, 0, 1, 2, 0],
            "jct_mean_s": [10.0, 20.0, 30.0, 8.0, 15.0, 31.0, 5.0],
            "alloc_mean_ratio": [0.5, 0.6, float("nan"), 0.4, 0.5, 0.6, 0.9],
        }
    )
    out = st.summarize(runs, ["scheduler"], ["jct_mean_s", "alloc_mean_ratio"])
    fifo = out.filter((pl.col("scheduler") == "fifo") & (pl.col("metric") == "jct_mean_s")).row(
        0, named=True
    )
    # mean 20, sample sd sqrt(((-10)^2 + 0 + 10^2) / 2) = 10, half = 4.3027 * 10 / sqrt(3)
    assert fifo["n"] == 3 and fifo["mean"] == 20.0 and fifo["sd"] == pytest.approx(10.0)
    assert fifo["half"] == pytest.approx(4.302653 * 10 / math.sqrt(3), rel=1e-6)
    assert fifo["lo"] == pytest.approx(20.0 - 24.841377, rel=1e-6)
    # NaN does not count: n = 2, mean .55, sd .0707, half = 12.7062 * .070711 / sqrt(2)
    alloc = out.filter((pl.col("scheduler") == "fifo") & (pl.col("metric") == "alloc_mean_ratio"))
    a = alloc.row(0, named=True)
    assert a["n"] == 2 and a["mean"] == pytest.approx(0.55)
    assert a["half"] == pytest.approx(12.706205 * math.sqrt(0.005) / math.sqrt(2), rel=1e-5)
    # one seed: a mean and no interval
    las = out.filter((pl.col("scheduler") == "las") & (pl.col("metric") == "jct_mean_s"))
    assert las["n"][0] == 1 and las["mean"][0] == 5.0 and las["half"][0] is None


def test_paired_difference_on_the_same_seeds() -> None:
    runs = pl.DataFrame(
        {
            "scheduler": ["fifo"] * 3 + ["sjf"] * 3,
            "seed": [0, 1, 2, 2, 1, 0],  # order must not matter: pairs are by seed
            "jct_mean_s": [10.0, 20.0, 30.0, 31.0, 15.0, 8.0],
        }
    )
    out = st.paired(runs, "scheduler", "fifo", "sjf", [], ["jct_mean_s"]).row(0, named=True)
    # differences 10-8=2, 20-15=5, 30-31=-1: mean 2, sd 3, half 4.3027 * 3 / sqrt(3)
    assert out["n"] == 3 and out["mean"] == pytest.approx(2.0)
    assert out["sd"] == pytest.approx(3.0)
    assert out["half"] == pytest.approx(4.302653 * 3 / math.sqrt(3), rel=1e-6)
    assert (out["a"], out["b"]) == ("fifo", "sjf")


# --- running a sweep in process -----------------------------------------------------


def grid(tmp_path: Path, seeds: str = "0-2") -> Path:
    return toml(
        tmp_path / "sweep.toml",
        f"""
source = "openb"
name = "t"
[fixed]
cluster = "32x8"
window_start = "{WINDOW["window_start"]}"
window_end = "{WINDOW["window_end"]}"
[grid]
scheduler = ["fifo", "sjf"]
placement = "random"
seed = "{seeds}"
""",
    )


def stored(store: Path) -> pl.DataFrame:
    return scan(store, "replay_runs", ["openb"]).collect()


def test_in_process_sweep_stores_each_run_once_and_resume_skips(
    store_copy: Path, tmp_path: Path
) -> None:
    out = tmp_path / "sw"
    result = cli(
        "replay", "sweep", grid(tmp_path), "--out", out, "--store", store_copy, "--workers", "1"
    )
    assert result.exit_code == 0, result.stderr
    assert "sweep: 6 runs (0 already done), ran 6, failed 0" in result.stderr
    assert "6/6" in result.stderr  # the progress bar
    runs = stored(store_copy)
    assert runs.height == 6 and runs["run_id"].n_unique() == 6
    assert runs["wall_s"].null_count() == 6  # timings live in the markers
    markers = sw.read_markers(out)
    assert sorted(markers) == sorted(runs["run_id"].to_list())
    assert all(m["status"] == "done" and m["wall_s"] > 0 for m in markers.values())
    # random placement differs by seed; jobs in the window are the same for all
    assert runs["jobs_input"].unique().to_list() == [1670]

    again = cli(
        "replay", "sweep", grid(tmp_path), "--out", out, "--store", store_copy, "--workers", "1"
    )
    assert again.exit_code == 1
    assert "already holds a sweep: pass --resume" in again.stderr

    # "kill": two markers lost -> only those two run again; extend the grid by a seed
    gone = sorted(markers)[:2]
    for run_id in gone:
        (out / "runs" / f"{run_id}.json").unlink()
    resumed = cli(
        "replay", "sweep", grid(tmp_path, "0-3"), "--out", out, "--store", store_copy,
        "--workers", "1", "--resume",
    )  # fmt: skip
    assert resumed.exit_code == 0, resumed.stderr
    assert "sweep: 8 runs (4 already done), ran 4, failed 0" in resumed.stderr
    runs = stored(store_copy)
    assert runs.height == 8 and runs["run_id"].n_unique() == 8
    # resume from the manifest alone (no sweep file): nothing left to do
    last = cli("replay", "sweep", "--out", out, "--store", store_copy, "--resume", "--workers", "1")
    assert last.exit_code == 0, last.stderr
    assert "sweep: 8 runs (8 already done), ran 0" in last.stderr


def test_two_in_process_sweeps_write_identical_bytes(openb_store: Path, tmp_path: Path) -> None:
    import shutil

    files: list[dict[str, bytes]] = []
    for k in range(2):
        store = tmp_path / f"store{k}"
        shutil.copytree(openb_store, store)
        spec = sg.load(grid(tmp_path, "0-1"))
        sw.run_sweep(store, spec, tmp_path / f"out{k}", workers=1)
        files.append(sweep_files(store))
    assert len(files[0]) == 3 * 4
    assert files[0] == files[1]


def sweep_files(store: Path) -> dict[str, bytes]:
    cur = (store / "current").resolve()
    return {
        str(p.relative_to(cur)): p.read_bytes()
        for table in sw.TABLES
        for p in sorted((cur / table / "source=openb").glob("*.parquet"))
    }


def test_resume_refuses_a_changed_workload(store_copy: Path, tmp_path: Path) -> None:
    from gpu_trace.loaders import LOADERS, ingest

    out = tmp_path / "sw"
    spec = sg.load(grid(tmp_path, "0"))
    sw.run_sweep(store_copy, spec, out, workers=1)
    ingest(LOADERS["openb"], ROOT / "data/samples/openb/openb_pod_list_gpushare40.csv", store_copy)
    with pytest.raises(sw.SweepError, match="jobs changed since this sweep started"):
        sw.run_sweep(store_copy, spec, out, workers=1, resume=True)


def test_flags_build_the_same_grid(store_copy: Path, tmp_path: Path) -> None:
    out = tmp_path / "sw"
    result = cli(
        "replay", "sweep", "--source", "openb", "--policies", "fifo,sjf",
        "--placements", "best-fit", "--loads", "0.8:1.0:0.2", "--seeds", "0-1",
        "--gpus", "32x8", "--window", "1970-05-01..1970-05-03", "--set", "restore_s=5",
        "--out", out, "--store", store_copy, "--workers", "1",
    )  # fmt: skip
    assert result.exit_code == 0, result.stderr
    manifest = sw.read_manifest(out)
    assert manifest["axes"] == ["scheduler", "placement", "load", "seed", "cluster"]
    assert manifest["spec"]["fixed"] == {
        "restore_s": 5.0,
        "window_start": "1970-05-01",
        "window_end": "1970-05-03",
    }
    assert len(manifest["runs"]) == 2 * 1 * 2 * 2 * 1
    bad = cli(
        "replay", "sweep", "--source", "openb", "--grid", "lod=1", "--out", tmp_path / "x",
        "--store", store_copy,
    )  # fmt: skip
    assert bad.exit_code == 1
    assert "command line: grid.lod: unknown ReplayConfig field 'lod'; did you mean 'load'?" in (
        bad.stderr
    )


def test_a_killed_sweep_loses_only_runs_in_flight(store_copy: Path, tmp_path: Path) -> None:
    """SIGKILL the real command part-way; every marked run is in the store, and resume
    runs exactly the rest."""
    out = tmp_path / "sw"
    sweep = grid(tmp_path, "0-9")  # 20 runs
    cmd = [sys.executable, "-c", "from gpu_trace.cli import main; main()", "replay", "sweep"]
    args = [str(sweep), "--out", str(out), "--store", str(store_copy), "--workers", "1"]
    proc = subprocess.Popen([*cmd, *args], stderr=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and len(list((out / "runs").glob("*.json"))) < 3:
        time.sleep(0.005)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    marked = set(sw.read_markers(out))
    assert 3 <= len(marked) < 20
    assert marked <= set(stored(store_copy)["run_id"].to_list())
    result = cli(
        "replay", "sweep", sweep, "--out", out, "--store", store_copy, "--workers", "1", "--resume"
    )
    assert result.exit_code == 0, result.stderr
    assert f"sweep: 20 runs ({len(marked)} already done), ran {20 - len(marked)}, failed 0" in (
        result.stderr
    )
    runs = stored(store_copy)
    assert runs.height == 20 and runs["run_id"].n_unique() == 20


# --- the report page ----------------------------------------------------------------


def num(v: float) -> str:
    """The page's number format: 3 decimals below 10, else whole numbers."""
    return f"{v:,.3f}" if abs(v) < 10 else f"{v:,.0f}"


def test_report_sweep_page_shows_means_and_intervals(store_copy: Path, tmp_path: Path) -> None:
    out = tmp_path / "sw"
    doc = {
        "source": "openb",
        "fixed": {"cluster": "32x8", **WINDOW},
        "grid": {"placement": ["random", "best-fit"], "load": [1.0, 1.2], "seed": [0, 1, 2]},
    }
    sw.run_sweep(store_copy, sg.parse(doc, "t"), out, workers=1)
    runs = stored(store_copy)
    manifest = sw.read_manifest(out)
    points = {r["run_id"]: r["point"] for r in manifest["runs"]}
    cell = sorted(
        float(v)
        for rid, v in zip(runs["run_id"], runs["jct_mean_s"], strict=True)
        if points[rid]["placement"] == "random" and points[rid]["load"] == 1.0
    )
    mean = sum(cell) / 3
    sd = math.sqrt(sum((v - mean) ** 2 for v in cell) / 2)
    half = 4.302653 * sd / math.sqrt(3)
    site = tmp_path / "site"
    result = cli("report", "--store", store_copy, "--out", site, "--sweep", out)
    assert result.exit_code == 0, result.stderr
    page = (site / "sweep.html").read_text(encoding="utf-8")
    assert f"{duration_text(mean)} ± {duration_text(half)} (n=3)" in page
    assert "sweep sweep of" not in page.lower() and "Fixed: {" not in page
    assert "Fixed: cluster = 32x8; " in page and "window_start = 1970-05-01" in page
    assert "Paired comparison by placement against random" in page
    assert "JCT mean (s) vs load" in page and "allocation vs load" in page
    assert 'href="sweep.html"' in (site / "index.html").read_text(encoding="utf-8")
    # without --store the page reads the store the sweep wrote to
    args = ["report", "--out", str(tmp_path / "s3"), "--sweep", str(out)]
    own = runner.invoke(app, args, env={"GPU_TRACE_STORE": None})
    assert own.exit_code == 0, own.stderr
    s3 = (tmp_path / "s3" / "sweep.html").read_text("utf-8")
    assert f"{duration_text(mean)} ± {duration_text(half)} (n=3)" in s3
    missing = cli("report", "--store", store_copy, "--out", tmp_path / "s2", "--sweep", tmp_path)
    assert missing.exit_code == 1
    assert "no sweep here (sweep.json is missing)" in missing.stderr


def test_a_bad_cluster_fails_before_the_sweep_folder_is_used(
    store_copy: Path, tmp_path: Path
) -> None:
    out = tmp_path / "sw"
    doc = {"source": "openb", "grid": {"cluster": ["32x8", "32y8"], "seed": [0]}}
    with pytest.raises(GpuTraceError, match="32y8"):
        sw.run_sweep(store_copy, sg.parse(doc, "t"), out, workers=1)
    assert not (out / sw.MANIFEST).exists()
    assert stored(store_copy).height == 0


def test_an_unreachable_ray_address_fails_in_one_line(store_copy: Path, tmp_path: Path) -> None:
    """A closed port answers at once (Ray alone would retry for minutes); no Ray needed."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # bound, never listening: connections are refused
        result = cli(
            "replay", "sweep", grid(tmp_path, "0"), "--out", tmp_path / "sw",
            "--store", store_copy, "--address", f"127.0.0.1:{port}",
        )  # fmt: skip
    assert result.exit_code == 1
    line = result.stderr.strip().splitlines()[-1]
    assert line.startswith(f"error: cannot reach the Ray cluster at 127.0.0.1:{port}: ")
    assert not (tmp_path / "sw" / sw.MANIFEST).exists()  # the folder is still free
    bad = cli(
        "replay", "sweep", grid(tmp_path, "0"), "--out", tmp_path / "x",
        "--store", store_copy, "--address", "nope",
    )  # fmt: skip
    assert "--address 'nope' is not auto, HOST:PORT or ray://HOST:PORT" in bad.stderr


def test_a_failing_run_is_recorded_and_the_others_complete(
    store_copy: Path, tmp_path: Path
) -> None:
    sweep = toml(
        tmp_path / "s.toml",
        'source = "openb"\n[fixed]\ncluster = "32x8"\nwindow_end = "1970-05-03"\n'
        '[grid]\nwindow_start = ["1970-05-01", "not-a-date"]\nseed = [0, 1]\n',
    )
    out = tmp_path / "sw"
    args = ("replay", "sweep", sweep, "--out", out, "--store", store_copy, "--workers", "1")
    result = cli(*args)
    assert result.exit_code == 1
    assert "sweep: 4 runs (0 already done), ran 2, failed 2" in result.stderr
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("error: 2 of 4 runs failed (first: ")
    assert last.endswith(
        ": window bound 'not-a-date' is not an ISO date/time); fix the cause and rerun with --resume"
    )
    markers = sw.read_markers(out)
    assert sorted(m["status"] for m in markers.values()) == ["done", "done", "failed", "failed"]
    assert stored(store_copy).height == 2
    # failed runs are not done: resume tries them again (and they fail again)
    again = cli(*args, "--resume")
    assert "sweep: 4 runs (2 already done), ran 0, failed 2" in again.stderr
