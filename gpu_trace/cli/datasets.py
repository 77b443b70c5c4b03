"""``gpu-trace datasets list|fetch|verify``: the public traces' official downloads.

Data (tables, JSON, the paths of fetched files) goes to stdout; progress bars, warnings
and hints go to stderr, so ``gpu-trace datasets list -f json | jq`` stays pipeable.
"""

from __future__ import annotations

import json
import sys
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape
from rich.progress import (
    BarColumn,
    DownloadColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeRemainingColumn,
    TransferSpeedColumn,
)

from gpu_trace.cli._boundary import domain_errors, err
from gpu_trace.cli.options import number, seconds
from gpu_trace.datasets import (
    DEFAULT_DEST,
    MIRROR_ENV,
    DatasetStatus,
    fetch,
    get,
    registry,
    status,
    verify,
)
from gpu_trace.errors import GpuTraceError
from gpu_trace.values import choose, size_bytes

app = typer.Typer(
    help="Public trace registry: list, fetch and verify the official downloads.",
    no_args_is_help=True,
)


class Format(StrEnum):
    """``datasets list --format``: aligned columns to read, or JSON with every field."""

    table = "table"
    json = "json"


DestOpt = Annotated[
    Path,
    typer.Option("--dest", help="Folder holding one sub-folder per dataset."),
]
NameArg = Annotated[
    str, typer.Argument(help="Dataset: philly, helios, pai2020 or openb.", show_default=False)
]
FilesOpt = Annotated[
    list[str] | None,
    typer.Option("--file", help="Only this file of the dataset (repeatable).", show_default=False),
]


def human(n: int) -> str:
    """Decimal units, as the upstream READMEs quote sizes (0.98 GB, 36.4 MB)."""
    value = float(n)
    for unit in ("B", "kB", "MB", "GB"):
        if value < 1000 or unit == "GB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.3g} {unit}"
        value /= 1000
    msg = "unreachable"
    raise AssertionError(msg)


def _size(st: DatasetStatus) -> str:
    ds = st.dataset
    if ds.size is not None:
        return human(ds.size)
    return f"~{human(ds.approx_size)}" if ds.approx_size is not None else "unknown"


def _as_json(st: DatasetStatus) -> dict[str, Any]:
    ds = st.dataset
    files = {f.name: f for f in st.files}
    return {
        "name": ds.name,
        "title": ds.title,
        "homepage": ds.homepage,
        "license": ds.license,
        "license_url": ds.license_url,
        "citation": ds.citation,
        "size_bytes": ds.size,
        "approx_size_bytes": ds.approx_size,
        "size_note": ds.size_note,
        "status": str(st.status),
        "folder": str(st.folder),
        "ingest_path": str(st.folder / ds.ingest_path),
        "notes": list(ds.notes),
        "mirror_notes": list(ds.mirror_notes),
        "files": [
            {
                "name": f.name,
                "urls": list(f.urls),
                "size_bytes": f.size,
                "sha256": f.sha256,
                "checksum_source": f.checksum_source,
                "extract": f.extract,
                "contents": [
                    {"path": m.path, "sha256": m.sha256, "size_bytes": m.size} for m in f.contents
                ],
                "status": str(files[f.name].status),
                "detail": files[f.name].detail,
            }
            for f in ds.files
        ],
    }


def _write_table(rows: list[tuple[str, ...]]) -> None:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]) - 1)]
    for row in rows:
        cells = [c.ljust(w) for c, w in zip(row[:-1], widths, strict=True)] + [row[-1]]
        sys.stdout.write("  ".join(cells).rstrip() + "\n")


@app.command("list")
@domain_errors
def list_(
    dest: DestOpt = DEFAULT_DEST,
    fmt: Annotated[Format, typer.Option("--format", "-f", help="Output format.")] = Format.table,
) -> None:
    """List the public traces with size, licence, citation and local status.

    Status of each dataset in DEST: missing, partial, unchecked (present, never
    verified: run verify), unverified (no published checksum) or verified. Cheap: no
    hashing, no network.
    """
    states = [status(ds, dest) for ds in registry().values()]
    if fmt is Format.json:
        sys.stdout.write(json.dumps([_as_json(s) for s in states], indent=2) + "\n")
        return
    rows: list[tuple[str, ...]] = [("name", "files", "size", "licence", "status", "citation")]
    rows += [
        (
            s.dataset.name,
            str(len(s.dataset.files)),
            _size(s),
            s.dataset.license,
            str(s.status),
            s.dataset.citation,
        )
        for s in states
    ]
    _write_table(rows)
    err.print(f"local status for {escape(str(dest))}; fetch with: gpu-trace datasets fetch NAME")


