"""Loaders' status mappings for out-of-memory and preemption, from each source's own
documentation (Slurm's sacct manual for traces that are Slurm logs).

The other loaders were reviewed against their trace's README and have no such state:
Philly ``status`` is "One of Pass, Killed, or Failed" (msr-fiddle/philly-traces
README); PAI 2020 job ``status`` is "Running, Terminated, Failed, Waiting"
(alibaba/clusterdata cluster-trace-gpu-v2020 README); openb ``pod_phase`` is
"Succeeded, Running, Pending, Failed" (the openb README); AcmeTrace lists five final
states (COMPLETED, CANCELLED, FAILED, TIMEOUT, NODE_FAIL); Chronus / Gavel carry no
status at all.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl

from gpu_trace.loaders import LOADERS, ingest
from gpu_trace.store.scan import scan

HEADER = (
    "job_id,user,vc,jobname,gpu_num,cpu_num,node_num,state,submit_time,start_time,"
    "end_time,duration,queue"
)


def test_helios_slurm_oom_and_preempted_states(tmp_path: Path) -> None:
    """The Helios README: cluster_log.csv "provides rich information on all jobs
    submitted to Slurm"; its ``state`` is the Slurm job state. Slurm's sacct manual
    (JOB STATE CODES): ``OUT_OF_MEMORY`` "Job experienced out of memory error",
    ``PREEMPTED`` "Job terminated due to preemption". They are kept apart from FAILED and
    CANCELLED, with the raw state kept; a state Slurm never defined stays unknown."""
    folder = tmp_path / "data" / "Earth"
    folder.mkdir(parents=True)
    rows = [
        "1,u1,vc1,a,2,8,1,OUT_OF_MEMORY,2020-04-01 00:00:00,2020-04-01 00:00:10,"
        "2020-04-01 00:10:10,600,10",
        "2,u1,vc1,b,8,32,1,PREEMPTED,2020-04-01 01:00:00,2020-04-01 01:00:00,"
        "2020-04-01 02:00:00,3600,0",
        "3,u2,vc1,c,1,4,1,FAILED,2020-04-01 02:00:00,2020-04-01 02:00:00,2020-04-01 02:00:05,5,0",
        "4,u2,vc1,d,1,4,1,CANCELLED,2020-04-01 03:00:00,2020-04-01 03:00:00,"
        "2020-04-01 03:00:05,5,0",
        "5,u2,vc1,e,1,4,1,EXPLODED,2020-04-01 04:00:00,2020-04-01 04:00:00,2020-04-01 04:00:05,5,0",
    ]
    (folder / "cluster_log.csv").write_text(HEADER + "\n" + "\n".join(rows) + "\n")
    store = tmp_path / "store"
    ingest(LOADERS["helios"], tmp_path / "data", store)
    got = scan(store, "jobs").select("job_id", "status", "raw_status").sort("job_id").collect()
    assert got.rows() == [
        ("1", "oom", "OUT_OF_MEMORY"),
        ("2", "preempted", "PREEMPTED"),
        ("3", "failed", "FAILED"),
        ("4", "cancelled", "CANCELLED"),
        ("5", "unknown", "EXPLODED"),
    ]


def test_openb_export_of_an_oom_job_is_a_failed_pod() -> None:
    """Kubernetes' pod lifecycle: a pod whose container was OOMKilled and not restarted
    ends in phase Failed (https://kubernetes.io/docs/concepts/workloads/pods/pod-lifecycle/),
    so an out-of-memory job exported to openb's pod_phase is Failed, not Succeeded.
    """
    from gpu_trace.replay.interchange import _openb_values

    jobs = pl.DataFrame(
        {"status": ["oom", "completed"], "raw_status": ["OUT_OF_MEMORY", "COMPLETED"]}
    )
    assert _openb_values(jobs)["pod_phase"].to_list() == ["Failed", "Succeeded"]
