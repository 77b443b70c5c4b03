"""Slurm: the native-reader path (``loaders/slurm_csv.py``) against the line-exact parse.

The format, from the sacct man page: ``-P, --parsable2``: "output will be '|' delimited
without a '|' at the end"; ``-p, --parsable``: "output will be '|' delimited with a '|'
at the end". sacct does no quoting, so a ``|`` inside a job name (``JobName`` is the
user's free text: ``sbatch -J 'a|b'``) gives its line more fields than the header. The
fast path must give every line exactly what the line-exact parse gives (a differential
test, as for Helios), and must actually be taken on clean exports.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from polars.testing import assert_frame_equal

from gpu_trace.loaders import slurm
from gpu_trace.loaders import slurm_csv as sc
from gpu_trace.loaders.textfile import LINE

HEADER = (
    "JobID|JobName|User|Partition|State|ExitCode|Submit|Eligible|Start|End|Elapsed|"
    "Timelimit|NNodes|NCPUS|AllocTRES|NodeList"
)
# one line as sacct -X -P prints a finished GPU job (man page field formats:
# times YYYY-MM-DDTHH:MM:SS, Elapsed/Timelimit [DD-]HH:MM:SS, ExitCode status:signal)
GOOD = (
    "4242|train|alice|gpu|COMPLETED|0:0|2026-03-01T10:00:00|2026-03-01T10:00:00|"
    "2026-03-01T10:00:05|2026-03-01T11:00:05|01:00:00|1-00:00:00|1|8|"
    "billing=8,cpu=8,gres/gpu=2,mem=64G,node=1|gpu01"
)
DAMAGE = [
    lambda line: line.replace("|train|", "|a|b|"),  # a | in the job name
    lambda line: line.replace("|train|", "|a|b|c|"),
    lambda line: line.rsplit("|", 1)[0],  # one field short
    lambda line: line.rsplit("|", 3)[0],
    lambda line: "",  # empty line
    lambda line: line + "|",  # one more, empty field
    lambda line: line.replace("|alice|", "|al\rice|"),  # a carriage return inside
    lambda line: line + "\r",  # CRLF
    lambda line: line + "\r\r",
    lambda line: line.replace("|alice|", "|al\ufffdice|"),  # a literal U+FFFD
    lambda line: line.replace("01:00:00", "1:0:0"),  # damaged values, right field count
    lambda line: line.replace("2026-03-01T10:00:05", "2026-03-01 10:00:05"),
    lambda line: line.replace("gpu01", "gpu[01-04]"),
    lambda line: line.replace("gpu01", "gpu[04-01]"),
    lambda line: line.replace("4242|", "4242.batch|"),
    lambda line: line.replace("4242|", "4243_[1-3]|"),
    lambda line: line.replace("COMPLETED", "CANCELLED by 1000"),
]


def _both(path: Path, tz: str = "Europe/Berlin") -> tuple[sc.Fields, pl.DataFrame | None]:
    """The reader's rows and what the fast split leaves to the line-exact one (None:
    the fast path was not taken); asserts that the whole parse equals the line-exact
    parse of every line, good and bad rows alike.
    """
    header = slurm.read_sacct_header(path)
    info, fields, found = slurm.read(path, header)
    fast = slurm.parse(info, header, tz, fields, found)
    slow = slurm.parse(info, header, tz)
    assert_frame_equal(fast[0], slow[0])
    assert_frame_equal(fast[1], slow[1])
    assert fast[2] == slow[2]
    split = sc.split_fast(info, header.names, header.trailing, slurm.wanted(header), fields, found)
    return fields, None if split is None else split[1]


def _write(path: Path, lines: list[str], *, trailing: bool, invalid: bool = False) -> Path:
    if trailing:
        lines = [HEADER + "|", *(x + "|" if x and not x.endswith("\r") else x for x in lines)]
    else:
        lines = [HEADER, *lines]
    data = ("\n".join(lines) + "\n").encode()
    if invalid:
        data = data.replace(b"alice", b"al\xffce", 1)
    path.write_bytes(data)
    return path


@settings(
    max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    damage=st.lists(st.integers(0, len(DAMAGE) - 1), max_size=4),
    where=st.lists(st.integers(0, 7), min_size=4, max_size=4),
    trailing=st.booleans(),
    invalid=st.booleans(),
)
def test_fast_path_equals_line_exact_parse(
    tmp_path_factory: pytest.TempPathFactory,
    damage: list[int],
    where: list[int],
    trailing: bool,
    invalid: bool,
) -> None:
    lines = [GOOD.replace("4242", str(4242 + i)) for i in range(8)]
    for d, at in zip(damage, where, strict=False):
        lines[at] = DAMAGE[d](lines[at])
    f = _write(tmp_path_factory.mktemp("fast") / "x.psv", lines, trailing=trailing, invalid=invalid)
    _both(f)


@pytest.mark.parametrize("trailing", [False, True])
@pytest.mark.parametrize("damage", range(len(DAMAGE)))
def test_each_damage_alone(tmp_path: Path, damage: int, trailing: bool) -> None:
    lines = [GOOD, DAMAGE[damage](GOOD.replace("4242", "4243")), GOOD.replace("4242", "4244")]
    _both(_write(tmp_path / "x.psv", lines, trailing=trailing))


@pytest.mark.parametrize("trailing", [False, True])
def test_fast_path_taken_on_clean_export(tmp_path: Path, trailing: bool) -> None:
    """Every line of a clean export is vouched for by the reader: no line is split line
    by line (the speed path must not silently die)."""
    lines = [GOOD.replace("4242", str(5000 + i)) for i in range(50)]
    fields, redo = _both(_write(tmp_path / "x.psv", lines, trailing=trailing))
    assert fields.frame is not None and not fields.truncated
    assert redo is not None and redo.is_empty()


def test_pipe_in_a_job_name_leaves_only_that_line_to_the_line_exact_split(
    tmp_path: Path,
) -> None:
    """sacct does not quote: ``sbatch -J 'a|b'`` prints one field too many. The reader
    refuses such a file, reads it again with the line cut, and only that line goes
    through the line-exact split (which reads the name between the fields counted from
    both ends)."""
    lines = [GOOD.replace("4242", str(5000 + i)) for i in range(20)]
    lines[7] = lines[7].replace("|train|", "|a|b|")
    f = _write(tmp_path / "x.psv", lines, trailing=False)
    fields, redo = _both(f)
    assert fields.truncated
    assert redo is not None and redo[LINE].to_list() == [9]  # the header is line 1
    header = slurm.read_sacct_header(f)
    info, fields, found = slurm.read(f, header)
    good = slurm.parse(info, header, "Europe/Berlin", fields, found)[0]
    assert good.filter(pl.col(LINE) == 9)["_t_jobname"].to_list() == ["a|b"]


def test_marks_find_a_replacement_character_cut_by_a_chunk(tmp_path: Path) -> None:
    """U+FFFD (3 bytes) split across the 4 MiB read boundary is still found."""
    f = tmp_path / "x.psv"
    cut = (1 << 22) - 1
    f.write_bytes(b"a" * cut + "\ufffd".encode() + b"|\n")
    found = sc.marks(f)
    assert found.replacement and found.separators == 1 and not found.carriage_return


@settings(max_examples=60, deadline=None)
@given(
    tz=st.sampled_from(
        ["Europe/Berlin", "America/New_York", "Australia/Lord_Howe", "America/Santiago"]
    ),
    year=st.integers(1971, 2090),
    seconds=st.lists(st.integers(0, 366 * 86400), min_size=1, max_size=60),
    near=st.lists(st.integers(-7200, 7200), max_size=30),
)
def test_hourly_zone_readings_equal_per_value_look_ups(
    tz: str, year: int, seconds: list[int], near: list[int]
) -> None:
    """Reading local times by the hour gives each time the two UTC readings that
    polars' per-value zone look-up gives (null in a spring-forward gap, two readings in
    a fall-back hour), around the clock changes too (Lord Howe's are 30 minutes)."""
    from datetime import datetime, timedelta
    from zoneinfo import ZoneInfo

    start = datetime(year, 1, 1)
    zone = ZoneInfo(tz)
    changes = [
        start + timedelta(hours=h)
        for h in range(0, 366 * 24)
        if (start + timedelta(hours=h)).replace(tzinfo=zone).utcoffset()
        != (start + timedelta(hours=h + 1)).replace(tzinfo=zone).utcoffset()
    ]
    times = [start + timedelta(seconds=s) for s in seconds]
    times += [c + timedelta(seconds=d) for c in changes for d in near]
    cols = {f"_{k}_local": [*times[i:], *times[:i], None] for i, k in enumerate(slurm.TIMES)}
    frame = pl.DataFrame(cols, schema=dict.fromkeys(cols, pl.Datetime("us")))
    got = slurm._hourly_utc(frame, tz)
    want = frame.with_columns(
        slurm._exact_utc(pl.col(f"_{k}_local"), tz, how).alias(f"_{k}_{how}")
        for k in slurm.TIMES
        for how in ("earliest", "latest")
    )
    assert_frame_equal(got, want)
