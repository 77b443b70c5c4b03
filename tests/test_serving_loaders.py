"""Serving traces: ``gpu-trace ingest azure-llm`` and ``ingest mooncake`` -> ``requests``,
``request_blocks``, ``quarantine``, ``ingests``.

Formats are the upstream READMEs' (copied in data/samples):

- Azure (``azure-llm/README-upstream-2023.md``, "Schema"; the 2024 week's README the same):
  ``TIMESTAMP,ContextTokens,GeneratedTokens``, one row per request; the released files
  write ``2023-11-16 18:15:46.6805900`` (7 fractional digits) and end lines with CRLF.
- Mooncake (``mooncake/README-upstream.md``, "Trace Format"): JSON lines ``timestamp``
  (relative arrival, ms), ``input_length``, ``output_length``, ``hash_ids`` (remapped
  prefix block hashes, 512 tokens per block); its two example requests "share the first
  12 hash IDs, so they can share prefix caching for the first 12 * 512 = 6144 tokens".
  Its table: conversation 12,031 requests, average input 12,035 and output 343 tokens;
  synthetic 3,993 / 15,325 / 149.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from gpu_trace.datasets import get
from tests.serving_common import SAMPLES, rows
from tests.serving_common import ingest_cli as ingest

# The README's two example requests, as one JSON object per line.
README_1 = (
    '{"timestamp": 27482, "input_length": 6955, "output_length": 52, "hash_ids": '
    "[46, 47, 48, 49, 50, 51, 52, 53, 54, 55, 56, 57, 2353, 2354]}"
)
README_2 = (
    '{"timestamp": 30535, "input_length": 6472, "output_length": 26, "hash_ids": '
    "[46, 47, 48, 49, 50, 51, 52, 53, 54, 55, 56, 57, 2366]}"
)


# --------------------------------------------------------------------------- azure-llm

AZURE = [
    "TIMESTAMP,ContextTokens,GeneratedTokens",
    "2023-11-16 18:15:46.6805900,374,44",  # line 2: the conv file's first row
    "2023-11-16 18:15:50.9951690,396,109",  # line 3: its second
    "2023-11-16 18:16:00.5000000,-5,10",  # line 4
    "not-a-time,10,10",  # line 5
    "2023-11-16 18:16:01.0000000,12.0,3",  # line 6
    "2023-11-16 18:16:02.0000000,7",  # line 7
    "",  # line 8
    "2023-11-16 18:16:03,8,0",  # line 9: no fraction, no output: a valid request
]


def azure_file(
    tmp_path: Path, lines: list[str], name: str = "AzureLLMInferenceTrace_conv.csv"
) -> Path:
    path = tmp_path / name
    path.write_bytes(("\r\n".join(lines) + "\r\n").encode())  # CRLF, as the released files
    return path


def test_azure_rows_time_and_quarantine_by_hand(tmp_path: Path) -> None:
    store = tmp_path / "store"
    code, err = ingest("azure-llm", azure_file(tmp_path, AZURE), "--store", store)
    assert code == 0, err
    assert "read 8 = written 3 + quarantined 5" in err
    got = rows(
        store,
        "select dataset, service, request_id, line, arrival_time, arrival_raw, arrival_raw_unit,"
        " input_tokens, output_tokens, status, source_tz, time_basis, file"
        " from requests order by request_id",
    )
    utc = UTC
    assert got == [
        ("conv", "conversation", 1, 2, datetime(2023, 11, 16, 18, 15, 46, 680590, utc),
         "2023-11-16 18:15:46.6805900", "local_datetime", 374, 44, "unknown", "UTC", "absolute",
         "AzureLLMInferenceTrace_conv.csv"),
        ("conv", "conversation", 2, 3, datetime(2023, 11, 16, 18, 15, 50, 995169, utc),
         "2023-11-16 18:15:50.9951690", "local_datetime", 396, 109, "unknown", "UTC", "absolute",
         "AzureLLMInferenceTrace_conv.csv"),
        ("conv", "conversation", 8, 9, datetime(2023, 11, 16, 18, 16, 3, tzinfo=utc),
         "2023-11-16 18:16:03", "local_datetime", 8, 0, "unknown", "UTC", "absolute",
         "AzureLLMInferenceTrace_conv.csv"),
    ]  # fmt: skip
    q = rows(store, "select locator, reason, raw from quarantine order by locator")
    assert q == [
        ("line 4", "ContextTokens -5 is negative", "2023-11-16 18:16:00.5000000,-5,10"),
        ("line 5", "TIMESTAMP 'not-a-time' is not a time (YYYY-MM-DD HH:MM:SS[.fraction][+HH:MM])",
         "not-a-time,10,10"),
        ("line 6", "ContextTokens '12.0' is not a whole number", "2023-11-16 18:16:01.0000000,12.0,3"),
        ("line 7", "expected at least 3 fields, found 2", "2023-11-16 18:16:02.0000000,7"),
        ("line 8", "empty line", ""),
    ]  # fmt: skip
    sha = rows(store, "select distinct file_sha256 from requests")
    assert sha == rows(store, "select file_sha256 from ingests where \"table\" = 'requests'")


def test_azure_zone_is_recorded_and_a_dst_gap_quarantined(tmp_path: Path) -> None:
    # America/Los_Angeles: 2023-11-16 is PST (UTC-8); 2023-03-12 02:30 does not exist.
    lines = [AZURE[0], "2023-11-16 18:15:46.6805900,374,44", "2023-03-12 02:30:00.0000000,1,1"]
    store = tmp_path / "store"
    code, err = ingest(
        "azure-llm", azure_file(tmp_path, lines), "--tz", "America/Los_Angeles", "--store", store
    )
    assert code == 0, err
    assert rows(store, "select arrival_time, source_tz from requests") == [
        (datetime(2023, 11, 17, 2, 15, 46, 680590, UTC), "America/Los_Angeles")
    ]
    assert rows(store, "select locator, reason from quarantine") == [
        ("line 3", "TIMESTAMP 2023-03-12 02:30:00.0000000 does not exist in America/Los_Angeles")
    ]


def test_azure_times_with_an_offset_are_that_instant(tmp_path: Path) -> None:
    lines = [
        AZURE[0],
        "2024-05-10 00:00:00.009930+00:00,100,10",
        "2024-05-10 01:00:01+01:00,200,20",
        "2024-05-10 00:00:02Z,300,30",
        "2024-05-10 00:00:03+1:00,1,1",
    ]
    store = tmp_path / "store"
    code, err = ingest(
        "azure-llm", azure_file(tmp_path, lines), "--tz", "Asia/Tokyo", "--store", store
    )
    assert code == 0, err
    assert rows(store, "select arrival_time, arrival_raw from requests order by request_id") == [
        (datetime(2024, 5, 10, 0, 0, 0, 9930, UTC), "2024-05-10 00:00:00.009930+00:00"),
        (datetime(2024, 5, 10, 0, 0, 1, tzinfo=UTC), "2024-05-10 01:00:01+01:00"),
        (datetime(2024, 5, 10, 0, 0, 2, tzinfo=UTC), "2024-05-10 00:00:02Z"),
    ]
    assert rows(store, "select locator from quarantine") == [("line 5",)]


def test_azure_file_without_the_columns_is_one_error_line(tmp_path: Path) -> None:
    bad = azure_file(tmp_path, ["time,tokens", "2023-11-16 18:15:46,3"])
    code, err = ingest("azure-llm", bad, "--store", tmp_path / "store")
    assert code == 1
    assert err.strip().count("\n") == 0 and err.startswith("error:")
    assert bad.name in err and "TIMESTAMP" in err


def test_azure_dataset_and_service_from_the_2024_week_names(tmp_path: Path) -> None:
    # AzureLLMInferenceDataset2024.md: AzureLLMInferenceTrace_{code,conv}_1week.csv
    folder = tmp_path / "week"
    folder.mkdir()
    azure_file(folder, AZURE[:2], "AzureLLMInferenceTrace_code_1week.csv")
    azure_file(folder, AZURE[:3], "AzureLLMInferenceTrace_conv_1week.csv")
    store = tmp_path / "store"
    code, err = ingest("azure-llm", folder, "--store", store)
    assert code == 0, err
    assert rows(
        store, "select dataset, service, count(*) from requests group by all order by 1"
    ) == [
        ("code_1week", "code", 1),
        ("conv_1week", "conversation", 2),
    ]


# --------------------------------------------------------------------------- mooncake

MOONCAKE = [
    README_1,  # line 1
    README_2,  # line 2
    '{"timestamp": 31000, "input_length": 10, "output_length": 2, "hash_ids": [1, 2',  # 3
    '{"timestamp": 31500, "input_length": -1, "output_length": 2, "hash_ids": [1]}',  # 4
    '{"timestamp": 32000.5, "input_length": 1, "output_length": 2, "hash_ids": [1]}',  # 5
    "[1, 2, 3]",  # 6
    "",  # 7
    '{"timestamp": 33000, "input_length": 1, "output_length": 1, "hash_ids": 5}',  # 8
    '{"timestamp": 34000, "output_length": 1, "hash_ids": []}',  # 9
    '{"timestamp": {"ms": 1}, "input_length": 1, "output_length": 1, "hash_ids": []}',  # 10
]


def mooncake_file(tmp_path: Path, lines: list[str], name: str = "conversation_trace.jsonl") -> Path:
    path = tmp_path / name
    path.write_text("\n".join(lines) + "\n")
    return path


def test_mooncake_rows_blocks_and_quarantine_by_hand(tmp_path: Path) -> None:
    store = tmp_path / "store"
    code, err = ingest("mooncake", mooncake_file(tmp_path, MOONCAKE), "--store", store)
    assert code == 0, err
    lines = {
        (t, int(r), int(w), int(q))
        for t, r, w, q in rows(
            store, 'select "table", rows_read, rows_written, rows_quarantined from ingests'
        )
    }
    assert lines == {("requests", 10, 2, 8), ("request_blocks", 27, 27, 0)}
    start = datetime(1970, 1, 1, tzinfo=UTC)
    assert rows(
        store,
        "select dataset, service, request_id, line, arrival_time, arrival_raw, arrival_raw_unit,"
        " input_tokens, output_tokens, prefix_blocks, source_tz, time_basis from requests"
        " order by request_id",
    ) == [
        ("conversation", "conversation", 1, 1, start + timedelta(milliseconds=27482), "27482",
         "ms_since_start", 6955, 52, 14, None, "relative"),
        ("conversation", "conversation", 2, 2, start + timedelta(milliseconds=30535), "30535",
         "ms_since_start", 6472, 26, 13, None, "relative"),
    ]  # fmt: skip
    # "share the first 12 hash IDs ... the first 12 * 512 = 6144 tokens"
    shared = rows(
        store,
        "select count(*), sum(a.block_tokens) from request_blocks a join request_blocks b"
        " on a.position = b.position and a.block_hash = b.block_hash"
        " where a.request_id = 1 and b.request_id = 2",
    )
    assert shared == [(12, 6144)]
    assert rows(
        store,
        "select position, block_hash from request_blocks where request_id = 2 and position >= 11",
    ) == [(11, 57), (12, 2366)]
    q = dict(rows(store, "select locator, reason from quarantine"))
    assert q.pop("line 3").startswith("malformed JSON: ")
    assert q == {
        "line 4": "input_length -1 is negative",
        "line 5": "timestamp '32000.5' is not a whole number",
        "line 6": "not a JSON object",
        "line 7": "empty line",
        "line 8": "hash_ids is missing or not an array",
        "line 9": "input_length is missing",
        "line 10": "not a request object (a value has the wrong JSON type)",
    }


def test_mooncake_finds_scattered_bad_lines_among_many(tmp_path: Path) -> None:
    """The halving search isolates exactly the malformed lines of a long file."""
    good = json.dumps({"timestamp": 5, "input_length": 600, "output_length": 1, "hash_ids": [7, 8]})
    lines = [good] * 3000
    for at in (0, 1234, 2999):
        lines[at] = '{"timestamp": 5, "input_length": 600,'
    store = tmp_path / "store"
    code, err = ingest("mooncake", mooncake_file(tmp_path, lines), "--store", store)
    assert code == 0, err
    assert rows(
        store,
        "select rows_read, rows_written, rows_quarantined from ingests where \"table\" = 'requests'",
    ) == [(3000, 2997, 3)]
    assert sorted(r[0] for r in rows(store, "select locator from quarantine")) == sorted(
        ["line 1", "line 1235", "line 3000"]
    )
    assert rows(store, "select count(*) from request_blocks") == [(2997 * 2,)]


def test_mooncake_overlong_line_is_one_error_line(tmp_path: Path) -> None:
    path = mooncake_file(tmp_path, [README_1, '{"hash_ids": [' + "1, " * 400_000 + "1]}"])
    code, err = ingest("mooncake", path, "--store", tmp_path / "store")
    assert code == 1
    assert err.startswith("error:") and err.strip().count("\n") == 0 and "line 2" in err


# --------------------------------------------------------------------------- real files


def test_real_files_match_the_upstream_tables(tmp_path: Path) -> None:
    store = tmp_path / "store"
    assert ingest("mooncake", SAMPLES / "mooncake", "--store", store)[0] == 0
    assert ingest("azure-llm", SAMPLES / "azure-llm", "--store", store)[0] == 0
    got = rows(
        store,
        "select dataset, count(*), round(avg(input_tokens)), round(avg(output_tokens))"
        " from requests where source = 'mooncake' group by all order by 1",
    )
    # Mooncake README, "Workloads" (averages rounded to whole tokens, as the table prints them)
    assert got == [("conversation", 12031, 12035, 343), ("synthetic", 3993, 15325, 149)]
    # PROVENANCE of the shared copies / the Splitwise trace: 8,819 and 19,366 requests
    assert rows(
        store,
        "select dataset, count(*) from requests where source = 'azure-llm' group by 1 order by 1",
    ) == [("code", 8819), ("conv", 19366)]
    assert rows(store, "select count(*) from quarantine") == [(0,)]
    # every block of the README's 512-token hashing: ceil(input / 512) per request
    assert rows(
        store,
        "select count(*) from requests where source = 'mooncake'"
        " and prefix_blocks <> (input_tokens + 511) // 512",
    ) == [(0,)]
    # every block belongs to a request of the same source and dataset
    assert rows(
        store,
        "select count(*) from request_blocks b anti join requests r"
        " using (source, dataset, request_id)",
    ) == [(0,)]
    blocks = rows(store, "select count(*) from request_blocks")[0][0]
    listed = sum(
        len(json.loads(line)["hash_ids"])
        for f in ("conversation_trace.jsonl", "synthetic_trace.jsonl")
        for line in (SAMPLES / "mooncake" / f).read_text().splitlines()
    )
    assert blocks == listed


def test_registry_pins_bundled_bytes_and_names_the_2024_week() -> None:
    import hashlib

    azure = get("azure-llm")
    for name in ("AzureLLMInferenceTrace_code.csv", "AzureLLMInferenceTrace_conv.csv"):
        data = (SAMPLES / "azure-llm" / name).read_bytes()
        f = azure.file(name)
        assert (f.size, f.sha256) == (len(data), hashlib.sha256(data).hexdigest())
    # AzureLLMInferenceDataset2024.md, "Downloading": no checksum published, none invented
    week = azure.file("AzureLLMInferenceTrace_code_1week.csv")
    assert week.urls == (
        "https://azurepublicdatasettraces.blob.core.windows.net/azurellminfererencetrace/"
        "AzureLLMInferenceTrace_code_1week.csv",
    )
    assert week.sha256 is None and week.size is None
    moon = get("mooncake")
    data = (SAMPLES / "mooncake" / "conversation_trace.jsonl").read_bytes()
    assert moon.file("conversation_trace.jsonl").sha256 == hashlib.sha256(data).hexdigest()


@pytest.mark.parametrize("loader", ["azure-llm", "mooncake"])
def test_missing_path_is_one_error_line(tmp_path: Path, loader: str) -> None:
    code, err = ingest(loader, tmp_path / "nope", "--store", tmp_path / "store")
    assert code == 1 and err.startswith("error:") and err.strip().count("\n") == 0
