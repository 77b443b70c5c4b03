"""Check that two versions of gpu-trace write the same store from the same inputs.

``python -m bench.same_output OLD_TREE NEW_TREE [OUT_DIR]`` ingests the bundled Helios,
Philly and PAI 2020 samples (``data/samples/<family>`` and their ``synthetic/``
folders) once with each tree's code (each in its own process, ``PYTHONPATH`` set to
the tree) into two stores, then compares every table of the two stores: the same
datasets, and for each the same frame (polars equality after sorting by every
column), Parquet key-value metadata included except the ingest's own wall-clock
fields. Prints one line per table and exits 1 on the first difference.

Used for performance work (issue 25): a faster ingest must not change what is stored.
Make the old tree with ``git worktree add /tmp/base <commit>``.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

import polars as pl
import pyarrow.parquet as pq

SAMPLES = Path("data/samples")
INPUTS = (
    ("helios", SAMPLES / "helios", []),
    ("helios", SAMPLES / "helios" / "synthetic", []),
    ("philly", SAMPLES / "philly" / "cluster_machine_list", []),
    ("philly", SAMPLES / "philly" / "synthetic", []),
    ("pai2020", SAMPLES / "pai2020", []),
    ("pai2020", SAMPLES / "pai2020" / "synthetic", []),
)
VOLATILE = {b"ingested_at", b"created", b"created_at", b"written_at"}
"""Metadata keys that hold when a file was written, not what it holds."""


def ingest_all(tree: Path, store: Path) -> None:
    """Ingest every input with ``tree``'s code (run from the new tree's samples)."""
    env = {**os.environ, "PYTHONPATH": str(tree), "GPU_TRACE_FSYNC": "0"}
    for family, path, extra in INPUTS:
        args = [sys.executable, "-m", "gpu_trace", "-q", "ingest", family, str(path), *extra]
        subprocess.run([*args, "--store", str(store)], check=True, env=env, cwd=tree)


def tables(store: Path) -> dict[str, Path]:
    """Store-relative path of every Parquet file in the current generation -> its path."""
    root = (store / "current").resolve()
    return {str(p.relative_to(root)): p for p in sorted(root.rglob("*.parquet"))}


def _sorted(frame: pl.DataFrame) -> pl.DataFrame:
    keys = [c for c, t in frame.schema.items() if not isinstance(t, pl.List | pl.Struct)]
    return frame.sort(keys, nulls_last=True) if keys else frame


def differences(old: Path, new: Path) -> list[str]:
    """What differs between the two stores (empty: nothing)."""
    a, b = tables(old), tables(new)
    problems = [f"only in {old}: {k}" for k in sorted(a.keys() - b.keys())]
    problems += [f"only in {new}: {k}" for k in sorted(b.keys() - a.keys())]
    for rel in sorted(a.keys() & b.keys()):
        left, right = pl.read_parquet(a[rel]), pl.read_parquet(b[rel])
        if left.schema != right.schema:
            problems.append(f"{rel}: schema {left.schema} != {right.schema}")
        elif not _sorted(left).equals(_sorted(right)):
            problems.append(f"{rel}: rows differ ({left.height} vs {right.height} rows)")
        meta_a = pq.read_schema(a[rel]).metadata or {}
        meta_b = pq.read_schema(b[rel]).metadata or {}
        changed = sorted(
            k.decode()
            for k in meta_a.keys() | meta_b.keys()
            if k not in VOLATILE and meta_a.get(k) != meta_b.get(k)
        )
        if changed:
            problems.append(f"{rel}: metadata differs: {', '.join(changed)}")
        sys.stdout.write(f"{rel}: {left.height} rows {'ok' if not changed else 'DIFF'}\n")
    return problems


def main(old_tree: Path, new_tree: Path, out: Path) -> int:
    """Ingest with both trees into ``out``/old and ``out``/new; compare; 0 when equal."""
    ingest_all(old_tree.resolve(), out / "old")
    ingest_all(new_tree.resolve(), out / "new")
    problems = differences(out / "old", out / "new")
    for p in problems:
        sys.stdout.write(f"DIFFERENT {p}\n")
    sys.stdout.write("same output\n" if not problems else f"{len(problems)} difference(s)\n")
    return 1 if problems else 0


if __name__ == "__main__":
    if len(sys.argv) > 3:
        sys.exit(main(Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3])))
    with tempfile.TemporaryDirectory() as tmp:
        sys.exit(main(Path(sys.argv[1]), Path(sys.argv[2]), Path(tmp)))
