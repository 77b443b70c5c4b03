"""``gpu-trace analyze energy`` and the power model: energy integrated from the shipped
real power samples (checked against an integration done here from the raw files with the
csv module), hand-computed schedules, gaps, the model basis, and a property test that
energy is never negative and covered + gap = held."""

from __future__ import annotations

import csv
import json
import shutil
from datetime import UTC, datetime, timedelta
from itertools import pairwise
from pathlib import Path
from typing import Any

import duckdb
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from gpu_trace.analyses import energy as en
from gpu_trace.analyses import power as pwr
from gpu_trace.cli import app
from gpu_trace.schemas import TABLES
from gpu_trace.store.parquet import StoreTransaction, ensure_layout, polars_schema
from tests.conftest import SAMPLES

runner = CliRunner()
TELEMETRY = SAMPLES / "telemetry"
FIXTURES = Path(__file__).parent / "fixtures"
KWH = 3.6e6
T0 = datetime(2024, 1, 1, tzinfo=UTC)


def cli(*args: str) -> list[dict[str, Any]]:
    result = runner.invoke(app, [*args, "-f", "json"])
    assert result.exit_code == 0, result.output
    rows: list[dict[str, Any]] = json.loads(result.stdout)
    return rows


def ingest(*args: str) -> None:
    result = runner.invoke(app, ["ingest", *args])
    assert result.exit_code == 0, result.output


def dmon_watts(path: Path) -> list[float]:
    """The ``pwr`` column of an ``nvidia-smi dmon`` capture, read with the csv module."""
    with path.open(newline="") as f:
        rows = [[c for c in r if c] for r in csv.reader(f, delimiter=" ", skipinitialspace=True)]
    header = rows[0][1:]  # drop the leading '#'
    col = header.index("pwr")
    return [float(r[col]) for r in rows if r and not r[0].startswith("#")]


def trapezoid(watts: list[float], dt: float) -> float:
    return sum((a + b) / 2 * dt for a, b in pairwise(watts))


# --- the shipped real samples -------------------------------------------------------


def test_dmon_h100_energy_matches_raw_file(tmp_path: Path) -> None:
    """nvidia-smi dmon on an H100 under gpu-burn: 5 readings 1 s apart (631..636 W).
    Energy over the device's span and over a job holding GPU 0 for the whole capture
    equals the trapezoid sum of the raw ``pwr`` column."""
    store = str(tmp_path / "store")
    src = TELEMETRY / "nvidia-smi-dmon-h100.txt"
    # dmon prints no times: a fixed first tick, so the --jobs window is known
    ingest(
        "nvidia-smi", str(src), "--store", store, "--host", "h100a",
        "--start", "2026-07-14T08:12:49Z", "--interval", "1",
    )  # fmt: skip
    watts = dmon_watts(src)
    assert watts == [631.0, 634.0, 633.0, 634.0, 636.0]
    expected_j = trapezoid(watts, 1.0)  # 2534.5 J
    assert expected_j == pytest.approx(632.5 + 633.5 + 633.5 + 635.0)

    (dev,) = cli("analyze", "energy", "--by", "gpu", "--store", store)
    assert (dev["host"], dev["gpu_index"]) == ("h100a", 0)
    assert dev["energy_kwh"] == pytest.approx(expected_j / KWH)
    assert dev["covered_s"] == pytest.approx(4.0)
    assert dev["gap_s"] == 0.0
    assert dev["mean_power_w"] == pytest.approx(expected_j / 4)

    jobs = tmp_path / "jobs.csv"
    jobs.write_text(
        "job_id,host,gpu_indices,start,end\n"
        "burn,h100a,0,2026-07-14T08:12:49Z,2026-07-14T08:12:53Z\n"
        "half,h100a,0,2026-07-14T08:12:50.5Z,2026-07-14T08:12:52Z\n"
    )
    rows = {
        r["job_id"]: r for r in cli("analyze", "energy", "--jobs-file", str(jobs), "--store", store)
    }
    assert rows["burn"]["basis"] == "telemetry"
    assert rows["burn"]["gpu_energy_kwh"] == pytest.approx(expected_j / KWH)
    assert rows["burn"]["covered_gpu_s"] == pytest.approx(4.0)
    assert rows["burn"]["gap_gpu_s"] == pytest.approx(0.0)
    # [1.5 s, 3 s): 634 -> 633 interpolated: 0.5 s at mean(633.5, 633) + 1 s at 633.5
    half_j = 0.5 * (633.5 + 633.0) / 2 + (633.0 + 634.0) / 2
    assert rows["half"]["gpu_energy_kwh"] == pytest.approx(half_j / KWH)
    assert rows["half"]["covered_gpu_s"] == pytest.approx(1.5)


