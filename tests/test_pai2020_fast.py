"""PAI 2020's fast path (polars' CSV reader, ``pai2020_files.fast_read``) against the
line-exact parse it stands in for: on any file it takes, it must give every row, value
and reason the line-exact parse gives; a file it cannot vouch for it must hand back.

The rows are shaped as the trace's README documents the tables
(alibaba/clusterdata ``cluster-trace-gpu-v2020/README.md``: headerless CSVs, float
seconds, plans in percent / GB) and then damaged the ways real copies are: CRLF, a
header line added, empty lines, short and long lines, spaces, ``nan``, words, U+FFFD.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from polars.testing import assert_frame_equal

from gpu_trace.loaders import LOADERS, ingest
from gpu_trace.loaders.pai2020_files import (
    SPECS,
    fast_read,
    first,
    number_checks,
    open_input,
    parse,
    time_checks,
)
from gpu_trace.loaders.textfile import RAW, REASON
from gpu_trace.synth import get_writer

GOOD = {
    "job": "6c0b1d3a7e4f9a2b8c5d0e1f,i1,u1,Terminated,4550879.0,4551879.0",
    "task": "6c0b1d3a7e4f9a2b8c5d0e1f,worker,2.0,Terminated,4550879.0,4551879.0,600.0,29.296875,50.0,T4",
    "group_tag": "i1,u1,T4,g1,bert",
    "machine_spec": "m1,T4,96,512,2",
}
CHECKS = {
    "job": tuple(time_checks()),
    "task": (
        *number_checks(["inst_num", "plan_cpu", "plan_mem", "plan_gpu"], whole=["inst_num"]),
        *time_checks(),
    ),
    "group_tag": (),
    "machine_spec": tuple(number_checks(["cap_cpu", "cap_mem", "cap_gpu"], whole=["cap_gpu"])),
}
VALUE = st.sampled_from(
    ["", "0", "0.0", "7", "50.0", "-1.0", "nan", "inf", "1e7", " 7.5 ", "12x", "abc", "\ufffd"]
)


@st.composite
def damaged_line(draw: st.DrawFn, table: str) -> str:
    fields = GOOD[table].split(",")
    fields[0] += str(draw(st.integers(0, 3)))  # a few keys repeat: duplicates
    for _ in range(draw(st.integers(0, 2))):
        fields[draw(st.integers(0, len(fields) - 1))] = draw(VALUE)
    kind = draw(st.sampled_from(["ok"] * 20 + ["short", "long", "empty", "cr"]))
    if kind == "short":
        fields = fields[:-1]
    elif kind == "long":
        fields = [*fields, "x"]
    line = ",".join(fields)
    return {"empty": "", "cr": line + "\r"}.get(kind, line)


def _both(path: Path, table: str) -> tuple[pl.DataFrame | None, pl.DataFrame]:
    inp = open_input(path, SPECS[table])
    checks = CHECKS[table]
    return fast_read(inp, checks), parse(inp).with_columns(first(*checks)).collect()


def _assert_same(fast: pl.DataFrame, slow: pl.DataFrame) -> None:
    """Same rows, values and reasons; good rows carry no text on the fast path."""
    assert_frame_equal(fast.drop(RAW), slow.drop(RAW))
    bad = slow.filter(pl.col(REASON).is_not_null())
    assert_frame_equal(fast.filter(pl.col(REASON).is_not_null()), bad)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.data(), table=st.sampled_from(list(GOOD)), header=st.booleans())
def test_fast_path_agrees_with_line_exact_parse(
    tmp_path_factory: pytest.TempPathFactory, data: st.DataObject, table: str, header: bool
) -> None:
    lines = data.draw(st.lists(damaged_line(table), min_size=1, max_size=12))
    spec = SPECS[table]
    f = tmp_path_factory.mktemp("fast") / spec.csv
    f.write_text("\n".join([",".join(spec.names)] * header + lines) + "\n", newline="")
    fast, slow = _both(f, table)
    if fast is not None:
        _assert_same(fast, slow)


@pytest.mark.parametrize(
    ("table", "line", "taken"),
    [
        ("task", GOOD["task"].replace(",2.0,", ", 2.0 ,"), True),  # typed after stripping
        ("task", GOOD["task"].replace(",2.0,", ",2.5,"), True),  # not a whole number
        ("task", GOOD["task"].replace(",50.0,", ",12x,"), True),
        ("task", GOOD["task"].replace("worker", ""), True),  # required name missing
        ("job", GOOD["job"].replace("4551879.0", "4550000.0"), True),  # end before start
        ("job", GOOD["job"].replace(",u1,", ",u\ufffd,"), False),  # read as invalid UTF-8
        ("job", GOOD["job"] + ",", False),  # a field too many
        ("job", GOOD["job"].rsplit(",", 1)[0], False),  # a field short
        ("job", GOOD["job"] + "\r", False),
        ("job", "", False),  # empty line
        ("job", GOOD["job"].replace(",u1,", ',"u,1",'), False),  # quotes are not CSV quoting
    ],
)
def test_fast_path_edge_cases(tmp_path: Path, table: str, line: str, taken: bool) -> None:
    f = tmp_path / SPECS[table].csv
    f.write_text(f"{GOOD[table]}\n{line}\n{GOOD[table]}\n", newline="")
    fast, slow = _both(f, table)
    assert (fast is not None) is taken
    if fast is not None:
        _assert_same(fast, slow)


def test_fast_path_is_taken_on_clean_files(tmp_path: Path) -> None:
    """The speed path must not silently die on what ``gpu-trace synth`` writes."""
    get_writer("pai2020")(tmp_path, jobs=500, seed=3)
    for table in GOOD:
        fast, slow = _both(tmp_path / SPECS[table].csv, table)
        assert fast is not None, table
        _assert_same(fast, slow)


def test_superseded_line_keeps_its_text(tmp_path: Path) -> None:
    """A duplicate job line read by the fast path is quarantined with its own text."""
    first_line = GOOD["job"].replace("Terminated", "Running")
    f = tmp_path / SPECS["job"].csv
    f.write_text(f"{first_line}\n{GOOD['job']}\n")
    ingest(LOADERS["pai2020"], f, tmp_path / "store")
    q = pl.read_parquet(
        next((tmp_path / "store" / "current" / "quarantine").rglob("trace.parquet"))
    )
    assert q.select("locator", "reason", "raw").rows() == [
        ("line 1", "duplicate job_name, superseded by line 2", first_line)
    ]
