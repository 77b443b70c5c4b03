"""``gpu-trace schema``: the canonical tables and their columns, for analysts."""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from gpu_trace.cli._boundary import domain_errors
from gpu_trace.values import choose


@domain_errors
def schema(
    table: Annotated[str | None, typer.Argument(help="Table to describe; all if omitted.")] = None,
) -> None:
    """List the canonical tables, or one table's columns with type, unit and meaning."""
    from gpu_trace.schemas import TABLES  # pyarrow: not needed to build the command line

    if table is None:
        for t in TABLES.values():
            sys.stdout.write(f"{t.name:<14} v{t.version}  {t.description}\n")
        return
    choose("table", table, TABLES)
    t = TABLES[table]
    sys.stdout.write(f"{t.name} (schema v{t.version}): {t.description}\n")
    for c in t.columns:
        null = "" if c.nullable else " not null"
        unit = f" [{c.unit}]" if c.unit else ""
        sys.stdout.write(f"  {c.name:<18} {c.type!s:<22}{null}{unit}  {c.description}\n")
