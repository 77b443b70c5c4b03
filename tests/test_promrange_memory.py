"""``ingest prometheus-range`` memory is bounded by design: a large single answer costs a
small multiple of its size, not ~70x (issue 25: a 100 MB single-line answer cost 5.8 GB).

The answer is written as Prometheus' HTTP API documents a range query's result
(prometheus docs/querying/api.md, "Range queries": ``{"status": "success", "data":
{"resultType": "matrix", "result": [{"metric": {<labels>}, "values": [[<unix_time>,
"<sample_value>"], ...]}]}}``, sample values as strings) with dcgm-exporter's label set,
on one line, as ``curl`` saves it. Measured in a fresh process with getrusage.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from bench.promrange_big import write
from gpu_trace.loaders import promrange
from tests.peak_rss import cli_peak_growth

ROOT = Path(__file__).resolve().parents[1]


def test_a_40_mb_answer_costs_a_small_multiple_of_its_size(tmp_path: Path) -> None:
    """Before: json.loads of the whole answer, a Python list, float and str per sample,
    then one polars query over every sample: ~70x the answer (an 18 MB answer peaked at
    1.28 GB). Now the samples are read as text runs and checked in batches."""
    f = tmp_path / "answer.json"
    samples = write(f, 2_000_000)
    size = f.stat().st_size
    assert 35e6 < size < 45e6 and b"\n" not in f.read_bytes()[:1_000_000]
    args = ["ingest", "prometheus-range", str(f), "--store", str(tmp_path / "s")]
    code, grown_kib, lines = cli_peak_growth(args, ROOT)
    grown = grown_kib * 1024
    assert code == 0, lines
    # every sample accounted for: 4 of the 5 families are gpu_samples rows; an XID series
    # (runs of 1000 "0" then 1000 "79", bench/promrange_big.py) fires one event where
    # it changes to 79, the rest are "no event"
    points = samples // (5 * 32)
    events = 32 * sum(1 for i in range(points) if i % 2000 == 1000)
    rows = samples * 4 // 5 + events
    assert f"read {rows} = written {rows} + quarantined 0" in "\n".join(lines), lines
    # measured: ~10x at 40 MB (the text held twice while decoded, ~30 bytes of columns
    # per sample, a batch's query and polars' allocator), ~8.5x at 100 MB; before: ~70x
    assert grown < 12 * size, f"peak grew by {grown / 1e6:.0f} MB for a {size / 1e6:.0f} MB answer"


def test_chunks_and_batches_change_no_output(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same answers read with tiny chunks and batches (every run, element and device
    span cut apart) give the same rows, events, quarantine and counts: the cuts are
    invisible. Shapes from the Prometheus HTTP API (docs/querying/api.md); values and
    damage as Prometheus and dcgm-exporter may write them (NaN, +Inf, escaped strings,
    bare numbers, a non-pair element, repeated XIDs, duplicate times of one series)."""
    t0 = 1767225600
    util = [[t0 + 15 * i, v] for i, v in enumerate(["1", "NaN", "+Inf", 7, 'a"b', "3"])]
    util += [[t0], "x", [t0 + 15, "9"]]  # damaged elements, a duplicate time
    xid = [[t0 + 15 * i, v] for i, v in enumerate(["0", "43", "43", "0", "79", "79", "13"])]
    fb = [[t0 + 15 * i, str(100 * i)] for i in range(6)]
    total = [[t0 + 15 * i, "250"] for i in range(6)]

    def series(name: str, values: list[Any], **labels: str) -> dict[str, Any]:
        return {"metric": {"__name__": name, **labels}, "values": values}

    doc = {
        "status": "success",
        "data": {
            "resultType": "matrix",
            "result": [
                series("DCGM_FI_DEV_GPU_UTIL", util, gpu="0", Hostname="n1"),
                series("DCGM_FI_DEV_XID_ERRORS", xid, gpu="0", Hostname="n1"),
                series("DCGM_FI_DEV_FB_USED", fb, gpu="1", Hostname="n1"),
                series("DCGM_FI_DEV_FB_TOTAL", total, gpu="1", Hostname="n1"),
                series("DCGM_FI_DEV_GPU_UTIL", util[:3], gpu="0", Hostname="n2"),
            ],
        },
    }
    single = tmp_path / "one.json"
    single.write_text(json.dumps(doc))
    lines = tmp_path / "many.jsonl"
    lines.write_text(json.dumps(doc) + "\n" + json.dumps(doc) + "\n")

    def outcome(path: Path) -> list[Any]:
        out = []
        for b in promrange.range_file(path, "d"):
            rows = b.rows.lazy().collect()
            rejected = b.rejected.lazy().collect() if b.rejected is not None else None
            out.append(
                (
                    b.table,
                    b.rows_read,
                    b.metadata,
                    rows.sort(pl.all()).rows(),
                    None if rejected is None else rejected.sort(pl.all()).rows(),
                )
            )
        return out

    default = [outcome(single), outcome(lines)]
    monkeypatch.setattr(promrange, "CHUNK_ELEMENTS", 1)
    monkeypatch.setattr(promrange, "CHUNK_CHARS", 10)
    monkeypatch.setattr(promrange, "BATCH_SAMPLES", 2)
    assert [outcome(single), outcome(lines)] == default
    # and the cut answers were really read: rows, events and quarantine all present
    tables = {t[0]: t for t in default[0]}
    assert tables["events"][3] and tables["gpu_samples"][3] and tables["gpu_samples"][4]
