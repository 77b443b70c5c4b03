"""Record what ``ingest prometheus-range`` makes of every input the tests feed it, to show
that a rewrite of the loader changes no output (rows, quarantine, counts, metadata, errors).

As a pytest plugin it wraps :func:`gpu_trace.loaders.promrange.range_file` and appends
one JSON line per call (input sha256 + options -> every batch, rows and rejects sorted,
or the error) to ``$PROMRANGE_GOLDEN``::

    PROMRANGE_GOLDEN=before.jsonl python -m pytest -p bench.promrange_golden tests/test_promrange.py ...

``python -m bench.promrange_golden record OUT FILE...`` records given files directly;
``python -m bench.promrange_golden compare A B`` compares two recordings (calls present in
both) and exits 1 on any difference.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import polars as pl

from gpu_trace.loaders import promrange

_TMP = re.compile(r"/tmp/pytest-of-[^/]+/pytest-\d+/[^/\s\"]+/")
"""pytest's temporary folders, which differ between two runs (paths in error lines)."""


def _frame(df: pl.LazyFrame | pl.DataFrame | None) -> list[str]:
    if df is None:
        return []
    d = df.lazy().collect()
    rows = sorted(json.dumps(r, default=str, sort_keys=True) for r in d.iter_rows(named=True))
    if len(rows) > 10_000:  # a large input: its digest, not its rows
        return [f"{len(rows)} rows, sha256 " + hashlib.sha256("\n".join(rows).encode()).hexdigest()]
    return rows


def summarize(path: Path, kwargs: dict[str, Any], call: Callable[[], Any]) -> dict[str, Any]:
    """One call's key and outcome."""
    key = hashlib.sha256(path.read_bytes()).hexdigest() + json.dumps(
        {k: v for k, v in kwargs.items() if k != "extra"}, sort_keys=True, default=str
    )
    try:
        out = [
            {
                "table": b.table,
                "dataset": b.dataset,
                "rows_read": b.rows_read,
                "metadata": b.metadata,
                "rows": _frame(b.rows),
                "rejected": _frame(b.rejected),
            }
            for b in call()
        ]
        return {"key": key, "batches": out}
    except Exception as exc:  # the error is the outcome recorded
        return {"key": key, "error": f"{type(exc).__name__}: {exc}"}


def _record(out: str, result: dict[str, Any]) -> None:
    with Path(out).open("a") as fh:
        fh.write(json.dumps(result) + "\n")


def pytest_configure(config: object) -> None:
    """Wrap range_file for the test session (only with $PROMRANGE_GOLDEN set)."""
    out = os.environ.get("PROMRANGE_GOLDEN")
    if not out:
        return
    real = promrange.range_file

    def wrapped(path: Path, dataset: str, **kwargs: Any) -> Any:
        result: list[Any] = []

        def call() -> Any:
            result.append(real(path, dataset, **kwargs))
            return result[0]

        _record(out, summarize(path, {"dataset": dataset, **kwargs}, call))
        if not result:
            return real(path, dataset, **kwargs)  # raises the same error again
        return result[0]

    promrange.range_file = wrapped  # type: ignore[assignment]


def compare(a: str, b: str) -> int:
    """Differences between two recordings, over the calls both hold."""

    def load(p: str) -> dict[str, str]:
        return {
            (r := json.loads(line))["key"]: _TMP.sub("<tmp>/", json.dumps(r, sort_keys=True))
            for line in Path(p).read_text().splitlines()
        }

    left, right = load(a), load(b)
    common = sorted(set(left) & set(right))
    bad = [k for k in common if left[k] != right[k]]
    for k in bad:
        sys.stdout.write(f"DIFF {k[:80]}\n  before {left[k][:1500]}\n  after  {right[k][:1500]}\n")
    sys.stdout.write(
        f"{len(common)} calls in both ({len(left)} / {len(right)} recorded), {len(bad)} differ\n"
    )
    return 1 if bad else 0


if __name__ == "__main__":
    if sys.argv[1] == "compare":
        sys.exit(compare(sys.argv[2], sys.argv[3]))
    for f in sys.argv[3:]:
        p = Path(f)
        _record(
            sys.argv[2],
            summarize(p, {"dataset": "d"}, lambda p=p: promrange.range_file(p, "d")),
        )
