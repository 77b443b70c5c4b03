"""Check that two versions of gpu-trace write the same store from the same inputs.

``python -m bench.same_output OLD_TREE NEW_TREE [OUT_DIR] [FAMILY=PATH ...]`` ingests
the bundled Helios, Philly and PAI 2020 samples (``data/samples/<family>`` and their
``synthetic/`` folders), plus any ``FAMILY=PATH`` given (e.g. a synthetic trace with
broken lines injected), once with each tree's code (each in its own process,
``PYTHONPATH`` set to the tree; each input into a store of its own), then compares
every table of the stores: the same datasets, and for each the same frame (polars
equality in file order and, to tell the two apart, after sorting by every column),
Parquet key-value metadata included except the ingest's own wall-clock fields. Prints
one line per table and exits 1 when anything differs.

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


def ingest_all(tree: Path, store: Path, also: list[tuple[str, Path, list[str]]]) -> None:
    """Ingest every input with ``tree``'s code (run from the new tree's samples)."""
    env = {**os.environ, "PYTHONPATH": str(tree), "GPU_TRACE_FSYNC": "0"}
    for i, (family, path, extra) in enumerate([*INPUTS, *also]):
        args = [sys.executable, "-m", "gpu_trace", "-q", "ingest", family, str(path), *extra]
        # one store per input: a later input of a family would replace an earlier one's
        # datasets in a shared store, and its differences would go unseen
        where = store / f"{i:02d}-{family}"
        subprocess.run([*args, "--store", str(where)], check=True, env=env, cwd=tree)


def tables(store: Path) -> dict[str, Path]:
    """``<input>/<store-relative path>`` of every Parquet file in the current generation
    of each input's store -> its path.
    """
    out: dict[str, Path] = {}
    for one in sorted(p for p in store.iterdir() if p.is_dir()):
        root = (one / "current").resolve()
        out |= {f"{one.name}/{p.relative_to(root)}": p for p in sorted(root.rglob("*.parquet"))}
    return out


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
        elif not left.equals(right):
            problems.append(f"{rel}: same rows in a different order")
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


def main(old_tree: Path, new_tree: Path, out: Path, also: list[tuple[str, Path, list[str]]]) -> int:
    """Ingest with both trees into ``out``/old and ``out``/new; compare; 0 when equal."""
    ingest_all(old_tree.resolve(), out / "old", also)
    ingest_all(new_tree.resolve(), out / "new", also)
    problems = differences(out / "old", out / "new")
    for p in problems:
        sys.stdout.write(f"DIFFERENT {p}\n")
    sys.stdout.write("same output\n" if not problems else f"{len(problems)} difference(s)\n")
    return 1 if problems else 0


if __name__ == "__main__":
    also = [
        (family, Path(path).resolve(), [])
        for family, _, path in (a.partition("=") for a in sys.argv[3:] if "=" in a)
    ]
    rest = [a for a in sys.argv[3:] if "=" not in a]
    if rest:
        sys.exit(main(Path(sys.argv[1]), Path(sys.argv[2]), Path(rest[0]), also))
    with tempfile.TemporaryDirectory() as tmp:
        sys.exit(main(Path(sys.argv[1]), Path(sys.argv[2]), Path(tmp), also))
