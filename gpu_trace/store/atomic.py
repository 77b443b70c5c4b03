"""One file written whole or not at all, the way the store publishes its own files: a
temporary file in the target's folder (named ``.NAME.XXXX.tmp``, the pattern the store's
clean-up already treats as a leftover), fsynced unless ``GPU_TRACE_FSYNC=0``
(:data:`gpu_trace.store.generations.FSYNC_ENV`), then renamed over the target. A reader
never sees half a file and a killed writer leaves the old file (or none) in place.

Streaming writers (the replay event trace, which can hold millions of events) write
through the open handle instead of building the whole text first.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import TextIO

from gpu_trace.store.generations import FSYNC_ENV


@contextlib.contextmanager
def atomic_text(path: Path) -> Iterator[TextIO]:
    """A UTF-8 text handle whose content replaces ``path`` when the block ends without
    an exception (the temporary file is removed otherwise). The folder must exist.
    """
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as fh:
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
