"""Export the canonical schemas as language-neutral contracts.

``python -m gpu_trace.schemas.export [DIR]`` writes ``<table>.json`` per table and
``views.sql`` into ``DIR`` (default ``schemas/``). A test regenerates them in memory and
fails when the committed files differ, so the contracts cannot drift from the code.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from gpu_trace.schemas import TABLES, Table
from gpu_trace.schemas.views import portable_views_sql

DEFAULT_DIR = Path("schemas")
VIEWS_DEFAULT_STORE = "data/store"
"""The store the committed views.sql reads when the DuckDB variable ``gpu_trace_store``
is not set: the default store, relative to the folder DuckDB runs in."""


def table_contract(table: Table) -> dict[str, object]:
    """The table's committed JSON contract (``schemas/<table>.json``): version, file
    layout, sort order and every column's type, nullability, unit and meaning, for
    readers that do not import gpu-trace.
    """
    return {
        "table": table.name,
        "schema_version": table.version,
        "description": table.description,
        "partitioning": [table.partition_by],
        "layout": f"<store>/current/{table.name}/source=<source>/<dataset>.parquet",
        "sort_by": list(table.sort_by),
        "columns": [
            {
                "name": c.name,
                "type": str(c.type),
                "nullable": c.nullable,
                "unit": c.unit,
                "description": c.description,
            }
            for c in table.columns
        ],
    }


def rendered() -> dict[str, str]:
    """File name -> exact text of every exported contract."""
    out = {
        f"{name}.json": json.dumps(table_contract(t), indent=2, ensure_ascii=False) + "\n"
        for name, t in TABLES.items()
    }
    out["views.sql"] = portable_views_sql(VIEWS_DEFAULT_STORE)
    return out


def export(directory: Path = DEFAULT_DIR) -> list[Path]:
    """Write every contract and ``views.sql`` into ``directory`` (``make schemas``
    after a schema change); the paths written.
    """
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for name, text in rendered().items():
        path = directory / name
        path.write_text(text, encoding="utf-8")
        written.append(path)
    return written


if __name__ == "__main__":  # pragma: no cover - exercised through `make schemas`
    target = Path(sys.argv[1]) if len(sys.argv) > 1 else DEFAULT_DIR
    for p in export(target):
        sys.stdout.write(f"{p}\n")
