"""openb: CLI tests (the typer app).

Which openb pod list a folder ingest reads: ``default``, else the folder's only variant
(named on stderr), else an error listing what is there; ``--variant`` stays explicit."""

from __future__ import annotations

import csv
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gpu_trace.cli import app
from gpu_trace.store.catalog import connect
from tests.conftest import OPENB


def folder_with(tmp_path: Path, *names: str) -> Path:
    """A folder holding copies of the named bundled openb files."""
    folder = tmp_path / "openb"
    folder.mkdir()
    for name in names:
        shutil.copy(OPENB / name, folder / name)
    return folder


def csv_rows(path: Path) -> int:
    """Data rows of a CSV file, counted with the standard library (independent of polars)."""
    with path.open(newline="") as fh:
        return sum(1 for _ in csv.DictReader(fh))


def jobs_per_dataset(store: Path) -> dict[str, int]:
    with connect(store) as con:
        return dict(con.sql("select dataset, count(*) from jobs group by 1").fetchall())


def ingest(*args: str | Path) -> tuple[int, str]:
    result = CliRunner().invoke(app, ["ingest", "openb", *[str(a) for a in args]])
    assert "Traceback" not in result.output
    return result.exit_code, result.stderr


def test_a_folder_with_one_other_variant_reads_it_and_says_so(tmp_path: Path) -> None:
    pods = "openb_pod_list_gpushare40.csv"
    folder = folder_with(tmp_path, pods, "openb_node_list_gpu_node.csv")
    store = tmp_path / "store"
    code, err = ingest(folder, "--store", store)
    assert code == 0, err
    said = [line for line in err.splitlines() if line.startswith("warning:")]
    assert len(said) == 1 and pods in said[0] and "--variant gpushare40" in said[0]
    assert jobs_per_dataset(store) == {"gpushare40": csv_rows(OPENB / pods)}


def test_default_is_preferred_without_a_word(tmp_path: Path) -> None:
    # The bundled folder holds default, gpushare40 and multigpu50: default is read, as before.
    store = tmp_path / "store"
    code, err = ingest(OPENB, "--store", store)
    assert code == 0, err
    assert "warning:" not in err
    assert jobs_per_dataset(store) == {"default": csv_rows(OPENB / "openb_pod_list_default.csv")}


def test_several_variants_without_default_is_an_error_listing_them(tmp_path: Path) -> None:
    folder = folder_with(tmp_path, "openb_pod_list_gpushare40.csv", "openb_pod_list_multigpu50.csv")
    code, err = ingest(folder, "--store", tmp_path / "store")
    assert code == 1
    lines = err.strip().splitlines()
    assert len(lines) == 1 and str(folder) in lines[0]
    assert "gpushare40, multigpu50" in lines[0] and "--variant" in lines[0]


def test_an_explicit_variant_is_read_or_refused(tmp_path: Path) -> None:
    store = tmp_path / "store"
    code, err = ingest(OPENB, "--variant", "multigpu50", "--store", store)
    assert code == 0, err
    assert jobs_per_dataset(store) == {
        "multigpu50": csv_rows(OPENB / "openb_pod_list_multigpu50.csv")
    }
    folder = folder_with(tmp_path, "openb_pod_list_gpushare40.csv")
    code, err = ingest(folder, "--variant", "default", "--store", tmp_path / "other")
    assert code == 1
    assert "no openb_pod_list_default.csv" in err and "pod lists here: gpushare40" in err


@pytest.mark.parametrize("variant", [None, "all"])
def test_node_lists_alone(tmp_path: Path, variant: str | None) -> None:
    # No pod list at all: an error without --variant, the machines alone with --variant all.
    folder = folder_with(tmp_path, "openb_node_list_gpu_node.csv")
    extra = [] if variant is None else ["--variant", variant]
    code, err = ingest(folder, *extra, "--store", tmp_path / "store")
    if variant is None:
        assert code == 1 and "pod lists here: none" in err
    else:
        assert code == 0, err