def test_dmon_h100_mig_and_prometheus_t4(tmp_path: Path) -> None:
    """The MIG dmon (438..439 W, sampled every 2 s here) and two scrapes of the T4
    exposition 15 s apart (DCGM_FI_DEV_POWER_USAGE 8.969 W both times, read from the raw
    file here) integrate to the trapezoid sums."""
    store = str(tmp_path / "store")
    mig = TELEMETRY / "nvidia-smi-dmon-h100-mig.txt"
    ingest(
        "nvidia-smi", str(mig), "--store", store, "--host", "mig",
        "--start", "2026-07-14T09:00:00Z", "--interval", "2",
    )  # fmt: skip
    prom = TELEMETRY / "dcgm-exporter-metrics-t4.prom"
    second = tmp_path / "t4-second-scrape.prom"
    shutil.copyfile(prom, second)
    ingest("prometheus", str(prom), "--store", store, "--time", "2026-07-14T10:00:00Z")
    ingest("prometheus", str(second), "--store", store, "--time", "2026-07-14T10:00:15Z")
    power_lines = [
        line for line in prom.read_text().splitlines() if line.startswith("DCGM_FI_DEV_POWER_USAGE")
    ]
    (line,) = power_lines
    t4_w = float(line.rsplit(" ", 1)[1])
    assert t4_w == 8.969

    devs = {r["host"]: r for r in cli("analyze", "energy", "--by", "gpu", "--store", store)}
    assert devs["mig"]["energy_kwh"] == pytest.approx(trapezoid(dmon_watts(mig), 2.0) / KWH)
    assert devs["mig"]["median_interval_s"] == 2.0
    assert devs["424773df46e0"]["energy_kwh"] == pytest.approx(t4_w * 15 / KWH)
    assert devs["424773df46e0"]["covered_s"] == 15.0


# --- hand-computed schedules --------------------------------------------------------


def _samples(host: str, gpu: int, times: list[float], watts: list[float]) -> pl.DataFrame:
    n = len(times)
    return pl.DataFrame(
        {
            "source": ["nvidia-smi"] * n,
            "dataset": [f"{host}-{gpu}"] * n,
            "cluster": [None] * n,
            "time": [T0 + timedelta(seconds=t) for t in times],
            "host": [host] * n,
            "gpu_index": [gpu] * n,
            "metric": ["power_w"] * n,
            "value": watts,
            "unit": ["W"] * n,
        },
        schema_overrides={"gpu_index": pl.Int16, "cluster": pl.String},
    )


def _job_store(tmp_path: Path, samples: list[pl.DataFrame]) -> Path:
    """Two jobs: A holds GPU 0 of h1 over [0, 100) s, B holds GPUs 0 and 1 of h2 over
    [50, 150) s; users ua and ub, both in VC v."""
    jobs = pl.DataFrame(
        {
            "source": ["x", "x"],
            "dataset": ["d", "d"],
            "cluster": ["c", "c"],
            "job_id": ["A", "B"],
            "user": ["ua", "ub"],
            "vc": ["v", "v"],
            "gpus": [1.0, 2.0],
            "run_s": [100.0, 100.0],
            "status": ["completed", "completed"],
            "time_basis": ["absolute", "absolute"],
            "gpu_type": ["A100", "A100"],
        }
    )
    placements = pl.DataFrame(
        {
            "source": ["x", "x"],
            "dataset": ["d", "d"],
            "cluster": ["c", "c"],
            "job_id": ["A", "B"],
            "attempt": [0, 0],
            "machine_id": ["h1", "h2"],
            "start_time": [T0, T0 + timedelta(seconds=50)],
            "end_time": [T0 + timedelta(seconds=100), T0 + timedelta(seconds=150)],
            "gpu_indices": [[0], [0, 1]],
            "gpu_count": [1.0, 2.0],
        }
    )
    store = tmp_path / "store"
    with StoreTransaction(store) as tx:
        tx.write("jobs", jobs, source="x", dataset="d")
        tx.write("placements", placements, source="x", dataset="d")
        for s in samples:
            tx.write("gpu_samples", s, source="nvidia-smi", dataset=s["dataset"][0])
    return store


