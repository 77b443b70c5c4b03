"""Checking files by size and sha256: downloads before they are placed, files placed by
hand, archive members, and ``gpu-trace datasets verify``.

Every check hashes the bytes on disk (streamed, never in memory). A download that fails
its check is deleted, so a bad file is never mistaken for a good one; a file the user
placed by hand is never deleted or overwritten, only refused. Files without a published
checksum are compared with the sha256 recorded when they were first seen.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from gpu_trace.datasets.registry import DEFAULT_DEST, DataFile, Dataset, Member, as_dataset
from gpu_trace.datasets.state import State
from gpu_trace.errors import DatasetError


@dataclass(frozen=True)
class Check:
    """One line of :func:`verify`: a downloaded file or an extracted member."""

    path: str
    """Relative to ``DEST/<dataset>/``."""
    ok: bool
    result: str
    """``ok``, ``ok (unpinned)``, ``ok (size)``, ``not extracted``, ``mismatch``,
    ``size mismatch`` or ``missing``."""
    expected: str | None = None
    actual: str | None = None


def sha256_of(path: Path) -> str:
    """Hex sha256 of a file, streamed (gigabyte archives never sit in memory)."""
    with path.open("rb") as fh:
        return hashlib.file_digest(fh, "sha256").hexdigest()


def mismatch(what: str, expected: object, got: object) -> str:
    """The wording every mismatch message shares: ``sha256 mismatch (expected …, got …)``."""
    return f"{what} mismatch (expected {expected}, got {got})"


# ------------------------------------------------------------------ before placing


def check_placed(f: DataFile, path: Path) -> tuple[str, int]:
    """(sha256, size) of a file found in place but not recorded as verified (placed by
    hand, or changed since); a file that does not match the registry is refused and left
    as it is: it is the user's, never overwritten.
    """
    got = sha256_of(path)
    size = path.stat().st_size
    if (f.sha256 is not None and got != f.sha256) or (f.size is not None and size != f.size):
        msg = (
            f"{path} exists but does not match the registry "
            f"({mismatch('sha256', f.sha256, got)}); move it away and fetch again"
        )
        raise DatasetError(msg)
    return got, size


def check_download(ds: Dataset, f: DataFile, part: Path, url: str) -> tuple[str, int]:
    """(sha256, size) of a finished download in ``part``, checked against the registry;
    on a mismatch ``part`` is deleted (not kept for a resume: its bytes are wrong).
    """
    size = part.stat().st_size
    if f.size is not None and size != f.size:
        part.unlink()
        msg = (
            f"{ds.name}/{f.name} from {url}: {mismatch('size', f.size, size)}; "
            "the download was discarded"
        )
        raise DatasetError(msg)
    got = sha256_of(part)
    if f.sha256 is not None and got != f.sha256:
        part.unlink()
        msg = (
            f"{ds.name}/{f.name} from {url}: {mismatch('sha256', f.sha256, got)}; "
            "the download was discarded"
        )
        raise DatasetError(msg)
    return got, size


def check_members(
    archive: Path, extracted: Path, contents: Sequence[Member]
) -> tuple[dict[str, str], list[str]]:
    """Check the expected members of ``archive`` unpacked under ``extracted`` (the
    temporary folder, before anything is moved into place).

    Returns the sha256 of each member checked against a published one, and the expected
    members without a published checksum that the archive does not contain (a warning,
    not an error: the upstream layout may have changed). A missing pinned member, or a
    size or sha256 mismatch, raises.
    """
    sums: dict[str, str] = {}
    absent: list[str] = []
    for m in contents:
        p = extracted / m.path
        if not p.is_file():
            if m.sha256 is not None:
                msg = f"{archive}: expected member {m.path!r} is missing"
                raise DatasetError(msg)
            absent.append(m.path)
            continue
        got = _check_member(archive, m, p)
        if got is not None:
            sums[m.path] = got
    return sums, absent


def _check_member(archive: Path, m: Member, p: Path) -> str | None:
    """The sha256 of member ``p`` if ``m`` pins one (else None), after its size check."""
    if m.size is not None and p.stat().st_size != m.size:
        msg = (
            f"{archive}: member {m.path!r} is {p.stat().st_size} bytes, "
            f"expected {m.size}; nothing was extracted"
        )
        raise DatasetError(msg)
    if m.sha256 is None:
        return None
    got = sha256_of(p)
    if got != m.sha256:
        msg = (
            f"{archive}: member {m.path!r} sha256 mismatch (expected {m.sha256}, "
            f"got {got}); nothing was extracted"
        )
        raise DatasetError(msg)
    return got


# ---------------------------------------------------------------- datasets verify


def verify(
    dataset: str | Dataset, dest: Path = DEFAULT_DEST, *, files: Sequence[str] | None = None
) -> list[Check]:
    """Re-hash every file of ``dataset`` (or ``files``) under ``dest`` and the archive
    members that carry published checksums; update the record of what is verified.

    Files without a published checksum are compared with the sha256 recorded when they
    were downloaded (or recorded now, if there is none). Raises :class:`DatasetError`
    when nothing of the dataset is present.
    """
    ds = as_dataset(dataset)
    selected = ds.select(files)
    folder = dest / ds.name
    if not any((folder / f.name).exists() for f in selected):
        msg = (
            f"dataset {ds.name!r} not found in {dest}; run `gpu-trace datasets fetch "
            f"{ds.name} --dest {dest}`"
        )
        raise DatasetError(msg)
    state = State.load(folder)
    checks: list[Check] = []
    for f in selected:
        checks.extend(_verify_file(f, folder, state))
    state.save()
    return checks


def _verify_file(f: DataFile, folder: Path, state: State) -> list[Check]:
    """The checks of one file and its members; the record is updated to match."""
    path = folder / f.name
    if not path.exists():
        state.files.pop(f.name, None)
        return [Check(f.name, False, "missing", f.sha256)]
    got = sha256_of(path)
    size = path.stat().st_size
    if f.size is not None and size != f.size:
        state.files.pop(f.name, None)
        return [Check(f.name, False, "size mismatch", str(f.size), str(size))]
    check = _compare(f, got, state.files.get(f.name, {}).get("sha256"))
    if check.ok:
        prior = state.files.get(f.name, {})
        state.record(f.name, path, got, "published" if f.sha256 else "recorded", prior.get("url"))
    else:
        state.files.pop(f.name, None)
    members = _verify_members(f, folder, state)
    if not all(c.ok for c in members):
        state.forget_members(f.name)  # so the next fetch unpacks the archive again
    return [check, *members]


def _compare(f: DataFile, got: str, recorded: str | None) -> Check:
    """``got`` against the published sha256, else the recorded one, else nothing yet."""
    if f.sha256 is not None:
        ok = got == f.sha256
        return Check(f.name, ok, "ok" if ok else "mismatch", f.sha256, got)
    if recorded is not None:
        ok = got == recorded
        return Check(f.name, ok, "ok (unpinned)" if ok else "mismatch", recorded, got)
    return Check(f.name, True, "ok (unpinned, recorded now)", None, got)


def _verify_members(f: DataFile, folder: Path, state: State) -> list[Check]:
    checks: list[Check] = []
    pinned = {m.path: m for m in f.contents if m.sha256 is not None}
    recorded = state.members_of(f.name)
    for rel in sorted(set(pinned) | set(recorded)):
        p = folder / rel
        if not p.is_file():
            if not recorded:  # never extracted (--no-extract): the archive was checked
                checks.append(Check(rel, True, "not extracted", pinned[rel].sha256))
            else:
                checks.append(Check(rel, False, "missing"))
            continue
        if rel in pinned:
            want = pinned[rel].sha256
            got = sha256_of(p)
            checks.append(Check(rel, got == want, "ok" if got == want else "mismatch", want, got))
        else:
            want_size = recorded[rel].get("size")
            size = p.stat().st_size
            ok = size == want_size
            result = "ok (size)" if ok else "size mismatch"
            checks.append(Check(rel, ok, result, str(want_size), str(size)))
    return checks
