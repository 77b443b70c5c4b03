"""Ties as documented (docs/replay.md): ``consolidate`` picks the lowest node index
among equally full nodes, and jobs submitted in the same second keep the trace's order
(the order the Tiresias simulator reads its CSV in: ``run_sim.py`` appends rows as read
and its FIFO sorts stably by submit time) in ``replay run`` and ``replay export``.
"""

from __future__ import annotations

import csv
from pathlib import Path

from typer.testing import CliRunner

from gpu_trace.cli import app
from gpu_trace.store.catalog import connect
from tests.test_replay_golden import first_nodes, run, times

runner = CliRunner()


def test_consolidate_ties_go_to_the_lowest_node_index() -> None:
    # 12x4 = nodes 0, 1, 2 of 4 GPUs, FIFO + consolidate (fullest node that fits).
    # j0 (2 GPUs, 5 s) at 0: all nodes have 4 free, tie -> node 0, 0..5.
    # j1 (4 GPUs, 5 s) at 0: node 0 has 2; nodes 1, 2 have 4, tie -> node 1, 0..5.
    # At 5 both end; j2 (1 GPU, 10 s) at 5: all have 4 free, tie -> node 0, 5..15.
    # j3 (4 GPUs, 10 s) at 10: node 0 has 3; nodes 1 and 2 have 4, tie -> node 1, 10..20.
    # (Before the fix the bucket set's iteration order sent j3 to node 2.)
    result = run([(0, 5, 2), (0, 5, 4), (5, 10, 1), (10, 10, 4)], "12x4")
    assert first_nodes(result) == [[0], [1], [0], [1]]
    assert times(result) == {"j0": (0, 5), "j1": (0, 5), "j2": (5, 15), "j3": (10, 20)}


def test_spread_ties_go_to_the_lowest_node_index() -> None:
    # 12x4, spread (emptiest node). j0 (4 GPUs, 5 s) -> node 0 (tie), j1 (4, 5 s) ->
    # node 1 (tie of 1 and 2), both 0..5; at 5 all are empty again; j2 (1 GPU, 10 s) at 5
    # -> node 0; j3 (1 GPU, 10 s) at 6: nodes 1 and 2 have 4 free -> node 1.
    result = run([(0, 5, 4), (0, 5, 4), (5, 10, 1), (6, 10, 1)], "12x4", placement="spread")
    assert first_nodes(result) == [[0], [1], [0], [1]]


TIRESIAS_HEADER = "job_id,num_gpu,submit_time,iterations,model_name,duration,interval"


def _tiresias_csv(path: Path) -> Path:
    # Tiresias' own CSV layout (simulator/60_job.csv in SymbioticLab/Tiresias): 12 jobs
    # numbered 1..12 in file order, all submitted at second 0, 1 GPU each, 10 s each.
    rows = [f"{i},1,0,10,resnet50,10,0" for i in range(1, 13)]
    path.write_text(TIRESIAS_HEADER + "\n" + "\n".join(rows) + "\n", encoding="utf-8")
    return path


def test_same_second_jobs_keep_trace_order_in_run(tmp_path: Path) -> None:
    store = tmp_path / "store"
    src = _tiresias_csv(tmp_path / "same_second.csv")
    ok = runner.invoke(app, ["ingest", "chronus", str(src), "--store", str(store)])
    assert ok.exit_code == 0, ok.output
    # One 1-GPU node, FIFO: jobs run one after another in file order:
    # job i starts at 10 (i - 1) and ends at 10 i. (As text, "10" < "2": job 10 would
    # have run second.)
    out = runner.invoke(
        app,
        [
            *("replay", "run", "-s", "chronus", "--policy", "fifo", "--gpus", "1x1"),
            *("--run-id", "ties", "--store", str(store), "--out", str(tmp_path / "out")),
        ],
    )
    assert out.exit_code == 0, out.output
    got = dict(
        connect(store)
        .execute("SELECT job_id, start_time_s FROM replay_jobs WHERE run_id = 'ties'")
        .fetchall()
    )
    assert got == {str(i): 10.0 * (i - 1) for i in range(1, 13)}


def test_same_second_jobs_keep_trace_order_in_export(tmp_path: Path) -> None:
    store = tmp_path / "store"
    src = _tiresias_csv(tmp_path / "same_second.csv")
    ok = runner.invoke(app, ["ingest", "chronus", str(src), "--store", str(store)])
    assert ok.exit_code == 0, ok.output
    back = tmp_path / "back.csv"
    exp = runner.invoke(
        app,
        [
            "replay",
            "export",
            "-s",
            "chronus",
            "--to",
            "tiresias",
            "-o",
            str(back),
            "--store",
            str(store),
        ],
    )
    assert exp.exit_code == 0, exp.output
    with back.open(newline="") as fh:
        ids = [r["job_id"] for r in csv.DictReader(fh)]
    assert ids == [str(i) for i in range(1, 13)]