def test_two_jobs_known_watts(tmp_path: Path) -> None:
    """Constant draw, sampled every 10 s over each window: A at 200 W for 100 s =
    20 000 J; B at 100 W (GPU 0) + 300 W (GPU 1) for 100 s = 40 000 J. Host baseline
    from a --power file: 80 W per 8-GPU node = 10 W per GPU: A 1 000 J, B 2 000 J."""
    store = _job_store(
        tmp_path,
        [
            _samples("h1", 0, [float(t) for t in range(0, 101, 10)], [200.0] * 11),
            _samples("h2", 0, [float(t) for t in range(50, 151, 10)], [100.0] * 11),
            _samples("h2", 1, [float(t) for t in range(50, 151, 10)], [300.0] * 11),
        ],
    )
    table = tmp_path / "power.toml"
    table.write_text("[host]\nbaseline_w = 80.0\ngpus_per_node = 8\n")
    args = ("analyze", "energy", "--store", str(store), "--power", str(table))
    rows = {r["job_id"]: r for r in cli(*args)}
    assert rows["A"]["basis"] == rows["B"]["basis"] == "telemetry"
    assert rows["A"]["gpu_energy_kwh"] == pytest.approx(20_000 / KWH)
    assert rows["B"]["gpu_energy_kwh"] == pytest.approx(40_000 / KWH)
    assert rows["A"]["host_energy_kwh"] == pytest.approx(1_000 / KWH)
    assert rows["B"]["host_energy_kwh"] == pytest.approx(2_000 / KWH)
    assert rows["B"]["energy_kwh"] == pytest.approx(42_000 / KWH)
    assert rows["B"]["mean_gpu_power_w"] == pytest.approx(200.0)
    assert (rows["B"]["covered_gpu_s"], rows["B"]["gap_gpu_s"]) == (200.0, 0.0)
    (vc,) = cli(*args, "--by", "vc")
    assert vc["energy_kwh"] == pytest.approx(63_000 / KWH)
    assert (vc["jobs"], vc["telemetry_jobs"], vc["basis"]) == (2, 2, "telemetry")
    users = {r["user"]: r["gpu_energy_kwh"] for r in cli(*args, "--by", "user")}
    assert users == pytest.approx({"ua": 20_000 / KWH, "ub": 40_000 / KWH})


def test_gaps_are_not_bridged_and_reported(tmp_path: Path) -> None:
    """GPU 0 of h1 read at 0, 10, 20, 30, 100, 110 s (100, 200, 200, 100, 300, 300 W):
    median interval 10 s, so the 70 s stretch 30 -> 100 is a gap (> 3 x 10). Job A holds
    [0, 100): covered 30 s = 1 500 + 2 000 + 1 500 J; gap 70 s. The device view: span
    110 s, covered 40 s (+ 3 000 J). With --max-gap 100 the stretch is bridged:
    (100 + 300) / 2 x 70 = 14 000 J more, no gap."""
    store = _job_store(
        tmp_path, [_samples("h1", 0, [0, 10, 20, 30, 100, 110], [100, 200, 200, 100, 300, 300])]
    )
    rows = {r["job_id"]: r for r in cli("analyze", "energy", "--store", str(store))}
    a = rows["A"]
    assert a["basis"] == "telemetry"
    assert a["gpu_energy_kwh"] == pytest.approx(5_000 / KWH)
    assert (a["covered_gpu_s"], a["gap_gpu_s"]) == (30.0, 70.0)
    assert a["coverage"] == pytest.approx(0.3)
    # B's GPUs (h2) were never sampled: the model at busy power, all held time a gap
    b = rows["B"]
    assert b["basis"] == "model_alloc"
    assert b["gpu_energy_kwh"] == pytest.approx(2 * 100 * 400.0 / KWH)  # A100 busy 400 W
    assert (b["covered_gpu_s"], b["gap_gpu_s"]) == (0.0, 200.0)
    (dev,) = cli("analyze", "energy", "--by", "gpu", "--store", str(store))
    assert (dev["covered_s"], dev["gap_s"]) == (40.0, 70.0)
    assert dev["energy_kwh"] == pytest.approx(8_000 / KWH)
    bridged = cli("analyze", "energy", "--store", str(store), "--max-gap", "100")
    a2 = next(r for r in bridged if r["job_id"] == "A")
    assert a2["gpu_energy_kwh"] == pytest.approx(19_000 / KWH)
    assert (a2["covered_gpu_s"], a2["gap_gpu_s"]) == (100.0, 0.0)


