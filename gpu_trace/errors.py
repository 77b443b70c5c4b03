"""Domain errors.

Every error a user can cause (bad input, missing file, bad SQL) is a
:class:`GpuTraceError`. The CLI boundary turns it into one line on stderr and exit
code 1, so users never see a traceback for their own mistakes.
"""

from __future__ import annotations

from pathlib import Path

MESSAGE_LIMIT = 300
"""Most characters of input text (a reason, a locator, a whole message) that a one-line
error or warning echoes; longer text is cut with :func:`clip`. Quarantine keeps more of
a rejected line (``textfile.RAW_LIMIT``), cut the same way."""


def clip(text: str, limit: int = MESSAGE_LIMIT) -> str:
    """``text`` cut to ``limit`` characters, with an ellipsis and the original length, so
    a 10 MB line in a bad file cannot flood the terminal or the quarantine table.
    """
    if len(text) <= limit:
        return text
    return f"{text[:limit]}… [{len(text)} characters]"


class GpuTraceError(Exception):
    """Base class for errors that are the user's input, not a bug in gpu-trace."""


class InputError(GpuTraceError):
    """A raw input file cannot be read as the format it claims to be.

    The message names the file, the line or record, and the reason, so that the
    one-line CLI error is enough to find and fix the problem.
    """

    def __init__(self, file: str | Path, reason: str, locator: str | None = None) -> None:
        self.file = clip(str(file))
        self.locator = clip(locator) if locator is not None else None
        self.reason = clip(reason)
        where = f"{self.file}: {self.locator}" if self.locator else self.file
        super().__init__(f"{where}: {self.reason}")


class InputWarning(UserWarning):
    """Input that loads, but with a choice the user should know about (for example
    relative times because the format prints none and none were given). The CLI shows
    it as one ``warning:`` line on stderr; the choice is also recorded in the store.
    """


class SchemaMismatch(GpuTraceError):
    """A frame handed to the store does not match its canonical schema."""


class StoreError(GpuTraceError):
    """The store is missing, empty or unreadable."""


class QueryError(GpuTraceError):
    """DuckDB rejected a user's SQL."""


class DatasetError(GpuTraceError):
    """A dataset is unknown, its download failed, or its checksum does not match."""


class UsageError(GpuTraceError):
    """A bad name or value on the command line or in a config (an unknown policy, a
    ``--by`` key, ``--load 0``): the CLI exits 2, as for click's own usage errors.
    """
