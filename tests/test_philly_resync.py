"""Philly job log: a broken record is quarantined alone and the records after it are
read normally (resynchronization at the next job-object start); the count of records
read comes from the bytes, so a merge fails the ingest; an unrecoverable tail exits
non-zero; a UTF-8 BOM is skipped.

Every file here follows the byte layout that msr-fiddle/philly-traces documents for cluster_job_log: a JSON
array of job objects whose first key is ``"status"``, written with ``", "`` and
``": "`` separators (one line) or pretty-printed."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from gpu_trace.cli import app
from gpu_trace.errors import InputError
from gpu_trace.loaders import LOADERS, ingest, philly_json
from gpu_trace.store.catalog import connect
from gpu_trace.synth.philly import write as synth_write

ATTEMPT = (
    '{"start_time": "2017-10-07 01:12:09", "end_time": "2017-10-07 01:13:23", '
    '"detail": [{"ip": "m47", "gpus": ["gpu0", "gpu1"]}]}'
)


def job(n: int, *, attempts: str = "[" + ATTEMPT + "]", user: str = '"ce2f4c"') -> str:
    """One job record in the documented key order."""
    return (
        f'{{"status": "Pass", "vc": "ee9e8c", "jobid": "application_1506638472019_{n}", '
        f'"attempts": {attempts}, "submitted_time": "2017-10-07 01:11:39", "user": {user}}}'
    )


def jid(n: int) -> str:
    return f"application_1506638472019_{n}"


MISSING_BRACKET = job(2, attempts="[" + ATTEMPT)  # attempts list never closed
MISSING_QUOTE = job(2, user='"ce2f4c')  # user string never closed
MISSING_BRACE = job(2)[:-1]  # record object never closed

UNCLOSED_BRACKET = "broken record: an unclosed bracket (a missing ] or }?)"
UNCLOSED_STRING = "broken record: an unclosed string (a missing quote?)"


def run(tmp_path: Path, data: bytes) -> tuple[tuple[int, int, int], list[str], dict[str, str]]:
    """Ingest ``data`` as a job log: (read, written, quarantined), job ids, and
    quarantine locator -> reason."""
    (tmp_path / "cluster_job_log").write_bytes(data)
    report = ingest(LOADERS["philly"], tmp_path, tmp_path / "store")
    line = next(r for r in report.lines if r.table == "jobs")
    con = connect(tmp_path / "store")
    ids = [r[0] for r in con.execute("SELECT job_id FROM jobs ORDER BY job_id").fetchall()]
    quarantine = dict(con.execute("SELECT locator, reason FROM quarantine").fetchall())
    return (line.rows_read, line.rows_written, line.rows_quarantined), ids, quarantine


def next_start(text: str, n: int) -> int:
    """Byte offset of job ``n``'s ``{"status"`` (ASCII text: chars = bytes)."""
    return text.index(f'{{"status": "Pass", "vc": "ee9e8c", "jobid": "{jid(n)}"')


@pytest.mark.parametrize(
    ("broken", "reason"),
    [
        (MISSING_BRACKET, UNCLOSED_BRACKET),
        (MISSING_QUOTE, UNCLOSED_STRING),
        (MISSING_BRACE, UNCLOSED_BRACKET),
    ],
    ids=["missing ]", "missing quote", "missing }"],
)
def test_broken_record_is_quarantined_alone(tmp_path: Path, broken: str, reason: str) -> None:
    text = "[" + ", ".join([job(1), broken, job(3), job(4)]) + "]"
    counts, ids, quarantine = run(tmp_path, text.encode())
    assert counts == (4, 3, 1)
    assert ids == [jid(1), jid(3), jid(4)]
    at = next_start(text, 3)
    assert quarantine == {"record 2": f"{reason}; the next job object starts at byte {at}"}
    raw = connect(tmp_path / "store").execute("SELECT raw FROM quarantine").fetchone()
    assert raw is not None and raw[0] == broken + ","  # the record's text, up to the cut


def test_pretty_printed_missing_bracket(tmp_path: Path) -> None:
    """The indented form (json.dumps(indent=...) style, newlines inside records)."""
    records = [json.dumps(json.loads(job(1)), indent=2), MISSING_BRACKET, job(3)]
    text = "[\n" + ",\n".join(records).replace(", ", ",\n  ") + "\n]\n"
    counts, ids, quarantine = run(tmp_path, text.encode())
    assert counts == (3, 2, 1)
    assert ids == [jid(1), jid(3)]
    at = text.index('{"status": "Pass",\n  "vc": "ee9e8c",\n  "jobid": "' + jid(3))
    assert quarantine == {
        "record 2": f"{UNCLOSED_BRACKET}; the next job object starts at byte {at}"
    }


