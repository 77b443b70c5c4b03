"""The plain-DuckDB baseline for raw-log ingest (issue 25, "Performance").

``python -m bench.baseline_duckdb_ingest FAMILY RAW OUT_DIR`` prints one JSON line.

What a competent user would write instead of ``gpu-trace ingest``: one DuckDB SQL
statement per format that reads the raw files ``gpu-trace synth FAMILY`` writes
(``read_csv``; ``read_json`` for Philly's JSON job log) and writes the canonical
``jobs`` columns as zstd Parquet: local wall clock converted to UTC with the source
zone, the source status mapped to the canonical vocabulary beside the raw one,
``queue_s`` / ``run_s`` in seconds, GPU / CPU / memory amounts in canonical units.

It checks nothing: no checksum of the input, no line numbers, no quarantine (a
malformed row raises or is coerced silently), no reconciliation of rows read against
written, no ambiguous-hour rule. It writes only ``jobs`` (``ingest`` also writes
Philly's and Slurm's placements, PAI's tasks, Helios' capacity): less work than ours,
so parity against it is a conservative bar.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import duckdb

HELIOS_STATUS = (
    "CASE state WHEN 'COMPLETED' THEN 'completed' WHEN 'CANCELLED' THEN 'cancelled' "
    "WHEN 'FAILED' THEN 'failed' WHEN 'TIMEOUT' THEN 'timeout' "
    "WHEN 'NODE_FAIL' THEN 'node_fail' ELSE 'unknown' END"
)


def helios(con: duckdb.DuckDBPyConnection, raw: Path, out: Path) -> int:
    """Each ``data/<Cluster>/cluster_log.csv`` -> ``<cluster>.parquet``."""
    rows = 0
    for log in sorted(raw.rglob("cluster_log.csv")):
        cluster = log.parent.name.lower()
        utc = "timezone('Asia/Shanghai', {0}) AS {0}"
        con.sql(
            f"""
            COPY (
              SELECT 'helios' AS source, '{cluster}' AS dataset, '{cluster}' AS cluster,
                job_id::VARCHAR AS job_id, "user", vc, jobname AS name,
                {utc.format("submit_time")}, {utc.format("start_time")},
                {utc.format("end_time")},
                queue::DOUBLE AS queue_s, duration::DOUBLE AS run_s,
                gpu_num::DOUBLE AS gpus, gpu_num::DOUBLE AS gpus_raw, 'gpu' AS gpus_raw_unit,
                cpu_num::DOUBLE AS cpus, node_num::INTEGER AS nodes, 1::INTEGER AS attempts,
                {HELIOS_STATUS} AS status, state AS raw_status,
                'Asia/Shanghai' AS source_tz, 'absolute' AS time_basis
              FROM read_csv('{log}', header = true, types = {{'job_id': 'VARCHAR'}},
                            timestampformat = '%Y-%m-%d %H:%M:%S')
              ORDER BY submit_time, job_id
            ) TO '{out / cluster}.parquet' (FORMAT parquet, COMPRESSION zstd)
            """
        )
        rows += con.execute(f"SELECT count(*) FROM '{out / cluster}.parquet'").fetchall()[0][0]
    return rows


def philly(con: duckdb.DuckDBPyConnection, raw: Path, out: Path) -> int:
    """``cluster_job_log`` (one JSON array) -> ``philly.parquet``: first attempt's start,
    last attempt's end, GPU ids of the first attempt's machines, US-Pacific -> UTC.
    """
    log = raw / "cluster_job_log" if raw.is_dir() else raw
    pacific = "timezone('America/Los_Angeles', strptime(nullif({0}, 'None'), '%Y-%m-%d %H:%M:%S'))"
    first = pacific.format("attempts[1].start_time")
    last = pacific.format("attempts[len(attempts)].end_time")
    con.sql(
        f"""
        COPY (
          WITH j AS (
            SELECT jobid AS job_id, "user", vc, status AS raw_status, attempts,
              {pacific.format("submitted_time")} AS submit_time,
              {first} AS start_time, {last} AS end_time
            FROM read_json('{log}', format = 'array', maximum_object_size = 1073741824,
              columns = {{status: 'VARCHAR', vc: 'VARCHAR', jobid: 'VARCHAR',
                user: 'VARCHAR', submitted_time: 'VARCHAR',
                attempts: 'STRUCT(start_time VARCHAR, end_time VARCHAR,
                                  detail STRUCT(ip VARCHAR, gpus VARCHAR[])[])[]'}})
          )
          SELECT 'philly' AS source, 'philly' AS dataset, 'philly' AS cluster,
            job_id, "user", vc, submit_time, start_time, end_time,
            epoch(start_time) - epoch(submit_time) AS queue_s,
            epoch(end_time) - epoch(start_time) AS run_s,
            list_sum(list_transform(attempts[1].detail, lambda d: len(d.gpus)))::DOUBLE AS gpus,
            list_sum(list_transform(attempts[1].detail, lambda d: len(d.gpus)))::DOUBLE
              AS gpus_raw,
            'gpu_ids' AS gpus_raw_unit,
            len(attempts[1].detail)::INTEGER AS nodes, len(attempts)::INTEGER AS attempts,
            CASE raw_status WHEN 'Pass' THEN 'completed' WHEN 'Killed' THEN 'cancelled'
              WHEN 'Failed' THEN 'failed' ELSE 'unknown' END AS status,
            raw_status, 'America/Los_Angeles' AS source_tz, 'absolute' AS time_basis
          FROM j ORDER BY submit_time, job_id
        ) TO '{out}/philly.parquet' (FORMAT parquet, COMPRESSION zstd)
        """
    )
    return con.execute(f"SELECT count(*) FROM '{out}/philly.parquet'").fetchall()[0][0]  # type: ignore[no-any-return]


PAI_STATUS = (
    "CASE {0} WHEN 'Terminated' THEN 'completed' WHEN 'Failed' THEN 'failed' "
    "WHEN 'Running' THEN 'running' WHEN 'Waiting' THEN 'pending' ELSE 'unknown' END"
)


def _pai_table(raw: Path, name: str) -> str:
    """``read_csv`` of a headerless ``pai_<name>.csv`` with its ``.header`` names."""
    names = (raw / f"pai_{name}.header").read_text().strip().split(",")
    return f"read_csv('{raw}/pai_{name}.csv', header = false, names = {names})"


def pai2020(con: duckdb.DuckDBPyConnection, raw: Path, out: Path) -> int:
    """``pai_job_table`` + ``pai_task_table`` -> ``trace.parquet``: hidden-epoch seconds
    as instants, per-instance percent plans summed over tasks (x ``inst_num``).
    """
    instant = "CASE WHEN {0} > 0 THEN to_timestamp({0}) END"
    con.sql(
        f"""
        COPY (
          WITH t AS (
            SELECT job_name, min(CASE WHEN start_time > 0 THEN start_time END) AS first_start,
              sum(inst_num * plan_gpu) AS gpu_pct, sum(inst_num * plan_cpu) AS cpu_pct,
              sum(inst_num * plan_mem) AS mem_gb,
              string_agg(DISTINCT gpu_type, '|' ORDER BY gpu_type) AS gpu_type
            FROM {_pai_table(raw, "task_table")} GROUP BY job_name
          )
          SELECT 'pai2020' AS source, 'trace' AS dataset, 'pai' AS cluster,
            j.job_name AS job_id, j."user", j."user" AS vc,
            {instant.format("j.start_time")} AS submit_time,
            {instant.format("t.first_start")} AS start_time,
            {instant.format("j.end_time")} AS end_time,
            t.first_start - j.start_time AS queue_s,
            CASE WHEN j.end_time > 0 THEN j.end_time - t.first_start END AS run_s,
            t.gpu_pct / 100 AS gpus, t.gpu_pct AS gpus_raw, 'percent' AS gpus_raw_unit,
            t.cpu_pct / 100 AS cpus, round(t.mem_gb * 1073741824)::BIGINT AS mem_bytes,
            t.gpu_type, 1::INTEGER AS attempts,
            {PAI_STATUS.format("j.status")} AS status, j.status AS raw_status,
            'Asia/Shanghai' AS source_tz, 'hidden_epoch' AS time_basis
          FROM {_pai_table(raw, "job_table")} j LEFT JOIN t USING (job_name)
          ORDER BY submit_time, job_id
        ) TO '{out}/trace.parquet' (FORMAT parquet, COMPRESSION zstd)
        """
    )
    return con.execute(f"SELECT count(*) FROM '{out}/trace.parquet'").fetchall()[0][0]  # type: ignore[no-any-return]


def _slurm_seconds(col: str) -> str:
    """``[D-]HH:MM:SS`` (or ``MM:SS``) -> seconds, as ``sacct`` prints Elapsed."""
    return (
        f"(CASE WHEN {col} LIKE '%-%' THEN split_part({col}, '-', 1)::INTEGER * 86400 "
        "ELSE 0 END + list_reduce(list_transform(string_split("
        f"split_part({col}, '-', -1), ':'), lambda x: x::INTEGER), lambda a, b: a * 60 + b))::DOUBLE"
    )


def slurm(con: duckdb.DuckDBPyConnection, raw: Path, out: Path) -> int:
    """``sacct -X -P`` (pipe-separated) -> ``slurm.parquet``, read in Europe/Berlin."""
    files = [str(p) for p in sorted(raw.glob("*.psv"))] if raw.is_dir() else [str(raw)]
    berlin = "timezone('Europe/Berlin', strptime(nullif(nullif({0}, 'Unknown'), 'None'), '%Y-%m-%dT%H:%M:%S'))"
    end = berlin.format('"End"')
    # the allocation once there is one, else the request (a pending job)
    tres = "coalesce(nullif(AllocTRES, ''), ReqTRES)"
    gpus = f"regexp_extract({tres}, 'gres/gpu=(\\d+)', 1)"
    mem = "regexp_extract(ReqTRES, 'mem=(\\d+)([KMGT])', ['n', 'u'])"
    con.sql(
        f"""
        COPY (
          WITH s AS (
            SELECT *, {berlin.format("Submit")} AS submit_time,
              {berlin.format("Start")} AS start_time, {end} AS end_time,
              {berlin.format("Eligible")} AS eligible_time, {mem} AS m
            FROM read_csv({files}, delim = '|', header = true, all_varchar = true,
                          quote = '')
          )
          SELECT 'slurm' AS source, 'c' AS dataset, 'c' AS cluster,
            JobID AS job_id, "User" AS "user", Partition AS vc, JobName AS name,
            submit_time, start_time, end_time,
            epoch(start_time) - epoch(submit_time) AS queue_s,
            CASE WHEN end_time IS NOT NULL THEN {_slurm_seconds("Elapsed")} END AS run_s,
            coalesce(nullif({gpus}, '')::DOUBLE, 0) AS gpus,
            coalesce(nullif({gpus}, '')::DOUBLE, 0) AS gpus_raw, 'gpu' AS gpus_raw_unit,
            NCPUS::DOUBLE AS cpus,
            (m.n::BIGINT * CASE m.u WHEN 'K' THEN 1024 WHEN 'M' THEN 1048576
              WHEN 'G' THEN 1073741824 ELSE 1099511627776 END) AS mem_bytes,
            nullif(regexp_extract(AllocTRES, 'gres/gpu:([^=,]+)=', 1), '') AS gpu_type,
            NNodes::INTEGER AS nodes, 1::INTEGER AS attempts,
            CASE split_part(State, ' ', 1) WHEN 'COMPLETED' THEN 'completed'
              WHEN 'FAILED' THEN 'failed' WHEN 'CANCELLED' THEN 'cancelled'
              WHEN 'TIMEOUT' THEN 'timeout' WHEN 'NODE_FAIL' THEN 'node_fail'
              WHEN 'OUT_OF_MEMORY' THEN 'oom' WHEN 'PREEMPTED' THEN 'preempted'
              WHEN 'RUNNING' THEN 'running' WHEN 'PENDING' THEN 'pending'
              ELSE 'unknown' END AS status,
            State AS raw_status, QOS AS qos, Account AS account, eligible_time,
            CASE WHEN Timelimit NOT IN ('UNLIMITED', 'Partition_Limit', '')
              THEN {_slurm_seconds("Timelimit")} END AS time_limit_s,
            split_part(ExitCode, ':', 1)::INTEGER AS exit_code,
            split_part(ExitCode, ':', 2)::INTEGER AS exit_signal,
            'Europe/Berlin' AS source_tz, 'absolute' AS time_basis
          FROM s ORDER BY submit_time, job_id
        ) TO '{out}/slurm.parquet' (FORMAT parquet, COMPRESSION zstd)
        """
    )
    return con.execute(f"SELECT count(*) FROM '{out}/slurm.parquet'").fetchall()[0][0]  # type: ignore[no-any-return]


FAMILIES = {"helios": helios, "philly": philly, "pai2020": pai2020, "slurm": slurm}


def main(family: str, raw: Path, out: Path) -> dict[str, object]:
    """Run one family's script (with DuckDB's default threads) and time it."""
    out.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    con = duckdb.connect()
    con.sql("SET TimeZone = 'UTC'")
    rows = FAMILIES[family](con, raw, out)
    return {
        "baseline": "duckdb",
        "baseline_rows": rows,
        "baseline_s": round(time.perf_counter() - start, 3),
    }


if __name__ == "__main__":
    sys.stdout.write(json.dumps(main(sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3]))) + "\n")
