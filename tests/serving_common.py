"""Helpers the serving test files share: the bundled samples, the real GenTD26 file (not
bundled: its tests skip without it), the CLI runner and the store query."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from gpu_trace.cli import app
from gpu_trace.store.catalog import connect

SAMPLES = Path(__file__).resolve().parents[1] / "data" / "samples"
REAL_GENTD26 = Path("/work/shared/traces/inference/alibaba-genai-2026/lora_request_trace.csv")


def cli(*args: str | Path) -> tuple[int, str, str]:
    """``gpu-trace ARGS``: exit code, stdout, stderr (never a traceback)."""
    result = CliRunner().invoke(app, [str(a) for a in args])
    assert "Traceback" not in result.output
    return result.exit_code, result.stdout, result.stderr


def ingest_cli(*args: str | Path) -> tuple[int, str]:
    """``gpu-trace ingest ARGS``: exit code and stderr."""
    code, _, err = cli("ingest", *args)
    return code, err


def ingest_ok(store: Path, loader: str, path: Path) -> None:
    """Ingest ``path`` with ``loader`` into ``store``; it must succeed."""
    code, _, err = cli("-q", "ingest", loader, path, "--store", store)
    assert code == 0, err


def rows(store: Path, sql: str) -> list[tuple[object, ...]]:
    """The rows of ``sql`` on the store's views."""
    with connect(store) as con:
        return con.sql(sql).fetchall()
