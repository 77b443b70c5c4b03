"""``gpu-trace datasets fetch``: put each file of a registered trace in place, verified.

The contract (the one pooch, fatiando/pooch, keeps for its downloads):

- **Explicit.** Only :func:`fetch` touches the network, and only when a file is not
  already in place and verified; nothing else in gpu-trace downloads anything.
- **Verify before move.** Bytes go to ``DEST/<dataset>/<file>.part``; the size and
  sha256 are checked there, and only a matching file is renamed into place (an atomic
  rename in the same folder). A mismatching download is deleted, so a bad file is never
  mistaken for a good one, and an interrupted fetch leaves the previous file as it was.
- **Resumable.** An interrupted download keeps its ``.part`` and the next attempt asks
  for the rest (:mod:`.transfer`).
- **Cheap status.** Every verified file is recorded (:mod:`.state`), so a second fetch
  of a file still in place does no network I/O and no re-hash.
- **Unpinned files** (Helios' ``data.zip`` has no published checksum) are downloaded
  with a warning, and the sha256 computed at download is recorded so later changes are
  still detected.

This module is the orchestration only: :mod:`.transfer` moves bytes, :mod:`.verify`
checks them, :mod:`.state` records them and :mod:`.unpack` extracts archives.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from gpu_trace.datasets.registry import DEFAULT_DEST, DataFile, Dataset, as_dataset, resolve_urls
from gpu_trace.datasets.state import PART_SUFFIX, State, Status, file_status
from gpu_trace.datasets.transfer import ProgressHook, download
from gpu_trace.datasets.unpack import Notify, unpack
from gpu_trace.datasets.verify import check_download, check_placed


@dataclass(frozen=True)
class FetchResult:
    """What :func:`fetch` did for one file."""

    dataset: str
    file: str
    path: Path
    size: int
    sha256: str
    status: Status
    """``verified`` or ``unverified`` (no published checksum)."""
    downloaded: bool
    """False when the file was already in place and verified: no network I/O."""
    resumed_from: int = 0
    """Bytes of an earlier ``.part`` that were kept (HTTP Range)."""
    url: str | None = None
    extracted: tuple[str, ...] = ()


@dataclass(frozen=True)
class _Network:
    """How to download: the fetch options that only matter when bytes must move."""

    mirror: str | None
    timeout_s: float
    retries: int
    backoff_s: float
    progress: ProgressHook | None


def _status_of(f: DataFile) -> Status:
    return Status.verified if f.sha256 is not None else Status.unverified


def _adopt(ds: Dataset, f: DataFile, path: Path, state: State) -> FetchResult:
    """A file placed by hand (or changed since it was verified): check it, never
    overwrite it, and record it when it matches.
    """
    got, size = check_placed(f, path)
    checked = "published" if f.sha256 is not None else "recorded"
    state.record(f.name, path, got, checked, None)
    return FetchResult(ds.name, f.name, path, size, got, _status_of(f), False)


def _download_and_place(
    ds: Dataset,
    f: DataFile,
    folder: Path,
    state: State,
    net: _Network,
    notify: Notify | None,
) -> FetchResult:
    """Download into the ``.part``, check it, and only then rename it into place."""
    path = folder / f.name
    part = folder / (f.name + PART_SUFFIX)
    url, resumed = download(
        ds,
        f,
        part,
        resolve_urls(ds, f, net.mirror),
        timeout_s=net.timeout_s,
        retries=net.retries,
        backoff_s=net.backoff_s,
        progress=net.progress,
    )
    got, size = check_download(ds, f, part, url)
    part.replace(path)  # atomic: same folder, and only after the checks above
    if f.sha256 is None:
        state.record(f.name, path, got, "recorded", url)
        if notify is not None:
            notify(
                f"{ds.name}/{f.name} has no published size or sha256: the download is "
                f"unverified; its sha256 {got} is recorded in {state.path}"
            )
        return FetchResult(ds.name, f.name, path, size, got, Status.unverified, True, resumed, url)
    state.record(f.name, path, got, "published", url)
    return FetchResult(ds.name, f.name, path, size, got, Status.verified, True, resumed, url)


def _place(
    ds: Dataset,
    f: DataFile,
    folder: Path,
    state: State,
    net: _Network,
    notify: Notify | None,
) -> FetchResult:
    """Make sure ``folder/f.name`` is in place and verified; download only if needed."""
    path = folder / f.name
    current = file_status(f, folder, state)
    if current.status in (Status.verified, Status.unverified):
        rec = state.files[f.name]
        return FetchResult(
            ds.name, f.name, path, int(rec["size"]), str(rec["sha256"]), current.status, False
        )
    if path.exists():
        return _adopt(ds, f, path, state)
    return _download_and_place(ds, f, folder, state, net, notify)


def fetch(
    dataset: str | Dataset,
    dest: Path = DEFAULT_DEST,
    *,
    files: Sequence[str] | None = None,
    mirror: str | None = None,
    extract: bool = True,
    timeout_s: float = 30.0,
    retries: int = 5,
    backoff_s: float = 1.0,
    progress: ProgressHook | None = None,
    notify: Notify | None = None,
    max_extract_bytes: int | None = None,
) -> list[FetchResult]:
    """Download ``dataset`` (or only ``files`` of it) into ``dest/<name>/``, verify
    every file before it is moved into place, and extract archives.

    A file already in place and verified is not downloaded again (no network I/O).
    ``mirror`` (else ``$GPU_TRACE_DATASETS_MIRROR``) replaces the official URLs with
    ``<mirror>/<dataset>/<file>``. ``retries`` is the number of reconnections allowed
    per URL after a timeout or a dropped connection; each one resumes with HTTP
    ``Range`` (with exponential back-off from ``backoff_s``). Refused connections and
    DNS failures are not retried: they mean offline, and say so.
    ``max_extract_bytes`` caps what one archive may expand to (default: derived from
    its size, see :class:`~gpu_trace.datasets.extract.ExtractLimits`).
    Raises :class:`DatasetError` with a one-line message on any failure.
    """
    ds = as_dataset(dataset)
    selected = ds.select(files)
    folder = dest / ds.name
    folder.mkdir(parents=True, exist_ok=True)
    state = State.load(folder)
    net = _Network(mirror, timeout_s, retries, backoff_s, progress)
    results: list[FetchResult] = []
    try:
        for f in selected:
            result = _place(ds, f, folder, state, net, notify)
            state.save()
            if extract and f.extract and not state.extracted(f.name, folder, result.sha256):
                members = unpack(ds, f, folder, state, result.sha256, notify, max_extract_bytes)
                state.save()
                result = dataclasses.replace(result, extracted=members)
            results.append(result)
    finally:
        state.save()
    return results
