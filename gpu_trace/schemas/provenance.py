"""Bookkeeping tables: ``quarantine`` (every input row we could not normalize, with the
reason) and ``ingests`` (what each ingest read, wrote and rejected, so counts always
reconcile: rows_read = rows_written + rows_quarantined).
"""

from __future__ import annotations

import pyarrow as pa

from gpu_trace.schemas.model import Column, Table, source_columns

QUARANTINE = Table(
    name="quarantine",
    version=1,
    description="Input rows that could not be normalized, with the reason and the raw text.",
    sort_by=("file", "table", "locator"),
    columns=(
        *source_columns(),
        Column("table", pa.string(), "Canonical table the row was meant for.", nullable=False),
        Column("file", pa.string(), "Input file name (base name).", nullable=False),
        Column(
            "locator", pa.string(), "Where in the file: `line N` or `record N`.", nullable=False
        ),
        Column("reason", pa.string(), "Why the row was rejected.", nullable=False),
        Column("raw", pa.string(), "The raw text of the row (truncated to 4 KiB)."),
    ),
)

INGESTS = Table(
    name="ingests",
    version=2,
    description=(
        "One row per (input file, canonical table) an ingest produced: checksums and the "
        "reconciliation of rows read = written + quarantined + merged."
    ),
    sort_by=("file", "table"),
    columns=(
        *source_columns(),
        Column("table", pa.string(), "Canonical table written.", nullable=False),
        Column("file", pa.string(), "Input file name (base name).", nullable=False),
        Column("file_sha256", pa.string(), "SHA-256 of the input file."),
        Column("file_bytes", pa.int64(), "Size of the input file.", unit="bytes"),
        Column(
            "rows_read", pa.int64(), "Records read from the file for this table.", nullable=False
        ),
        Column("rows_written", pa.int64(), "Rows written to the table.", nullable=False),
        Column("rows_quarantined", pa.int64(), "Records sent to quarantine.", nullable=False),
        Column(
            "rows_merged",
            pa.int64(),
            "Records folded into a row for the same key (the same job in an overlapping "
            "export, in this ingest or already in the store); 0 where nothing merges.",
        ),
        Column(
            "generator",
            pa.string(),
            "JSON manifest of the program that made the input, when it was not a real "
            "trace (gpu-trace synth: family, seed, jobs, version); null for real data.",
        ),
        Column("loader", pa.string(), "Loader module that produced the rows.", nullable=False),
        Column("gpu_trace_version", pa.string(), "gpu-trace version.", nullable=False),
    ),
)
