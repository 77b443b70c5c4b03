"""Where things live, resolved at call time (never at import) so tests and users can
point gpu-trace elsewhere with ``--store`` or ``$GPU_TRACE_STORE``."""

from __future__ import annotations

import os
from pathlib import Path

STORE_ENV = "GPU_TRACE_STORE"
DEFAULT_STORE = Path("data") / "store"


def resolve_store(store: str | Path | None = None) -> Path:
    """Return the store root: the explicit argument, else ``$GPU_TRACE_STORE``, else
    ``data/store`` relative to the working directory."""
    if store is not None and str(store) != "":
        return Path(store)
    env = os.environ.get(STORE_ENV)
    if env:
        return Path(env)
    return DEFAULT_STORE
