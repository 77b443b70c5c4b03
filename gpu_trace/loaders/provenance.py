"""Which inputs were generated, not recorded: the manifests ``gpu-trace synth`` writes.

``gpu-trace synth FAMILY --out DIR`` writes, beside its files,
``DIR/gpu-trace-synth-<family>.json`` (one per family, so two families generated into
one folder keep both)::

    {"generator": "gpu-trace synth", "command": "gpu-trace synth helios --jobs 9 --seed 7",
     "family": "helios", "jobs": 9, "seed": 7, "gpu_trace_version": "...",
     "files": [{"path": "data/Venus/cluster_log.csv", "sha256": "..."}, ...]}

At ingest, an input file listed in a manifest in its folder or one of the
:data:`MAX_UP` folders above it (paths are relative to the manifest's folder), **with
the same sha256**, is recorded as generated: its ``ingests`` rows get ``generator`` =
the manifest's description of that file (JSON), and so does its Parquet footer
(``gpu_trace.generator``). The report reads that, never a list of checksums, so a
trace of any seed or size is labelled synthetic. A listed file whose bytes changed
since (its sha256 differs) is no longer the generator's output: it is not recorded,
with one ``warning:`` line. A manifest that is not one (bad JSON, wrong fields, over
:data:`MAX_BYTES`) is ignored with a warning line too.
"""

from __future__ import annotations

import hashlib
import json
import re
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from gpu_trace.errors import InputWarning
from gpu_trace.loaders.textfile import FileInfo
from gpu_trace.version import __version__

GENERATOR = "gpu-trace synth"
PREFIX = "gpu-trace-synth-"
MAX_UP = 4
"""Folders above an input searched for a manifest (Acme's ``data/utilization/<c>/``)."""
MAX_BYTES = 1 << 20
"""A manifest lists a few files; anything larger is not one (memory stays bounded)."""
_SHA = re.compile(r"^[0-9a-f]{64}$")


def manifest_path(out: Path, family: str) -> Path:
    """Where ``gpu-trace synth FAMILY --out OUT`` writes its manifest."""
    return out / f"{PREFIX}{family}.json"


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def write_manifest(
    out: Path,
    *,
    family: str,
    jobs: int,
    seed: int,
    files: Sequence[Path],
    release: str | None = None,
) -> Path:
    """Write ``out``'s manifest for ``files`` (each under ``out``) and return its path
    (``release``: the format release asked for, for the families that have several).
    """
    listed = [
        {"path": f.resolve().relative_to(out.resolve()).as_posix(), "sha256": _sha256(f)}
        for f in files
    ]
    command = f"{GENERATOR} {family} --jobs {jobs} --seed {seed}"
    doc: dict[str, Any] = {
        "generator": GENERATOR,
        "command": command if release is None else f"{command} --release {release}",
        "family": family,
        "jobs": jobs,
        "seed": seed,
        "gpu_trace_version": __version__,
        "files": listed,
    }
    if release is not None:
        doc["release"] = release
    path = manifest_path(out, family)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")
    tmp.replace(path)
    return path


def _parse(path: Path) -> dict[str, Any] | str:
    """The manifest at ``path``, or why it is not one."""
    if path.stat().st_size > MAX_BYTES:
        return f"larger than {MAX_BYTES} bytes"
    try:
        doc = json.loads(path.read_bytes())
    except (ValueError, UnicodeDecodeError, RecursionError) as exc:
        return f"not JSON ({str(exc)[:80]})"
    if not isinstance(doc, dict) or doc.get("generator") != GENERATOR:
        return f'not a manifest of "{GENERATOR}" (no such "generator" field)'
    files = doc.get("files")
    if not isinstance(files, list) or not all(
        isinstance(f, dict)
        and isinstance(f.get("path"), str)
        and isinstance(f.get("sha256"), str)
        and _SHA.match(f["sha256"])
        for f in files
    ):
        return '"files" is not a list of {"path", "sha256"} entries'
    for key, kind in (("family", str), ("command", str), ("jobs", int), ("seed", int)):
        if not isinstance(doc.get(key), kind):
            return f'"{key}" is missing or not a {kind.__name__}'
    return doc


class Manifests:
    """The manifests seen by one ingest (each folder listed and each manifest read once,
    each warning given once).
    """

    def __init__(self) -> None:
        self._folders: dict[Path, list[tuple[Path, dict[str, Any]]]] = {}
        self._files: dict[tuple[Path, str], str | None] = {}

    def _in(self, folder: Path) -> list[tuple[Path, dict[str, Any]]]:
        if folder not in self._folders:
            found = []
            for path in sorted(folder.glob(f"{PREFIX}*.json")):
                doc = _parse(path)
                if isinstance(doc, str):
                    warnings.warn(InputWarning(f"{path}: ignored: {doc}"), stacklevel=2)
                else:
                    found.append((path, doc))
            self._folders[folder] = found
        return self._folders[folder]

    def generator(self, file: FileInfo) -> str | None:
        """The JSON description of the generator that wrote ``file``, or None when no
        manifest lists it (real data) or the one that lists it has another sha256.
        """
        path = file.path.resolve()
        key = (path, file.sha256)
        if key not in self._files:  # a file of several batches: one look, one warning
            self._files[key] = self._lookup(path, file.sha256)
        return self._files[key]

    def _lookup(self, path: Path, sha256: str) -> str | None:
        for folder in list(path.parents)[:MAX_UP]:
            rel = path.relative_to(folder).as_posix()
            for manifest, doc in self._in(folder):
                listed = {f["path"]: f["sha256"] for f in doc["files"]}
                if rel not in listed:
                    continue
                if listed[rel] != sha256:
                    warnings.warn(
                        InputWarning(
                            f"{manifest}: lists {rel} with another sha256 than the file's "
                            "(changed since it was generated): not recorded as synthetic"
                        ),
                        stacklevel=2,
                    )
                    return None
                described = {k: v for k, v in doc.items() if k != "files"}
                described.update(file=rel, sha256=sha256)
                return json.dumps(described, sort_keys=True, separators=(",", ":"))
        return None
