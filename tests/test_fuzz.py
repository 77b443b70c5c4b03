"""Fuzzing the openb parsers: whatever the bytes, ingest either reconciles every record
(written + quarantined = read) or raises one InputError naming the file, never a crash."""

from __future__ import annotations

from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpu_trace.errors import InputError
from gpu_trace.loaders import LOADERS, ingest
from tests.openb_common import POD_HEADER

FIELD = st.one_of(
    st.integers(-5, 20_000).map(str),
    st.sampled_from(["", "LS", "Running", "nan", "1e3", "V100M16|V100M32", " 7", "x"]),
    st.text(max_size=5).filter(lambda s: "\n" not in s and "\r" not in s),
)
LINE = st.lists(FIELD, min_size=0, max_size=13).map(",".join)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    lines=st.lists(LINE, max_size=12),
    header=st.booleans(),
    tail=st.binary(max_size=20),
    cut=st.integers(0, 400),
)
def test_pod_list_never_crashes(
    tmp_path_factory, lines: list[str], header: bool, tail: bytes, cut: int
) -> None:
    root = tmp_path_factory.mktemp("fuzz")
    body = ((POD_HEADER + "\n") if header else "") + "\n".join(lines)
    data = body.encode()[: max(cut, len(body.encode()) if header else cut)] + tail
    f = root / "openb_pod_list_default.csv"
    f.write_bytes(data)
    try:
        report = ingest(LOADERS["openb"], f, root / "store")
    except InputError as exc:
        assert str(f) in str(exc)
        return
    read, written, quarantined = report.totals
    assert read == written + quarantined


@settings(
    max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.binary(max_size=300))
def test_node_list_random_bytes(tmp_path_factory, data: bytes) -> None:
    root = tmp_path_factory.mktemp("fuzzn")
    f = root / "openb_node_list_all_node.csv"
    f.write_bytes(b"sn,cpu_milli,memory_mib,gpu,model\n" + data)
    report = ingest(LOADERS["openb"], f, root / "store")
    read, written, quarantined = report.totals
    assert read == written + quarantined
    assert read == Path(f).read_bytes().count(b"\n") - 1 + (
        0 if data.endswith(b"\n") or not data else 1
    )