class _Bar:
    """Adapts the library's progress hook to one rich bar per file on stderr."""

    def __init__(self, progress: Progress) -> None:
        self.progress = progress
        self.tasks: dict[str, TaskID] = {}
        self.current: TaskID | None = None

    def start(self, label: str, total: int | None, completed: int) -> None:
        if label in self.tasks:
            self.current = self.tasks[label]
            self.progress.reset(self.current, total=total, completed=completed)
        else:
            self.current = self.progress.add_task(label, total=total, completed=completed)
            self.tasks[label] = self.current

    def advance(self, nbytes: int) -> None:
        if self.current is not None:
            self.progress.advance(self.current, nbytes)


def _warn(message: str) -> None:
    err.print(f"[yellow]warning:[/] {escape(message)}")


@app.command("fetch")
@domain_errors
def fetch_(
    name: NameArg,
    dest: DestOpt = DEFAULT_DEST,
    file: FilesOpt = None,
    mirror: Annotated[
        str | None,
        typer.Option(
            "--mirror",
            help=f"Base URL replacing the official ones: files are read from "
            f"MIRROR/<dataset>/<file> (a served copy of a --dest folder). Default: ${MIRROR_ENV}.",
            show_default=False,
        ),
    ] = None,
    extract: Annotated[
        bool, typer.Option("--extract/--no-extract", help="Unpack archives after verifying.")
    ] = True,
    timeout: Annotated[
        str,
        typer.Option(
            "--timeout", help="Time without data before a retry (30s, 2m; bare: seconds)."
        ),
    ] = "30s",
    retries: Annotated[
        int,
        typer.Option(
            "--retries", callback=number(ge=0), help="Reconnections per URL; each resumes."
        ),
    ] = 5,
    max_extract: Annotated[
        str | None,
        typer.Option(
            "--max-extract-bytes",
            help="Abort an archive that expands past this many bytes (e.g. 20G). "
            "Default: 40x its size, at least 64 MiB.",
            show_default=False,
        ),
    ] = None,
) -> None:
    """Download NAME into DEST/NAME, verified before it is moved into place.

    Size and sha256 are checked on DEST/NAME/FILE.part before an atomic rename, then
    archives are unpacked (members escaping DEST/NAME, links in zips and archives
    expanding past --max-extract-bytes are refused, and nothing is left half-extracted). Interrupted downloads resume (HTTP Range on DEST/NAME/FILE.part); files already in
    place and verified are not downloaded again.
    """
    ds = get(choose("dataset", name, registry()))
    cap = size_bytes(max_extract) if max_extract is not None else None
    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        DownloadColumn(),
        TransferSpeedColumn(),
        TimeRemainingColumn(),
        console=err,
        transient=True,
    ) as progress:
        results = fetch(
            ds,
            dest,
            files=file,
            mirror=mirror,
            extract=extract,
            timeout_s=seconds(timeout, "--timeout"),
            retries=retries,
            progress=_Bar(progress),
            notify=_warn,
            max_extract_bytes=cap,
        )
    for r in results:
        sys.stdout.write(f"{r.path}\n")
    fetched = sum(r.downloaded for r in results)
    resumed = [r.file for r in results if r.resumed_from]
    unverified = [r.file for r in results if r.status == "unverified"]
    summary = (
        f"{ds.name}: {len(results)} file(s) in {dest / ds.name} "
        f"({fetched} downloaded, {len(results) - fetched} already in place"
        + (f", resumed: {', '.join(resumed)}" if resumed else "")
        + ")"
    )
    err.print(escape(summary))
    if unverified:
        _warn(f"unverified (no published checksum): {', '.join(unverified)}")
    err.print(
        escape(f"next: gpu-trace ingest {ds.name} {dest / ds.name / ds.ingest_path}"),
        highlight=False,
    )


@app.command("verify")
@domain_errors
def verify_(name: NameArg, dest: DestOpt = DEFAULT_DEST, file: FilesOpt = None) -> None:
    """Re-hash NAME's files in DEST/NAME against the registry.

    Archive members with published checksums are re-hashed too. Exit 1 if any file is
    missing or differs.
    """
    ds = get(choose("dataset", name, registry()))
    checks = verify(ds, dest, files=file)
    rows: list[tuple[str, ...]] = [("result", "file", "sha256")]
    rows += [(c.result, c.path, c.actual or c.expected or "") for c in checks]
    _write_table(rows)
    bad = [c for c in checks if not c.ok]
    if bad:
        first = bad[0]
        detail = f" (expected {first.expected}, got {first.actual})" if first.actual else ""
        msg = (
            f"{ds.name}: {len(bad)} of {len(checks)} check(s) failed; "
            f"{first.path}: {first.result}{detail}"
        )
        raise GpuTraceError(msg)
    err.print(escape(f"{ds.name}: all {len(checks)} check(s) passed in {dest / ds.name}"))
