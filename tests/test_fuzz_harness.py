"""The ingest fuzz harness (bench/fuzz.py) must classify correctly, or `make fuzz`'s
"0 tracebacks, 0 silent drops" means nothing: a known traceback and a known silent
drop are detected, the counting rules are worked out by hand, and a short seeded run
is reproducible and reconciles every unmutated seed."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from bench import fuzz
from bench.fuzz_check import Expect, StoreCounts, classify_exit, expect, reconcile, signature
from bench.fuzz_mutators import MUTATORS, mutate

POD = b"name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time\n"


def test_escaped_exception_is_a_traceback() -> None:
    out = classify_exit(1, KeyError("gpu"), "", "Traceback ...")
    assert out is not None and out.cls == "traceback" and out.reason == "KeyError: 'gpu'"


def test_exit_codes_and_stderr_shape() -> None:
    assert classify_exit(0, None, "openb: read 3 = written 3 + quarantined 0") is None
    ok = classify_exit(1, SystemExit(1), "error: f.csv: line 2: bad\n")
    assert ok is not None and (ok.cls, ok.reason) == ("rejected", "error: f.csv: line 2: bad")
    two = classify_exit(1, SystemExit(1), "error: f.csv: bad\nmore detail\n")
    assert two is not None and two.cls == "traceback"
    bare = classify_exit(1, SystemExit(1), "something went wrong\n")
    assert bare is not None and bare.cls == "traceback"
    odd = classify_exit(3, SystemExit(3), "")
    assert odd is not None and odd.cls == "traceback" and odd.reason == "exit code 3"
    usage = classify_exit(2, SystemExit(2), "Usage: ...\nError: no such option\n")
    assert usage is not None and usage.cls == "rejected"


def test_loader_reconciliation_error_is_a_drop_not_a_rejection() -> None:
    msg = "error: /t/in/f.csv: jobs: read 5 records but wrote 3 and quarantined 1\n"
    out = classify_exit(1, SystemExit(1), msg)
    assert out is not None and out.cls == "silent_drop"


def _ingest(file: str, table: str, read: int, written: int, quarantined: int) -> dict[str, object]:
    return {
        "table": table,
        "dataset": "default",
        "file": file,
        "rows_read": read,
        "rows_written": written,
        "rows_quarantined": quarantined,
    }


def test_silent_drop_is_detected() -> None:
    # header + 3 data lines (one empty): 3 records by the harness's own count
    data = POD + b"a,1,1,1,1,,LS,Running,0,,\n\nb,1,1,1,1,,LS,Running,0,,\n"
    exp = expect("openb", "openb_pod_list_default.csv", data)
    assert exp == Expect(("jobs",), "exact", 3)
    f = "openb_pod_list_default.csv"
    # the loader claims 2 read, 2 written: consistent with itself, but one line vanished
    dropped = StoreCounts([_ingest(f, "jobs", 2, 2, 0)], {("jobs", "default"): 2})
    assert reconcile(exp, dropped, f) == (
        f"{f}: 3 records in the input, store has read 2, written+quarantined 2"
    )
    good = StoreCounts(
        [_ingest(f, "jobs", 3, 2, 1)],
        {("jobs", "default"): 2},
        {("jobs", "default", f): 1},
    )
    assert reconcile(exp, good, f) is None
    # the ingests table says 2 written but the jobs table holds 1
    lying = StoreCounts(
        [_ingest(f, "jobs", 3, 2, 1)], {("jobs", "default"): 1}, {("jobs", "default", f): 1}
    )
    assert reconcile(exp, lying, f) == "jobs/default: ingests says 2 written, table holds 1"
    # quarantine rows missing from the quarantine table
    lost = StoreCounts([_ingest(f, "jobs", 3, 2, 1)], {("jobs", "default"): 2})
    assert "quarantine holds 0" in (reconcile(exp, lost, f) or "")


def test_cell_rule() -> None:
    # 2 data lines x 3 kept fields: each line gives 1 (rejected whole) or 3 records
    exp = Expect(("gpu_samples", "events"), "cells", 2, 3)
    for total, fine in [(2, True), (4, True), (6, True), (3, False), (5, False), (8, False)]:
        c = StoreCounts([_ingest("d.txt", "gpu_samples", total, total, 0)])
        c.table_rows[("gpu_samples", "default")] = total
        assert (reconcile(exp, c, "d.txt") is None) is fine, total


def test_counting_rules_by_hand() -> None:
    dmon = b"# gpu pwr gtemp sm\n# Idx W C %\n    0 70 40 5\n    1 71 41 6\n"
    # 2 data lines; kept columns pwr, gtemp, sm = 3 (gpu is the key)
    assert expect("nvidia-smi", "x-dmon.txt", dmon) == Expect(
        ("gpu_samples", "events"), "cells", 2, 3, no_event=True
    )
    pmon = (
        b"# gpu pid type sm mem command\n# Idx # C/G % % name\n 0 12 C 5 1 python\n 1 - - - - -\n"
    )
    assert expect("nvidia-smi", "p.txt", pmon) == Expect(("gpu_processes",), "exact", 1)
    prom = b'# HELP a b\n# TYPE a gauge\nDCGM_FI_DEV_GPU_TEMP{gpu="0"} 40\n\nbroken line\n'
    assert expect("prometheus", "m.prom", prom).lines == 2
    job_log = b'[{"jobid": "a"}, {"jobid": "b"}]'
    assert expect("philly", "cluster_job_log", job_log) == Expect(("jobs",), "exact", 2)
    assert expect("philly", "cluster_job_log", job_log[:-1]).mode == "none"
    assert expect("gavel", "t.trace", b"a\tb\nc").lines == 2
    util = b"time,machineId,gpu0_util,gpu1_util\nt,m,1,NA,\nt,m,NA,NA,\nt,m,1,2\n"
    # per line: 1 sample (or 1 if rejected); 0 (all NA) or 1; 2 samples or 1 rejected
    got = expect("philly", "cluster_gpu_util", util)
    assert (got.mode, got.lo, got.hi) == ("bound", 1 + 0 + 1, 1 + 1 + 2)


def test_signature_dedups_numbers_and_paths() -> None:
    a = classify_exit(1, ValueError("/tmp/x1/in/f.csv: line 12"), "")
    b = classify_exit(1, ValueError("/tmp/y22/in/f.csv: line 7"), "")
    assert a is not None and b is not None
    assert signature("openb", a) == signature("openb", b)


def test_mutators_are_deterministic_and_capped() -> None:
    data = POD + b"a,1,1,1,1,,LS,Running,0,,\n" * 5
    for name, m in MUTATORS.items():
        assert m(data, random.Random(3)) == m(data, random.Random(3)), name
    for i in range(200):
        out, applied = mutate(data, random.Random(i))
        assert len(out) <= 64 * 1024 and 1 <= len(applied) <= 3


@pytest.fixture(scope="module")
def pool(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[fuzz.Seed]]:
    return fuzz.seeds(tmp_path_factory.mktemp("seeds"), 0, ("openb", "dcgmi", "gavel"))


def test_unmutated_seeds_reconcile(pool: dict[str, list[fuzz.Seed]]) -> None:
    kinds = ("openb", "dcgmi", "gavel")
    results = [fuzz.run_case(fuzz.make_case(i, 0, pool, kinds, clean=True)) for i in range(9)]
    assert [(r["kind"], r["cls"]) for r in results] == [(kinds[i % 3], "ok") for i in range(9)]


def test_seeded_run_is_reproducible(pool: dict[str, list[fuzz.Seed]], tmp_path: Path) -> None:
    kinds = ("openb", "dcgmi", "gavel")
    cases = [fuzz.make_case(i, 7, pool, kinds) for i in range(20)]
    again = [fuzz.make_case(i, 7, pool, kinds) for i in range(20)]
    assert [c["data"] for c in cases] == [c["data"] for c in again]
    assert {c["kind"] for c in cases} == set(kinds)
    results = [fuzz.run_case(c) for c in cases]
    assert all(r["cls"] in fuzz.CLASSES for r in results)
    where = fuzz.save_failure(tmp_path, cases[0], results[0] | {"cls": "traceback"})
    assert (where / "in" / cases[0]["name"]).read_bytes() == cases[0]["data"]
    assert (where / "reason.txt").read_text().startswith("traceback: ")


def test_acme_counting_rules_by_hand() -> None:
    trace = b"job_id,user\n1,u\n\n2,u\n"
    # every line after the header is one job record, the empty one too
    assert expect("acme", "trace_seren.csv", trace) == Expect(("jobs",), "exact", 3)
    util = b"Time,a-0,a-1\nt,1,\nt,,\nt,1,2\n"
    # per line: 1 non-empty cell; none (0, or 1 if the line is rejected); 2 cells or 1
    got = expect("acme", "GPU_UTIL.csv", util)
    assert (got.tables, got.mode, got.lo, got.hi) == (
        ("gpu_samples", "events"),
        "bound",
        1 + 0 + 1,
        1 + 1 + 2,
    )
    assert expect("acme", "NODE_CPU_UTILIZATION.csv", util).tables[0] == "host_samples"


def test_acme_unmutated_seeds_reconcile(tmp_path: Path) -> None:
    pool = fuzz.seeds(tmp_path / "seeds", 0, ("acme",))
    n = len(pool["acme"])
    assert n >= 16  # bundled sample files + a synth run
    results = [
        fuzz.run_case(fuzz.make_case(i, 0, pool, ("acme",), clean=True)) for i in range(0, n, 4)
    ]
    assert [r["cls"] for r in results] == ["ok"] * len(results)


def test_slurm_counting_rule_by_hand() -> None:
    """JobName before JobID: JobID is the 3rd field from the right (4 fields, index 1);
    the trailing ``|`` of the header means one per line. Line 2 is job 1; line 3 (a name
    holding ``|``) is step 1.batch; line 4 is step 2.0; line 5 (empty) is a jobs record
    (quarantined): 4 lines - 2 steps = 2 jobs records."""
    data = (
        b"JobName|JobID|State|Submit|\n"
        b"x|1|COMPLETED|t|\n"
        b"x|y|1.batch|COMPLETED|t|\n"
        b"z|2.0|RUNNING|t|\n"
        b"\n"
    )
    assert expect("slurm", "jobs.psv", data) == Expect(("jobs",), "exact", 2, folds=True)
    assert expect("slurm", "jobs.psv", b"JobName|State\nx|y\n").mode == "none"


def test_prometheus_range_counting_rule_by_hand() -> None:
    ok = b'{"status":"success","data":{"resultType":"matrix","result":['
    one = ok + b'{"metric":{},"values":[[1,"2"],[2,"3"],"x"]},7]}}'
    # series 1: 3 elements; series 2 (not an object): 1
    assert expect("prometheus-range", "q.json", one).lines == 4
    err = b'{"status":"error","error":"e"}'
    # JSON lines: 4 + the error answer (1) + the broken line (1); the blank line is none
    lines = one + b"\n" + err + b"\n\n{broken\n"
    assert expect("prometheus-range", "q.jsonl", lines).lines == 6
    # a single unusable document has no records: the ingest must refuse it
    assert expect("prometheus-range", "q.json", err).lines == 0


def test_prometheus_range_seeds_reconcile(tmp_path: Path) -> None:
    pool = fuzz.seeds(tmp_path, 0, ("prometheus-range",))
    kinds = ("prometheus-range",)
    n = len(pool["prometheus-range"])
    results = [fuzz.run_case(fuzz.make_case(i, 0, pool, kinds, clean=True)) for i in range(n)]
    assert n == 2 and [r["cls"] for r in results] == ["ok"] * n, results
