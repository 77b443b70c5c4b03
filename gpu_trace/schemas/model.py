"""The building blocks of a canonical table: a column with its meaning and unit, and a
versioned table made of columns.

Columns are declared once, here in code, as pyarrow fields whose metadata carries the
description and unit. Everything else (the JSON contracts in ``schemas/``, the DuckDB
views, the writer's validation, the README glossary) is derived from these objects.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pyarrow as pa

TS_UTC = pa.timestamp("us", tz="UTC")
"""Every instant in the model: microseconds, UTC."""


@dataclass(frozen=True)
class Column:
    """One canonical column: name, Arrow type, meaning, unit and nullability."""

    name: str
    type: pa.DataType
    description: str
    unit: str | None = None
    nullable: bool = True

    def to_field(self) -> pa.Field:
        """The column as an Arrow field, description and unit in its metadata (so a
        Parquet file documents itself).
        """
        meta = {b"description": self.description.encode()}
        if self.unit:
            meta[b"unit"] = self.unit.encode()
        return pa.field(self.name, self.type, nullable=self.nullable, metadata=meta)


@dataclass(frozen=True)
class Table:
    """A canonical table: its columns, a schema version bumped on every incompatible
    change, and the column the store partitions by (always ``source``).
    """

    name: str
    version: int
    description: str
    columns: tuple[Column, ...]
    partition_by: str = "source"
    sort_by: tuple[str, ...] = field(default_factory=tuple)

    @property
    def schema(self) -> pa.Schema:
        """The table's Arrow schema, tagged with the table name and schema version
        (how the store tells a file written under an older schema).
        """
        return pa.schema(
            [c.to_field() for c in self.columns],
            metadata={
                b"gpu_trace.table": self.name.encode(),
                b"gpu_trace.schema_version": str(self.version).encode(),
            },
        )

    @property
    def column_names(self) -> list[str]:
        """The column names in canonical order."""
        return [c.name for c in self.columns]

    def column(self, name: str) -> Column:
        """The column called ``name`` (KeyError if the table has none)."""
        for c in self.columns:
            if c.name == name:
                return c
        raise KeyError(name)


def source_columns() -> tuple[Column, ...]:
    """The provenance columns every table starts with."""
    return (
        Column(
            "source",
            pa.string(),
            "Trace family or telemetry origin: philly, helios, pai2020, openb, nvml, dcgm, ...",
            nullable=False,
        ),
        Column(
            "dataset",
            pa.string(),
            "Which input within the source (e.g. openb pod-list variant `default`, Helios "
            "cluster `venus`, a telemetry file stem). Re-ingesting a dataset replaces it.",
            nullable=False,
        ),
        Column("cluster", pa.string(), "Cluster name within the source (e.g. venus, philly)."),
    )
