"""Serving tables: ``requests`` (one row per inference request) and ``request_blocks``
(the prefix-cache block hashes of a request, one row per block).

A request is what a serving system answers: an LLM completion (Azure LLM inference,
Mooncake, BurstGPT) or a diffusion image generation (Alibaba GenTD26). The columns are
the union of what the public serving traces publish; a column a trace does not publish
is null, never guessed.

Prefix hashes are long form, as ``gpu_samples`` and ``usage`` are, not a list column:
the hit-rate and reuse analyses count, join and group blocks by hash across requests
(SQL ``GROUP BY block_hash`` or a polars join), which a list would make every reader
explode first; a request's blocks stay in order through ``position``, and the table
sorts by (request, position) so the blocks of one request are adjacent in the file.
"""

from __future__ import annotations

import pyarrow as pa

from gpu_trace.schemas.jobs import TIME_BASES
from gpu_trace.schemas.model import TS_UTC, Column, Table, source_columns

REQUEST_STATUSES = ("completed", "failed", "unknown")
"""Canonical request status; the source's own value, if it has one, is in
``raw_status``. ``unknown`` where the trace does not say (Azure LLM and Mooncake publish
the requests served, without an outcome)."""

LATENCY_KINDS = ("end_to_end", "execution")
"""What ``latency_s`` measures.

- ``end_to_end``: from submission to the complete response, all tokens (BurstGPT
  ``Elapsed time``; not the time to first token).
- ``execution``: the time the model ran the request (GenTD26 ``exec_time_seconds``).
"""


def _lineage(locator: str) -> tuple[Column, ...]:
    return (
        Column(
            "file",
            pa.string(),
            "Input file name (base name) the row was read from.",
            nullable=False,
        ),
        Column(
            "line",
            pa.int64(),
            f"Record locator: {locator} (as quarantine's `line N`).",
            unit="id",
            nullable=False,
        ),
        Column(
            "file_sha256",
            pa.string(),
            "SHA-256 of the input file; joins the `ingests` line of the ingest that wrote "
            "the row (ingests.file_sha256).",
            nullable=False,
        ),
    )


