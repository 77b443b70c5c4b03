"""Store generations: how a commit becomes visible to readers all at once.

Layout::

    STORE/current -> gen-00000012          (relative symlink, swapped by one rename)
    STORE/gen-00000012/<table>/source=<source>/<dataset>.parquet
    STORE/.tx-<pid>-<uuid>/...             (one writer's staged files)
    STORE/.lock                            (flock: commits run one at a time)

A generation folder is never modified once published. A commit (under the lock) builds
the next one in a hidden folder from hard links to every file of the current one, except
those it replaces, moves its staged files in, fsyncs, renames the folder to
``gen-<N+1>`` and swaps ``current`` with one atomic rename of a fresh symlink. Readers
resolve ``current`` once (:func:`snapshot_root`) and so see one whole generation, never a
mix. The two previous generations are kept for short readers still on them; a reader
that may outlive more commits (a report, ``sql``, an API ``Store``) pins its generation
(:func:`reader_root`: a shared ``flock`` on the generation folder, held until the process
exits or :func:`release` is called), and an expired generation is deleted only once no
reader pins it (:func:`expire`, retried by every later commit).

Whatever a killed run leaves (its ``.tx-`` folder, a half-built generation, a temporary
symlink, pre-generation ``.*.tmp`` files) is removed by the next run
(:func:`clean_leftovers`). A store in the old layout (table folders directly under STORE)
is moved into ``gen-00000001`` on first open (:func:`repair`).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import re
import shutil
import uuid
from collections.abc import Iterable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path, PurePosixPath

from gpu_trace.errors import StoreError
from gpu_trace.schemas import TABLES

CURRENT = "current"
LOCK = ".lock"
KEEP_PREVIOUS = 2
"""Generations kept besides the current one, for long-lived readers."""

_GEN = re.compile(r"^gen-(\d{8})$")
_TX = re.compile(r"^\.tx-(\d+)-[0-9a-f]+$")
_BUILD = re.compile(r"^\.build-\d+-[0-9a-f]+$")
_LINK_TMP = re.compile(r"^\.current-\d+-[0-9a-f]+$")


def gen_name(n: int) -> str:
    """The folder name of generation ``n`` (``gen-00000042``: sorts by number)."""
    return f"gen-{n:08d}"


def _gen_number(name: str) -> int | None:
    m = _GEN.match(name)
    return int(m.group(1)) if m else None


def _generations(store: Path) -> dict[int, Path]:
    out: dict[int, Path] = {}
    with contextlib.suppress(FileNotFoundError):
        for entry in os.scandir(store):
            n = _gen_number(entry.name)
            if n is not None and entry.is_dir(follow_symlinks=False):
                out[n] = Path(entry.path)
    return out


def is_generation(path: Path) -> bool:
    """True for a ``gen-N`` folder of a store (already a snapshot)."""
    return _GEN.match(path.name) is not None and os.path.lexists(path.parent / CURRENT)


def _current_number(store: Path) -> int | None:
    try:
        return _gen_number((store / CURRENT).readlink().name)
    except OSError:
        return None


def _old_tables(store: Path) -> list[Path]:
    return [store / t for t in TABLES if (store / t).is_dir()]


def needs_repair(store: Path) -> bool:
    """``current`` is missing or not a symlink while the store holds data (old layout,
    a copy that followed the symlink, or a crash inside :func:`repair`).
    """
    link = store / CURRENT
    if link.is_symlink():
        return False
    return link.exists() or bool(_old_tables(store)) or bool(_generations(store))


def is_store(path: Path) -> bool:
    """Whether ``path`` holds a store (a ``current`` link, generations, or the old
    layout's table folders), as opposed to a missing or unrelated folder. Readers check
    this so that a mistyped ``--store`` is refused instead of made into an empty store.
    """
    if is_generation(path):
        return True
    return os.path.lexists(path / CURRENT) or bool(_generations(path)) or bool(_old_tables(path))


def snapshot_root(store: Path) -> Path:
    """The generation folder a reader should read, resolved once.

    Pass the result (not ``store``) to every scan of one logical read so that all of it
    comes from one generation. A snapshot passed again is returned unchanged. A store in
    the old layout is migrated first; a store with nothing yet gives a path that does not
    exist (every table reads as empty).
    """
    if is_generation(store):
        return store
    if needs_repair(store):
        with store_lock(store):
            repair(store)
    link = store / CURRENT
    try:
        return store / link.readlink()
    except OSError:
        return link


def live_root(store: Path) -> Path:
    """The path that always shows the newest generation (``STORE/current``), for view
    scripts that outlive this process.
    """
    return store if is_generation(store) else store / CURRENT


@contextlib.contextmanager
def store_lock(store: Path) -> Iterator[None]:
    """Exclusive ``flock`` on ``STORE/.lock``; released when the process dies."""
    store.mkdir(parents=True, exist_ok=True)
    fd = os.open(store / LOCK, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


_PINS: dict[str, tuple[int, int]] = {}
"""Generation folder -> (open fd holding the shared flock, pin count) in this process."""


def _pin(gen: Path) -> bool:
    """Take a shared ``flock`` on ``gen`` (False when it was deleted meanwhile)."""
    key = os.fspath(gen)
    if key in _PINS:
        fd, count = _PINS[key]
        _PINS[key] = (fd, count + 1)
        return True
    try:
        fd = os.open(gen, os.O_RDONLY | os.O_DIRECTORY)
    except FileNotFoundError:
        return False
    fcntl.flock(fd, fcntl.LOCK_SH)  # waits while a writer is deleting it
    if os.fstat(fd).st_nlink == 0:  # deleted before we got the lock
        os.close(fd)
        return False
    _PINS[key] = (fd, 1)
    return True


def reader_root(store: Path) -> Path:
    """:func:`snapshot_root`, pinned: the generation stays on disk while this process
    reads it, however many commits land meanwhile (until :func:`release` or exit).
    """
    for _ in range(100):
        root = snapshot_root(store)
        if not is_generation(root) or not root.is_dir() or _pin(root):
            return root
    msg = f"{store}: could not pin a generation (commits replaced it 100 times in a row)"
    raise StoreError(msg)


def release(gen: Path) -> None:
    """Drop one pin of ``gen`` taken by :func:`reader_root` (the last one unlocks it)."""
    key = os.fspath(gen)
    if key not in _PINS:
        return
    fd, count = _PINS.pop(key)
    if count > 1:
        _PINS[key] = (fd, count - 1)
    else:
        os.close(fd)


def _delete_unpinned(path: Path) -> None:
    """Delete an expired generation unless a reader pins it (then a later commit will)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    except FileNotFoundError:
        return
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return
        shutil.rmtree(path, ignore_errors=True)
    finally:
        os.close(fd)


def expire(store: Path) -> None:
    """Delete the generations older than the :data:`KEEP_PREVIOUS` before ``current``
    that no reader pins.
    """
    cur = _current_number(store)
    if cur is None:
        return
    for n, path in sorted(_generations(store).items()):
        if n < cur - KEEP_PREVIOUS:
            _delete_unpinned(path)


FSYNC_ENV = "GPU_TRACE_FSYNC"
"""``GPU_TRACE_FSYNC=0`` skips the fsyncs of a commit: for throwaway stores (the test
suite sets it), where ~100 fsyncs per commit cost more than the work itself. A commit
stays atomic for readers and against a killed process (the renames do that); only a
power cut or OS crash may then lose the last commits. Anything else (unset, ``1``):
every file and folder of a commit is fsynced before it is published."""


def _fsync_path(path: str | os.PathLike[str]) -> None:
    if os.environ.get(FSYNC_ENV) == "0":
        return
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _swap_current(store: Path, name: str) -> None:
    tmp = store / f".current-{os.getpid()}-{uuid.uuid4().hex}"
    tmp.symlink_to(name)
    tmp.replace(store / CURRENT)
    _fsync_path(store)


def repair(store: Path) -> None:
    """Give the store a ``current`` symlink (call under :func:`store_lock`).

    - a ``current`` *directory* (a copy made with symlinks followed) becomes a new
      generation;
    - old-layout table folders move into the newest generation (``gen-00000001`` for a
      store that has none), dropping their stale ``.*.tmp`` files;
    - ``current`` then points at that generation.

    Every step is a rename, so a crash inside leaves a state this function finishes.
    """
    link = store / CURRENT
    if link.is_symlink():
        return
    gens = _generations(store)
    if link.is_dir():
        n = max(gens, default=0) + 1
        link.rename(store / gen_name(n))
        gens[n] = store / gen_name(n)
    target = store / gen_name(max(gens, default=1))
    tables = _old_tables(store)
    if tables:
        target.mkdir(exist_ok=True)
    for folder in tables:
        if (target / folder.name).exists():
            msg = f"{store}: cannot migrate {folder.name}/ into {target.name}/: it exists there"
            raise StoreError(msg)
        for stale in folder.rglob(".*.tmp"):
            stale.unlink()
        folder.rename(target / folder.name)
    if target.is_dir():
        _fsync_path(target)
        _swap_current(store, target.name)


def pid_alive(pid: int) -> bool:
    """Whether process ``pid`` still runs (its leftovers must then be kept)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _locked_leftovers(store: Path) -> list[Path]:
    """Entries only a crashed commit can leave (safe to delete under the lock)."""
    out: list[Path] = []
    cur = _current_number(store)
    with contextlib.suppress(FileNotFoundError):
        for entry in os.scandir(store):
            name = entry.name
            n = _gen_number(name)
            crashed = (
                _BUILD.match(name)
                or _LINK_TMP.match(name)
                or (name.startswith(".") and name.endswith(".tmp"))
                or (n is not None and cur is not None and n > cur)
            )
            if crashed:
                out.append(Path(entry.path))
    return out


def _dead_tx(store: Path) -> list[Path]:
    out: list[Path] = []
    with contextlib.suppress(FileNotFoundError):
        for entry in os.scandir(store):
            m = _TX.match(entry.name)
            if m and not pid_alive(int(m.group(1))):
                out.append(Path(entry.path))
    return out


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)


def clean_leftovers(store: Path, *, locked: bool = False) -> None:
    """Remove what killed runs left: ``.tx-`` folders of dead processes (no lock needed:
    nobody else owns them) and, under the lock, half-built generations, temporary
    symlinks, unpublished generations and old ``.*.tmp`` files (expired generations are
    :func:`expire`'s, which keeps pinned ones).
    """
    for path in _dead_tx(store):
        _remove(path)
    if locked:
        for path in _locked_leftovers(store):
            _remove(path)
    elif _locked_leftovers(store):
        with store_lock(store):
            for path in _locked_leftovers(store):
                _remove(path)


def _link_tree(base: Path, build: Path, skip: set[PurePosixPath]) -> list[str]:
    """Hard-link every visible file of ``base`` into ``build`` (copy if links fail);
    returns the folders made (``build`` first), for :func:`_fsync_dirs`.

    ``str`` paths and one ``mkdir`` per folder: this runs on every commit over every
    file of the store, so per-file ``pathlib`` objects and ``mkdir(parents=True)``
    probing were most of a sweep driver's CPU per commit.
    """
    base_s, build_s = os.fspath(base), os.fspath(build)
    skip_s = {str(p) for p in skip}
    made = [build_s]
    for dirpath, dirnames, files in os.walk(base_s):
        rel = os.path.relpath(dirpath, base_s)
        dirnames[:] = [d for d in dirnames if not d.startswith(".")]
        if rel == ".":
            rel, dst_dir = "", build_s
        else:
            dst_dir = f"{build_s}/{rel}"
            Path(dst_dir).mkdir()  # os.walk is top-down: the parent exists
            made.append(dst_dir)
        for f in files:
            if f.startswith(".") or (f"{rel}/{f}" if rel else f) in skip_s:
                continue
            src, dst = f"{dirpath}/{f}", f"{dst_dir}/{f}"
            try:
                os.link(src, dst)
            except OSError as exc:
                if exc.errno not in (errno.EXDEV, errno.EPERM, errno.EMLINK, errno.ENOTSUP):
                    raise
                shutil.copy2(src, dst)
    return made


FSYNC_THREADS = 16
"""fsyncs of one commit in flight at once. Each one mostly waits on the disk (and
releases the GIL), so a fresh store's ~100 fsyncs overlap instead of queueing one
after another; the journal can then commit several in one flush."""


def _fsync_dirs(paths: Iterable[str | os.PathLike[str]]) -> None:
    """Flush every path (files or folders) to disk, several at once; return when all are."""
    todo = list(paths)
    if os.environ.get(FSYNC_ENV) == "0" or not todo:
        return
    if len(todo) == 1:
        _fsync_path(todo[0])
        return
    with ThreadPoolExecutor(max_workers=min(FSYNC_THREADS, len(todo))) as pool:
        for _ in pool.map(_fsync_path, todo):
            pass  # re-raises the first OSError


def remove_tree(path: Path) -> None:
    """Remove a folder completely even if Ctrl-C arrives meanwhile, then re-raise the
    interrupt. One Ctrl-C can raise twice: polars raises ``KeyboardInterrupt`` from
    inside a sink and Python raises it again from the same pending signal a moment
    later, which would otherwise cut ``rmtree`` short and leave half a folder behind.
    """
    interrupted = False
    while True:
        try:
            shutil.rmtree(path, ignore_errors=True)
            break
        except KeyboardInterrupt:
            interrupted = True
    if interrupted:
        raise KeyboardInterrupt


def commit_generation(store: Path, files: Mapping[PurePosixPath, Path]) -> Path:
    """Publish the current generation plus ``files`` (store-relative path -> staged
    file, moved) as the next generation; returns its folder.
    """
    with store_lock(store):
        repair(store)
        clean_leftovers(store, locked=True)
        cur = _current_number(store)
        build = store / f".build-{os.getpid()}-{uuid.uuid4().hex}"
        build.mkdir()
        try:
            made = [os.fspath(build)]
            if cur is not None:
                made = _link_tree(store / gen_name(cur), build, set(files))
            have = set(made)
            _fsync_dirs(files.values())  # every file's bytes on disk before it is renamed
            for rel, src in files.items():
                dst = build / rel
                for parent in reversed(dst.parents[: len(rel.parts) - 1]):
                    if os.fspath(parent) not in have:
                        parent.mkdir(exist_ok=True)
                        have.add(os.fspath(parent))
                        made.append(os.fspath(parent))
                src.replace(dst)
            _fsync_dirs(made)
            new = store / gen_name((cur or 0) + 1)
            build.rename(new)
        except BaseException:
            remove_tree(build)
            raise
        _fsync_path(store)
        _swap_current(store, new.name)
    # Expired generations are deleted after the lock is released: no commit reads them,
    # so other writers need not wait for the unlinks.
    expire(store)
    return new
