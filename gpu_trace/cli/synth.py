"""``gpu-trace synth FAMILY``: raw-format synthetic traces at any scale."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from gpu_trace.cli._boundary import domain_errors, err, info
from gpu_trace.cli.options import number
from gpu_trace.errors import UsageError
from gpu_trace.loaders.provenance import write_manifest
from gpu_trace.synth import RELEASES, SYNTHS, get_writer
from gpu_trace.values import choose


@domain_errors
def synth(
    family: Annotated[str, typer.Argument(help="Trace family: " + ", ".join(SYNTHS) + ".")],
    jobs: Annotated[
        int,
        typer.Option(
            "--jobs",
            callback=number(ge=1),
            help="Number of jobs (pods for openb, requests for the serving traces).",
        ),
    ] = 10_000,
    seed: Annotated[int, typer.Option("--seed", help="Random seed: same seed, same bytes.")] = 0,
    out: Annotated[Path, typer.Option("--out", help="Folder to write the raw files to.")] = Path(
        "data/synth"
    ),
    release: Annotated[
        str | None,
        typer.Option(
            "--release",
            help="Format release, for families that have several: burstgpt v1.2 (with "
            "Session ID and Elapsed time, the default) or v1.1 (without).",
        ),
    ] = None,
) -> None:
    """Write a synthetic trace in FAMILY's raw format (the loaders read it unchanged),
    and beside it OUT/gpu-trace-synth-FAMILY.json naming the generator, seed, size and
    each file's sha256: ingest records it, so reports label the data synthetic.
    """
    choose("trace family", family, SYNTHS)
    extra: dict[str, str] = {}
    if release is not None:
        if family not in RELEASES:
            msg = f"--release applies to {', '.join(RELEASES)} only, not {family}"
            raise UsageError(msg)
        extra["release"] = choose(f"{family} release", release, RELEASES[family])
    out.mkdir(parents=True, exist_ok=True)
    with err.status(f"writing {jobs} {family} jobs"):
        files = get_writer(family)(out, jobs=jobs, seed=seed, **extra)
        manifest = write_manifest(
            out, family=family, jobs=jobs, seed=seed, files=files, release=extra.get("release")
        )
    for f in files:  # the data files; the manifest is said on stderr
        sys.stdout.write(f"{f}\n")
    info(f"manifest: {manifest}")