def test_garbage_between_records_is_its_own_record(tmp_path: Path) -> None:
    """Garbage after a comma ends at the next job start (record 2 here); a missing
    comma between two records loses nothing."""
    text = "[" + job(1) + ", xyz " + job(2) + " " + job(3) + ", 42, " + job(4) + "]"
    counts, ids, quarantine = run(tmp_path, text.encode())
    # records: 1 job(1), 2 "xyz", 3 job(2), 4 job(3), 5 42, 6 job(4)
    assert counts == (6, 4, 2)
    assert ids == [jid(1), jid(2), jid(3), jid(4)]
    assert quarantine == {
        "record 2": "not valid JSON",
        "record 5": "record is a number, not an object",
    }


def test_bom_is_stripped(tmp_path: Path) -> None:
    text = "[" + ", ".join([job(1), job(2)]) + "]"
    counts, ids, quarantine = run(tmp_path, b"\xef\xbb\xbf" + text.encode())
    assert counts == (2, 2, 0)
    assert ids == [jid(1), jid(2)]
    assert quarantine == {}
    # also on the resync path (a broken record forces it): the first key is intact
    text = "[" + ", ".join([job(1), MISSING_QUOTE, job(3)]) + "]"
    counts, ids, _ = run(tmp_path, b"\xef\xbb\xbf" + text.encode())
    assert (counts, ids) == ((3, 2, 1), [jid(1), jid(3)])


@pytest.mark.parametrize(
    ("text", "message"),
    [
        # cut inside record 3: the tail cannot be recovered
        (
            "[" + job(1) + ", " + MISSING_BRACKET + ", " + job(3)[:40],
            "record 3, byte {size}: the file ends inside this record before the JSON array "
            "is closed (truncated file?): the tail cannot be recovered",
        ),
        # cut after a comma: no tail record at all
        (
            "[" + job(1) + ", " + job(2) + ", ",
            "byte {size}: the JSON array is not closed (truncated file?) after record 2",
        ),
        # garbage after the closing bracket
        (
            "[" + job(1) + "] trailing",
            "byte {after}: unexpected data after the end of the JSON array",
        ),
    ],
    ids=["truncated mid-record", "truncated after comma", "garbage after array"],
)
def test_unrecoverable_tail_is_a_one_line_error(tmp_path: Path, text: str, message: str) -> None:
    f = tmp_path / "cluster_job_log"
    f.write_bytes(text.encode())
    expected = f"{f}: " + message.format(size=len(text), after=text.find("trailing"))
    with pytest.raises(InputError) as info:
        ingest(LOADERS["philly"], tmp_path, tmp_path / "store")
    assert str(info.value) == expected
    assert not any((tmp_path / "store").glob("current/jobs/source=philly/*.parquet"))
    assert not any((tmp_path / "store").glob("gen-*/jobs/source=philly/*.parquet"))


def test_count_disagreeing_with_parser_fails_the_ingest(tmp_path: Path) -> None:
    """A job object nested in another is valid JSON, so DuckDB reads one record, but
    the bytes hold two job starts: the independent count disagrees with the parser
    and the ingest must fail (one line, exit 1) instead of reconciling 1 = 1 + 0."""
    nested = job(1, attempts='[{"status": "Pass", "jobid": "inner"}]')
    (tmp_path / "cluster_job_log").write_text("[" + nested + ", " + job(2) + "]")
    with pytest.raises(InputError) as info:
        ingest(LOADERS["philly"], tmp_path, tmp_path / "store")
    assert str(info.value) == (
        f"{tmp_path / 'cluster_job_log'}: record 1: the file holds 3 job-object starts but "
        "the parser found 2 job records: record boundaries were lost (a job object inside "
        "another?)"
    )
    result = CliRunner().invoke(
        app, ["ingest", "philly", str(tmp_path), "--store", str(tmp_path / "cli-store")]
    )
    assert result.exit_code == 1
    assert result.stderr.strip().splitlines() == [f"error: {info.value}"]