def test_model_basis_on_helios_without_telemetry(tmp_path: Path) -> None:
    """Helios has jobs but no telemetry and no GPU type: the default model (V100, busy
    300 W) x GPU time, host 400 W / 8 GPUs = 50 W per GPU. Earth job 7001: 8 GPUs x
    3 600 s -> GPU 8.64e6 J = 2.4 kWh, host 1.44e6 J = 0.4 kWh."""
    store = str(tmp_path / "store")
    ingest("helios", str(FIXTURES / "helios" / "data"), "--store", store)
    rows = {r["job_id"]: r for r in cli("analyze", "energy", "--store", store)}
    j = rows["7001"]
    assert (j["basis"], j["power_model"]) == ("model_alloc", "V100")
    assert j["gpu_energy_kwh"] == pytest.approx(2.4)
    assert j["host_energy_kwh"] == pytest.approx(0.4)
    assert j["energy_kwh"] == pytest.approx(2.8)
    assert "7002" not in rows  # a CPU job (0 GPUs) has no GPU energy row
    vcs = {(r["cluster"], r["vc"]): r for r in cli("analyze", "energy", "--by", "vc", "-s", "helios", "--store", store)}  # fmt: skip
    # earth vcJkd GPU jobs: 7001 (8 x 3600), 7005 (1 x 500), 7006 (1 x 0) GPU-seconds
    assert vcs[("earth", "vcJkd")]["gpu_energy_kwh"] == pytest.approx((28_800 + 500) * 300 / KWH)
    assert vcs[("earth", "vcJkd")]["basis"] == "model"


def test_model_util_from_measured_utilization(tmp_path: Path) -> None:
    """A job with gpu_util_pct samples (same source) but no power: the linear model at
    its mean utilization. A100 idle 50 W, busy 400 W; util readings 20 and 80 % -> 50 %:
    P = 50 + 350 x 0.5 = 225 W, x 100 s."""
    util = _samples("h1", 0, [10.0, 60.0], [20.0, 80.0]).with_columns(
        pl.lit("x").alias("source"),
        pl.lit("c").alias("cluster"),
        pl.lit("gpu_util_pct").alias("metric"),
        pl.lit("pct").alias("unit"),
    )
    jobs = pl.DataFrame(
        {
            "source": ["x"],
            "dataset": ["d"],
            "cluster": ["c"],
            "job_id": ["A"],
            "gpus": [1.0],
            "run_s": [100.0],
            "status": ["completed"],
            "time_basis": ["absolute"],
            "gpu_type": ["NVIDIA A100-SXM4-40GB"],
        }
    )
    placements = pl.DataFrame(
        {
            "source": ["x"],
            "dataset": ["d"],
            "cluster": ["c"],
            "job_id": ["A"],
            "attempt": [0],
            "machine_id": ["h1"],
            "start_time": [T0],
            "end_time": [T0 + timedelta(seconds=100)],
            "gpu_indices": [[0]],
        }
    )
    store = tmp_path / "store"
    with StoreTransaction(store) as tx:
        tx.write("jobs", jobs, source="x", dataset="d")
        tx.write("placements", placements, source="x", dataset="d")
        tx.write("gpu_samples", util, source="x", dataset="util")
    (row,) = cli("analyze", "energy", "--store", str(store))
    assert (row["basis"], row["power_model"], row["util"]) == ("model_util", "A100", 0.5)
    assert row["mean_gpu_power_w"] == pytest.approx(225.0)
    assert row["gpu_energy_kwh"] == pytest.approx(225.0 * 100 / KWH)


# --- the power model API and its table ----------------------------------------------


