"""Domain errors.

Every error a user can cause (bad input, missing file, bad SQL) is a
:class:`GpuTraceError`. The CLI boundary turns it into one line on stderr and exit
code 1, so users never see a traceback for their own mistakes.
"""

from __future__ import annotations

from pathlib import Path


class GpuTraceError(Exception):
    """Base class for errors that are the user's input, not a bug in gpu-trace."""


class InputError(GpuTraceError):
    """A raw input file cannot be read as the format it claims to be.

    The message names the file, the line or record, and the reason, so that the
    one-line CLI error is enough to find and fix the problem.
    """

    def __init__(self, file: str | Path, reason: str, locator: str | None = None) -> None:
        self.file = str(file)
        self.locator = locator
        self.reason = reason
        where = f"{self.file}: {locator}" if locator else self.file
        super().__init__(f"{where}: {reason}")


class SchemaMismatch(GpuTraceError):
    """A frame handed to the store does not match its canonical schema."""


class StoreError(GpuTraceError):
    """The store is missing, empty or unreadable."""


class QueryError(GpuTraceError):
    """DuckDB rejected a user's SQL."""


class DatasetError(GpuTraceError):
    """A dataset is unknown, its download failed, or its checksum does not match."""