@settings(max_examples=40, deadline=None)
@given(data=st.binary(max_size=300), cut=st.integers(0, 300))
def test_job_start_count_is_split_independent(data: bytes, cut: int) -> None:
    """Counting in two pieces gives the same count as counting at once (a start that
    straddles the cut is counted once), and the numpy finder agrees with the regex."""
    data = data[: len(data) // 2] + b'{ \n"status"' + data[len(data) // 2 :] + b'{"jobid"'
    whole, _ = philly_json.count_job_starts([data], b"")
    pieces, _ = philly_json.count_job_starts([data[:cut], data[cut:]], b"")
    starts, _ = philly_json._starts_in(np.frombuffer(data, dtype=np.uint8))
    assert whole == pieces == len(starts) >= 2


# --- property: one damaged record loses nothing else --------------------------------------

DAMAGE = st.lists(st.sampled_from(list(b'"[]{},: x0\\')), max_size=6).map(bytes)


@pytest.fixture(scope="module")
def synth_log(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    """The first 15 records of a synthetic log, byte for byte (the generator needs at
    least 750 jobs: it gives each of the 15 VCs one of max(8, N // 50) users)."""
    out = tmp_path_factory.mktemp("synth")
    synth_write(out, jobs=800, seed=7, util_days=0)
    full = (out / "cluster_job_log").read_bytes()
    cut = [i for i in range(len(full)) if full.startswith(b'{"status"', i)][15]
    assert full[cut - 2 : cut] == b", "
    return full[: cut - 2] + b"]"


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.data(), damage=DAMAGE)
def test_one_damaged_record_loses_only_itself(
    tmp_path_factory: pytest.TempPathFactory, synth_log: bytes, data: st.DataObject, damage: bytes
) -> None:
    """Rule: replace any byte range strictly inside one record (after its
    ``{"status"``, before its closing ``}``; not the last record, whose damage may
    make the tail unrecoverable) by up to 6 bytes of JSON punctuation. Then every
    OTHER record's job is written, the damaged record is written (if it still
    decodes) or quarantined (possibly in pieces), no other job appears, and read =
    written + quarantined."""
    records = json.loads(synth_log)
    starts = [i for i in range(len(synth_log)) if synth_log.startswith(b'{"status"', i)]
    assert len(starts) == len(records) == 15
    k = data.draw(st.integers(0, len(records) - 2), label="record")
    lo_min = starts[k] + len(b'{"status"')
    close = starts[k + 1] - len(b", ") - 1  # the record's closing "}"
    assert synth_log[close : close + 1] == b"}"
    lo = data.draw(st.integers(lo_min, close), label="lo")
    hi = data.draw(st.integers(lo, close), label="hi")
    broken = synth_log[:lo] + damage + synth_log[hi:]
    root = tmp_path_factory.mktemp("damaged")
    (root / "cluster_job_log").write_bytes(broken)
    report = ingest(LOADERS["philly"], root, root / "store")
    line = next(r for r in report.lines if r.table == "jobs")
    assert line.rows_read == line.rows_written + line.rows_quarantined
    ids = {r[0] for r in connect(root / "store").execute("SELECT job_id FROM jobs").fetchall()}
    others = {r["jobid"] for i, r in enumerate(records) if i != k}
    assert others <= ids
    assert len(ids - others) <= 1
    assert line.rows_written in (len(records) - 1, len(records))


@settings(max_examples=40, deadline=None)
@given(
    chunk=st.integers(1, 120),
    broken=st.sampled_from([MISSING_BRACKET, MISSING_QUOTE, MISSING_BRACE, "xyz", '"a\\\\"']),
    indent=st.booleans(),
)
def test_resync_split_is_chunk_independent(
    tmp_path_factory: pytest.TempPathFactory, chunk: int, broken: str, indent: bool
) -> None:
    """Job starts, resets and broken-record hints that straddle chunk boundaries give
    the same records as one big chunk."""
    root = tmp_path_factory.mktemp("resync-chunks")
    sep = ",\n    " if indent else ", "
    text = "[" + sep.join([job(1), broken, job(3), job(4)]) + "]"
    f = root / "cluster_job_log"
    f.write_bytes(text.encode())

    def split(size: int) -> list[tuple[object, ...]]:
        work = root / f"w{size}"
        work.mkdir(exist_ok=True)
        philly_json._CHUNK = size  # type: ignore[misc]
        try:
            return philly_json.split_array(f, work).frame.rows()
        finally:
            philly_json._CHUNK = 1 << 24  # type: ignore[misc]

    rows = split(1 << 24)
    assert split(chunk) == rows
    assert [
        f'"jobid": "{jid(n)}"' in str(r[1]) for r, n in zip(rows, [1, 0, 3, 4], strict=True)
    ] == [
        True,
        False,
        True,
        True,
    ]