def test_power_model_api() -> None:
    """The function the replay will call: energy of one GPU holding a job t s at util u."""
    model = pwr.load()
    assert model.gpu_energy_j("A100", 3600, 0.5) == pytest.approx((50 + 350 * 0.5) * 3600)
    assert model.gpu_energy_j("H100", 10) == pytest.approx(7000.0)  # busy by default
    assert model.gpu_power_w("V100M16|V100M32", 0.0) == 40.0  # first alternative
    assert model.gpu_power_w("tesla t4", 1.0) == 70.0  # aliases are case-insensitive
    assert model.gpu_power_w("T4", 0.0) == 8.969  # the measured idle draw
    assert model.resolve("no such GPU").name == model.default == "V100"
    assert model.gpu_power_w("P100", 7.0) == 250.0  # util clipped to [0, 1]
    assert model.gpu_energy_j("P100", -5.0) == 0.0
    assert model.host_energy_j(gpus=2, seconds=10) == pytest.approx(2 * 10 * 400 / 8)
    for gpu in model.gpus.values():  # every number has a source
        assert gpu.idle_source and gpu.busy_source and 0 <= gpu.idle_w <= gpu.busy_w
    assert model.host_source


def test_power_file_overrides_and_adds(tmp_path: Path) -> None:
    path = tmp_path / "p.toml"
    path.write_text(
        'default = "L4"\n[gpu.L4]\naliases = ["NVIDIA L4"]\nidle_w = 16.0\nbusy_w = 72.0\n'
        "[gpu.A100]\nbusy_w = 300.0\n"
    )
    model = pwr.load(path)
    assert model.gpu_power_w("nvidia l4", 0.5) == 44.0
    assert model.gpu_power_w(None) == 72.0
    assert model.gpu_power_w("A100-SXM4-80GB", 1.0) == 300.0  # aliases kept
    assert model.gpu_power_w("A100", 0.0) == 50.0  # idle kept


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("[gpu.A100]\nidle_w = 500.0\n", "gpu.A100: idle_w 500.0 > busy_w 400.0"),
        ("[gpu.X]\nbusy_w = 10.0\n", "gpu.X: needs idle_w and busy_w"),
        ('[gpu.A100]\nbusy_w = "high"\n', "gpu.A100.busy_w: must be a finite number"),
        ('default = "Z80"\n', "default: default must name a [gpu.*] entry"),
        ("[host]\ngpus_per_node = 0\n", "host.gpus_per_node: must be a whole number > 0"),
        ("[gpu\n", "not TOML"),
    ],
)
def test_bad_power_file_is_one_line_error(tmp_path: Path, text: str, needle: str) -> None:
    path = tmp_path / "bad.toml"
    path.write_text(text)
    ensure_layout(tmp_path / "s")  # an empty store: reads refuse a missing one
    result = runner.invoke(
        app, ["analyze", "energy", "--store", str(tmp_path / "s"), "--power", str(path)]
    )
    assert result.exit_code == 1
    assert needle in result.output and str(path) in result.output
    assert "Traceback" not in result.output and len(result.output.strip().splitlines()) == 1


def test_bad_max_gap_is_refused(tmp_path: Path) -> None:
    ensure_layout(tmp_path / "s")
    result = runner.invoke(
        app, ["analyze", "energy", "--store", str(tmp_path / "s"), "--max-gap", "0"]
    )
    assert result.exit_code == 2  # a usage mistake
    assert "--max-gap must be > 0" in result.output


# --- energy is never negative; covered + gap = held ---------------------------------


def _canonical(frame: pl.DataFrame, table: str) -> pl.DataFrame:
    """``frame`` with the table's other columns null, as the store's writer fills them."""
    schema = polars_schema(TABLES[table])
    missing = [pl.lit(None, dtype=t).alias(c) for c, t in schema.items() if c not in frame.columns]
    return frame.with_columns(missing)


def _con(samples: pl.DataFrame, placements: pl.DataFrame) -> duckdb.DuckDBPyConnection:
    con = duckdb.connect(":memory:")
    con.register("gpu_samples", _canonical(samples, "gpu_samples").to_arrow())
    con.register("placements", _canonical(placements, "placements").to_arrow())
    return con


