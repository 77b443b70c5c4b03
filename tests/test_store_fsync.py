"""A commit fsyncs what it publishes, unless ``GPU_TRACE_FSYNC=0`` says the store is
throwaway (tests/conftest.py sets it for the suite; this file turns it back on).

Counted by wrapping ``os.fsync``: with fsync on, an ingest of the openb node lists
fsyncs the new file, the generation's folders and the store folder (the ``current``
swap); with
``GPU_TRACE_FSYNC=0`` it fsyncs nothing and the store reads back the same.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from gpu_trace.loaders import LOADERS, ingest
from gpu_trace.store.generations import FSYNC_ENV, snapshot_root
from gpu_trace.store.scan import scan
from tests.conftest import OPENB

NODE_LIST = OPENB / "openb_node_list_gpu_node.csv"


def _ingest_counting(store: Path, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Ingest the node list into ``store``; the paths of every fsynced file descriptor."""
    synced: list[str] = []
    real = os.fsync

    def counting(fd: int) -> None:
        synced.append(str(Path(f"/proc/self/fd/{fd}").readlink()))  # Linux: the path behind fd
        real(fd)

    monkeypatch.setattr(os, "fsync", counting)
    ingest(LOADERS["openb"], NODE_LIST, store)
    monkeypatch.setattr(os, "fsync", real)
    return synced


def test_commit_fsyncs_the_store_and_the_generation(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(FSYNC_ENV, "1")
    store = tmp_path / "store"
    synced = _ingest_counting(store, monkeypatch)
    assert str(store.resolve()) in synced  # the folder holding the `current` swap
    # the new machines file (fsynced staged, before the generation is built around it)
    machines = [p for p in synced if "/machines/source=openb/" in p and p.endswith(".parquet")]
    assert len(machines) == 1
    # and the folders of the generation, built under a hidden name and then renamed
    folders = [p for p in synced if Path(p).is_dir() or not p.endswith(".parquet")]
    assert len(folders) > len(list(snapshot_root(store).iterdir()))


def test_fsync_off_skips_them_and_stores_the_same(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(FSYNC_ENV, "0")
    synced = _ingest_counting(tmp_path / "off", monkeypatch)
    assert synced == []
    monkeypatch.setenv(FSYNC_ENV, "1")
    ingest(LOADERS["openb"], NODE_LIST, tmp_path / "on")
    off = scan(tmp_path / "off", "machines").collect()
    on = scan(tmp_path / "on", "machines").collect()
    # the node list has 1213 GPU nodes (wc -l minus the header), one machines row each
    assert off.height == on.height == 1213
    assert off.equals(on)