REQUESTS = Table(
    name="requests",
    version=1,
    description=(
        "One row per inference request of a serving trace (LLM completions, diffusion "
        "image generations), normalized across traces."
    ),
    sort_by=("arrival_time", "request_id"),
    columns=(
        *source_columns(),
        Column(
            "request_id",
            pa.int64(),
            "The request's key within its dataset: its 1-based record number in the input "
            "file (header excluded), since no public serving trace publishes an id. Joins "
            "request_blocks.request_id.",
            unit="id",
            nullable=False,
        ),
        Column(
            "service",
            pa.string(),
            "Serving workload as the source names it (Azure `code` / `conversation`, "
            "Mooncake `conversation` / `toolagent` / `synthetic`, BurstGPT `Log Type`, "
            "GenTD26 `predict_type`).",
        ),
        Column(
            "model",
            pa.string(),
            "Model served, as the source writes it (BurstGPT `ChatGPT` / `GPT-4`, GenTD26 "
            "anonymized `checkpoint_model_version_id`); null where unpublished.",
        ),
        Column(
            "user",
            pa.string(),
            "User / group the request came from (GenTD26 anonymized `groupId`).",
        ),
        Column(
            "session_id",
            pa.string(),
            "Conversation / session the request belongs to (BurstGPT `Session ID`); null "
            "where the trace has none.",
        ),
        Column(
            "arrival_time",
            TS_UTC,
            "When the request arrived (UTC). Under time_basis `relative` it is "
            "1970-01-01T00:00:00Z + the offset from the trace's start: differences exact, "
            "dates meaningless.",
            nullable=False,
        ),
        Column(
            "arrival_raw",
            pa.string(),
            "The arrival value exactly as the file writes it (Azure `2023-11-16 "
            "18:17:03.9799600`: 100 ns digits the microsecond arrival_time cuts; Mooncake "
            "`27482`, ms).",
            nullable=False,
        ),
        Column(
            "arrival_raw_unit",
            pa.string(),
            "How to read arrival_raw: `local_datetime` (Azure: a naive local time in source_tz, or "
            "a time with its UTC offset), "
            "`ms_since_start` (Mooncake: milliseconds since the trace's start), "
            "`s_since_start` (BurstGPT: seconds from 0:00:00 of the first day), "
            "`shifted_datetime` (GenTD26: a datetime moved by a secret offset).",
            nullable=False,
        ),
        Column(
            "input_tokens",
            pa.int64(),
            "Prompt (context) tokens: Azure ContextTokens, Mooncake input_length, BurstGPT "
            "Request tokens.",
            unit="tokens",
        ),
        Column(
            "output_tokens",
            pa.int64(),
            "Generated tokens: Azure GeneratedTokens, Mooncake output_length, BurstGPT "
            "Response tokens (0 for a failed request).",
            unit="tokens",
        ),
        Column(
            "prompt_chars",
            pa.int64(),
            "Prompt length in characters, for traces that count characters, not tokens "
            "(GenTD26 prompt_length).",
            unit="chars",
        ),
        Column(
            "negative_prompt_chars",
            pa.int64(),
            "Negative prompt length in characters (GenTD26 negative_prompt_length; null "
            "when empty).",
            unit="chars",
        ),
        Column(
            "prefix_blocks",
            pa.int32(),
            "Prefix-cache blocks listed for the request (Mooncake: len(hash_ids)); its "
            "rows in request_blocks. Null where the trace has no block hashes.",
            unit="blocks",
        ),
        Column(
            "status",
            pa.string(),
            "Canonical outcome: " + ", ".join(REQUEST_STATUSES) + ".",
            nullable=False,
        ),
        Column("raw_status", pa.string(), "The source's own status value, unchanged."),
        Column(
            "latency_s",
            pa.float64(),
            "Observed latency where the trace has one, of the kind in latency_kind.",
            unit="s",
        ),
        Column(
            "latency_kind",
            pa.string(),
            "What latency_s measures: " + ", ".join(LATENCY_KINDS) + "; null without one.",
        ),
        Column(
            "images",
            pa.int32(),
            "Images generated per request (diffusion: GenTD26 num_images_per_prompt).",
            unit="images",
        ),
        Column(
            "steps",
            pa.int32(),
            "Diffusion inference steps (GenTD26 num_inference_steps).",
            unit="steps",
        ),
        Column(
            "adapters",
            pa.int32(),
            "LoRA adapters applied (GenTD26 num_lora; 0 = base model only).",
            unit="adapters",
        ),
        Column(
            "adapter_ids",
            pa.string(),
            "Adapter (LoRA) ids, `|`-joined, where the trace names them.",
        ),
        *_lineage("the physical line of the request in `file` (1-based; header is line 1)"),
        Column(
            "source_tz",
            pa.string(),
            "IANA zone the source's local times were read in (null when times are relative).",
        ),
        Column(
            "time_basis",
            pa.string(),
            "How arrival times relate to real time: " + ", ".join(TIME_BASES) + ".",
            nullable=False,
        ),
    ),
)

REQUEST_BLOCKS = Table(
    name="request_blocks",
    version=1,
    description=(
        "One row per prefix-cache block of a request, in prompt order: equal block_hash "
        "values within a dataset are the same prefix KV-cache block (Mooncake hash_ids)."
    ),
    sort_by=("request_id", "position"),
    columns=(
        *source_columns(),
        Column(
            "request_id",
            pa.int64(),
            "The request (requests.request_id of the same source and dataset).",
            unit="id",
            nullable=False,
        ),
        Column(
            "position",
            pa.int32(),
            "0-based index of the block in the request's prompt: it covers tokens "
            "[position x block_tokens, (position + 1) x block_tokens).",
            nullable=False,
        ),
        Column(
            "block_hash",
            pa.int64(),
            "The block's hash id as the source writes it (Mooncake: remapped, so only "
            "equality within one dataset means anything).",
            unit="id",
            nullable=False,
        ),
        Column(
            "block_tokens",
            pa.int32(),
            "Tokens per block of the source's hashing (Mooncake: 512); the last block of a "
            "prompt may hold fewer (input_tokens - position x block_tokens).",
            unit="tokens",
            nullable=False,
        ),
    ),
)
