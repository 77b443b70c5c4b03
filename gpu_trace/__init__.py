"""gpu-trace: one data model for GPU-cluster traces and live GPU telemetry.

The package is organised as the data flows: ``schemas`` (the canonical tables),
``loaders`` and ``telemetry`` (raw inputs -> canonical frames), ``store`` (the one
Parquet writer and the DuckDB catalog), ``analyses``, ``replay`` and ``reports``
(consumers of the store) and ``cli`` (a thin typer skin over all of them).
"""

__version__ = "0.1.0"
