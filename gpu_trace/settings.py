"""Where things live, resolved at call time (never at import) so tests and users can
point gpu-trace elsewhere with ``--store`` or ``$GPU_TRACE_STORE``.
"""

from __future__ import annotations

import os
from pathlib import Path

STORE_ENV = "GPU_TRACE_STORE"
DEFAULT_STORE = Path("data") / "store"


def resolve_store(store: str | Path | None = None) -> Path:
    """Return the store root: the explicit argument, else ``$GPU_TRACE_STORE``, else
    ``data/store`` relative to the working directory.
    """
    if store is not None and str(store) != "":
        return Path(store)
    env = os.environ.get(STORE_ENV)
    if env:
        return Path(env)
    return DEFAULT_STORE


def existing_store(store: str | Path | None = None) -> Path:
    """:func:`resolve_store`, for commands that only read: a path that holds no store is
    a one-line error naming it (``cd /tmp && gpu-trace sql ...`` or a mistyped
    ``--store`` must not create an empty store and answer 0). Writers (ingest, the
    telemetry sampler) use :func:`resolve_store` and create the store.
    """
    from gpu_trace.errors import StoreError
    from gpu_trace.store.generations import is_store

    root = resolve_store(store)
    if not is_store(root):
        msg = (
            f"no store at {root}; create one with `gpu-trace ingest SOURCE PATH --store {root}`"
            f" (or set --store / ${STORE_ENV})"
        )
        raise StoreError(msg)
    return root