@settings(max_examples=40, deadline=None)
@given(
    readings=st.lists(
        st.tuples(st.integers(0, 600), st.floats(0, 1000, allow_nan=False)),
        min_size=1,
        max_size=25,
    ),
    window=st.tuples(st.integers(-100, 700), st.integers(1, 800)),
    max_gap=st.one_of(st.none(), st.floats(0.5, 500)),
)
def test_energy_never_negative(
    readings: list[tuple[int, float]], window: tuple[int, int], max_gap: float | None
) -> None:
    times = [T0 + timedelta(seconds=t) for t, _ in readings]
    samples = pl.DataFrame(
        {
            "time": times,
            "host": ["h"] * len(times),
            "gpu_index": [0] * len(times),
            "mig_instance": [None] * len(times),
            "metric": ["power_w"] * len(times),
            "value": [w for _, w in readings],
        },
        schema_overrides={"gpu_index": pl.Int16, "mig_instance": pl.String},
    )
    start = T0 + timedelta(seconds=window[0])
    placements = pl.DataFrame(
        {
            "source": ["x"],
            "cluster": ["c"],
            "job_id": ["j"],
            "attempt": [0],
            "machine_id": ["h"],
            "start_time": [start],
            "end_time": [start + timedelta(seconds=window[1])],
            "gpu_indices": [[0]],
            "gpu_count": [1.0],
        },
        schema_overrides={"gpu_indices": pl.List(pl.Int16)},
    )
    (row,) = en.telemetry_windows(_con(samples, placements), max_gap).to_dicts()
    top = max(w for _, w in readings)
    assert row["held_s"] == window[1]
    assert 0 <= row["covered_s"] <= row["held_s"] + 1e-9
    assert row["covered_s"] + row["gap_s"] == pytest.approx(row["held_s"])
    assert 0 <= row["energy_j"] <= top * row["covered_s"] + 1e-6
    dev = en.device_energy(_con(samples, placements), max_gap).to_dicts()
    assert all(d["energy_kwh"] >= 0 and d["gap_s"] >= 0 for d in dev)


def test_report_section_shows_causes_and_energy(tmp_path: Path) -> None:
    """The source page section: Helios (jobs, no telemetry) gets lost hours by cause, MTBF
    and modelled energy by VC; a telemetry-only store gets energy per sampled GPU."""
    from gpu_trace.analyses.inputs import Inputs
    from gpu_trace.reports.sections import SOURCE_SECTIONS, failures_energy_section

    assert failures_energy_section in SOURCE_SECTIONS
    store = tmp_path / "helios"
    ingest("helios", str(FIXTURES / "helios" / "data"), "--store", str(store))
    sec = failures_energy_section(Inputs.from_store(store))
    assert "node_fail" in sec.html and "Energy by VC" in sec.html and "MTBF" in sec.html
    assert len(sec.charts) == 2
    tele = tmp_path / "tele"
    ingest(
        "nvidia-smi", str(TELEMETRY / "nvidia-smi-dmon-h100.txt"), "--store", str(tele),
        "--host", "h100a", "--start", "2026-07-14T08:12:49Z",
    )  # fmt: skip
    sec = failures_energy_section(Inputs.from_store(tele))
    assert "Energy per sampled GPU" in sec.html and "h100a" in sec.html
    assert "Energy by VC" not in sec.html


def test_shared_gpu_is_charged_its_share() -> None:
    """A placement holding half of GPU 0 (gpu_count 0.5, GPU sharing) over [0, 100) s at a
    constant 200 W is charged 0.5 x 200 x 100 = 10 000 J; its coverage is still full."""
    times = [T0 + timedelta(seconds=t) for t in range(0, 101, 10)]
    samples = pl.DataFrame(
        {
            "time": times,
            "host": ["h"] * 11,
            "gpu_index": [0] * 11,
            "mig_instance": [None] * 11,
            "metric": ["power_w"] * 11,
            "value": [200.0] * 11,
        },
        schema_overrides={"gpu_index": pl.Int16, "mig_instance": pl.String},
    )
    placements = pl.DataFrame(
        {
            "source": ["openb"],
            "cluster": ["c"],
            "job_id": ["pod"],
            "attempt": [0],
            "machine_id": ["h"],
            "start_time": [T0],
            "end_time": [T0 + timedelta(seconds=100)],
            "gpu_indices": [[0]],
            "gpu_count": [0.5],
        },
        schema_overrides={"gpu_indices": pl.List(pl.Int16)},
    )
    (row,) = en.telemetry_windows(_con(samples, placements)).to_dicts()
    assert (row["share"], row["energy_j"], row["covered_s"], row["gap_s"]) == (
        0.5,
        10_000.0,
        100.0,
        0.0,
    )
