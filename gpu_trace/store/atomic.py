"""One file written whole or not at all, the way the store publishes its own files: a
temporary file in the target's folder (named ``.NAME.XXXX.tmp``, the pattern the store's
clean-up already treats as a leftover), fsynced unless ``GPU_TRACE_FSYNC=0``
(:data:`gpu_trace.store.generations.FSYNC_ENV`), then renamed over the target. A reader
never sees half a file and a killed writer leaves the old file (or none) in place.

Streaming writers (the replay event trace, which can hold millions of events; `telemetry
pull`'s samples) write through the open handle instead of building the whole file first.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any, BinaryIO, TextIO, cast

from gpu_trace.errors import GpuTraceError
from gpu_trace.store.generations import FSYNC_ENV


def check_target(path: Path, flag: str) -> None:
    """Refuse an output file ``flag PATH`` whose folder does not exist (a typo in the
    path must not create folders) or that is a folder: checked before the work runs,
    so a long command does not fail at its last step.
    """
    if path.is_dir():
        msg = f"{flag} {path} is a folder; give a file name"
        raise GpuTraceError(msg)
    if not path.parent.is_dir():
        msg = f"{flag} {path}: no folder {path.parent}; create it first"
        raise GpuTraceError(msg)


@contextlib.contextmanager
def _replacing(path: Path, mode: str) -> Iterator[IO[Any]]:
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        opened: IO[Any] = (
            os.fdopen(fd, mode)
            if "b" in mode
            else os.fdopen(fd, mode, encoding="utf-8", newline="\n")
        )
        with opened as fh:
            yield fh
            fh.flush()
            if os.environ.get(FSYNC_ENV) != "0":
                os.fsync(fh.fileno())
        umask = os.umask(0)
        os.umask(umask)
        Path(tmp).chmod(0o666 & ~umask)  # mkstemp's 0600 is for the temporary name only
        Path(tmp).replace(path)
    except BaseException:
        with contextlib.suppress(OSError):
            Path(tmp).unlink()
        raise


def atomic_text(path: Path) -> contextlib.AbstractContextManager[TextIO]:
    """A UTF-8 text handle whose content replaces ``path`` when the block ends without
    an exception (the temporary file is removed otherwise). The folder must exist.
    """
    return cast("contextlib.AbstractContextManager[TextIO]", _replacing(path, "w"))


def atomic_bytes(path: Path) -> contextlib.AbstractContextManager[BinaryIO]:
    """:func:`atomic_text` for bytes."""
    return cast("contextlib.AbstractContextManager[BinaryIO]", _replacing(path, "wb"))
