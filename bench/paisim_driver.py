"""Run the published PAI 2020 simulator once, one policy, on a given CSV.

Runs under the *simulator's* interpreter (``PAI_SIM_PYTHON``; it needs numpy and
matplotlib, its ``requirements.txt``), never imports gpu_trace, and imports the
simulator's own modules from ``PAI_SIM`` (``cluster-trace-gpu-v2020/simulator`` of a
checkout of alibaba/clusterdata; its code is not copied here).

``python bench/paisim_driver.py CSV POLICY OUT_DIR`` with POLICY ``fifo`` (its
``alloc_policy = 8``) or ``sjf`` (``0``, SJF with oracle durations).

Why a driver and not ``run_simulator.py``: that script reads a fixed path
(``traces/pai/pai_job_duration_estimate_100K.csv``), runs five policies in a row (three
of them need the duration-estimate columns ``user_dur``, ``group_dur``,
``group_gpu_dur`` that only the real file has) and keeps per-job results only in its
log at INFO level. Everything else is its README configuration, set as
``run_simulator.py`` sets it for ``-r 1000 -n 20000 -g 6500`` (the log name
``6500g_1n_h0_0p_3sn_0gt-1000ar-20000j-1x-42r``): one node, no heterogeneity, capacity
pattern 0, node sort 3 (its default ``--balance``), ``gpu_type_matching`` 0, 1,000
arrivals per 60 s, 20,000 jobs, one repeat, seed 42, ``round(23.22 x GPUs)`` CPUs,
preemption policy 2 (LGF; it never preempts: ``preempt_job`` returns at once).

Writes ``OUT_DIR/jobs.csv`` (``job_id,submit_time,duration,jct``, as its
``JobHistory.job_done_list`` holds them: re-timed submit, duration, completion minus
submit) and prints one JSON line with the run's own ``runtime`` (measured as
``run_simulator.py`` does: from constructing ``Simulator`` to the end of
``simulator_go``), mean JCT, mean wait and makespan.
"""

import csv
import json
import logging
import os
import sys
import time
from pathlib import Path

POLICIES = {"fifo": 8, "sjf": 0}
NUM_GPUS = 6500
NUM_JOBS = 20000
ARRIVAL_RATE = 1000


def main() -> None:
    """Command line: see the module docstring."""
    trace, policy, out = Path(sys.argv[1]).resolve(), sys.argv[2], Path(sys.argv[3])
    sim_dir = os.environ["PAI_SIM"]
    sys.path.insert(0, sim_dir)
    from simulator import Simulator  # the simulator's own module

    out.mkdir(parents=True, exist_ok=True)
    log_file = out / "sim.log"
    logging.basicConfig(
        level=logging.WARNING, format="%(message)s", filename=log_file, filemode="a"
    )
    start = time.time()
    sim = Simulator(
        csv_file=trace,
        alloc_policy=POLICIES[policy],
        preempt_policy=2,
        sort_node_policy=3,
        num_nodes=1,
        random_seed=42,
        max_time=int(1e9),
        num_spare_node=0,
        pattern=0,
        hetero=False,
        num_gpus=NUM_GPUS,
        num_cpus=round(23.22 * NUM_GPUS),
        describe_file=None,
        log_file=log_file,
        export_job_stats=False,
        export_cluster_util=False,
        arrival_rate=ARRIVAL_RATE,
        num_jobs_limit=NUM_JOBS,
        gpu_type_matching=0,
        verbose=0,
    )
    (done, jct, wait, makespan) = sim.simulator_go(repeat=1)[0]
    runtime = time.time() - start
    jobs = sim.cluster.job_history.job_done_list
    with (out / "jobs.csv").open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["job_id", "submit_time", "duration", "jct"])
        for j in jobs:
            w.writerow([j["job_id"], j["submit_time"], j["duration"], j["jct"]])
    print(
        json.dumps(
            {
                "runtime_s": round(runtime, 2),
                "jobs_done": done,
                "avg_jct_s": round(jct, 2),
                "wait_time_s": round(wait, 2),
                "makespan_s": makespan,
            }
        )
    )


if __name__ == "__main__":
    main()
