"""Shared fixtures: the bundled real samples and stores built from them."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from hypothesis import settings

# Test stores are thrown away: skip the ~100 fsyncs of each commit (the suite makes
# hundreds), which only matter across a power cut (gpu_trace.store.generations.FSYNC_ENV;
# tests/test_store_fsync.py covers the fsyncing path). Set before gpu_trace is imported
# so subprocesses inherit it; GPU_TRACE_FSYNC=1 runs the suite with them.
os.environ.setdefault("GPU_TRACE_FSYNC", "0")

from gpu_trace.loaders import LOADERS, ingest

# Same input, same output: property tests draw the same examples on every run (a failure
# they find is then reproducible, and a green suite stays green on an unchanged tree).
settings.register_profile("deterministic", derandomize=True)
settings.load_profile("deterministic")

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = ROOT / "data" / "samples"
OPENB = SAMPLES / "openb"


@pytest.fixture(scope="session")
def openb_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A store holding the real openb default pod list and both node lists.

    Session-scoped and read-only for tests: copy it (``store_copy``) to modify.
    """
    store = tmp_path_factory.mktemp("openb") / "store"
    ingest(LOADERS["openb"], OPENB, store)
    return store


@pytest.fixture
def store_copy(openb_store: Path, tmp_path: Path) -> Path:
    dest = tmp_path / "store"
    shutil.copytree(openb_store, dest)
    return dest


@pytest.fixture
def store(tmp_path: Path) -> Path:
    return tmp_path / "store"
