"""Swap a freshly built report site into place in one step.

The site is built in a hidden sibling folder (``.<out>.build-<pid>-<uuid>``) and only
then exchanged with ``OUT`` (Linux ``renameat2(RENAME_EXCHANGE)``; elsewhere two renames,
whose left-over old folder the next run puts back or removes). A killed build therefore
leaves the previous site whole, never a new ``index.html`` linking to missing pages.

``OUT`` is replaced only when it is missing, empty, or a site we built (it holds
:data:`SITE_MARKER`), so ``--out .`` or ``--out ~/papers`` can never delete user files.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import re
import shutil
import uuid
from pathlib import Path

from gpu_trace.errors import GpuTraceError
from gpu_trace.store.generations import pid_alive

SITE_MARKER = ".gpu-trace-site"
"""Written into every site we build: only such a folder is ever replaced."""

_AT_FDCWD = -100
_RENAME_EXCHANGE = 2


def _siblings(out: Path, kind: str) -> list[tuple[Path, int]]:
    rx = re.compile(rf"^\.{re.escape(out.name)}\.{kind}-(\d+)-[0-9a-f]+$")
    found = []
    with contextlib.suppress(FileNotFoundError):
        for p in out.parent.iterdir():
            if m := rx.match(p.name):
                found.append((p, int(m.group(1))))
    return sorted(found, key=lambda x: x[0].stat().st_mtime_ns)


def recover(out: Path) -> None:
    """Undo what a killed run left next to ``out``: a site moved aside but never
    replaced goes back to ``out``; other left-over old sites and builds of dead
    processes are removed.
    """
    old = _siblings(out, "old")
    if not out.exists() and old:
        old.pop()[0].rename(out)
    for path, _ in old:
        shutil.rmtree(path, ignore_errors=True)
    for path, pid in _siblings(out, "build"):
        if not pid_alive(pid):
            shutil.rmtree(path, ignore_errors=True)


def _pre_marker_site(out: Path) -> bool:
    """A site built before the marker existed: only our pages and chart images, and an
    index.html with our footer.
    """
    index = out / "index.html"
    if not index.is_file() or "Built with gpu-trace" not in index.read_text(errors="replace"):
        return False
    for p in out.iterdir():
        if p.name == "charts" and p.is_dir():
            if any(c.suffix not in (".svg", ".png") or not c.is_file() for c in p.iterdir()):
                return False
        elif p.suffix != ".html" or not p.is_file():
            return False
    return True


def check_replaceable(out: Path) -> None:
    """Refuse (one line) an ``out`` that holds anything but a site we built."""
    cwd = Path.cwd()
    if out == cwd or out in cwd.parents:
        msg = (
            f"{out}: refusing to replace the current folder or one above it; "
            "pass a folder for the site, e.g. --out reports/site"
        )
        raise GpuTraceError(msg)
    if not out.exists():
        return
    if not out.is_dir():
        msg = f"{out}: exists and is not a folder; choose another --out"
        raise GpuTraceError(msg)
    if (out / SITE_MARKER).is_file() or not any(out.iterdir()) or _pre_marker_site(out):
        return
    msg = (
        f"{out}: not empty and not a gpu-trace report site (no {SITE_MARKER}); "
        "refusing to replace it, choose a new or empty --out folder"
    )
    raise GpuTraceError(msg)


def staging_folder(out: Path) -> Path:
    """A new hidden build folder next to ``out`` (same file system, so renames work)."""
    out.parent.mkdir(parents=True, exist_ok=True)
    path = out.parent / f".{out.name}.build-{os.getpid()}-{uuid.uuid4().hex}"
    path.mkdir()
    return path


def _exchange(a: Path, b: Path) -> bool:
    """Atomically swap two folders; False where the system cannot."""
    libc = ctypes.CDLL(None, use_errno=True)
    fn = getattr(libc, "renameat2", None)
    if fn is None:
        return False
    rc = fn(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE)
    if rc == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.EINVAL, errno.ENOSYS, errno.ENOTSUP):
        return False
    raise OSError(err, os.strerror(err), str(b))


def swap_in(built: Path, out: Path) -> None:
    """Make ``built`` the site at ``out``; the previous site is deleted afterwards."""
    (built / SITE_MARKER).write_text("built by gpu-trace report; replaced on rebuild\n")
    if not out.exists():
        built.rename(out)
        return
    if _exchange(built, out):
        shutil.rmtree(built, ignore_errors=True)  # now holds the previous site
        return
    old = out.parent / f".{out.name}.old-{os.getpid()}-{uuid.uuid4().hex}"
    out.rename(old)
    built.rename(out)
    shutil.rmtree(old, ignore_errors=True)
