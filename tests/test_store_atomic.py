"""All-or-nothing store commits: kill -9 at every step of a real ingest, one-snapshot
readers, serialized concurrent writers, migration of the old layout, leftover cleanup."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
from pathlib import Path

import polars as pl
import pytest
from typer.testing import CliRunner

from gpu_trace.cli import app
from gpu_trace.errors import StoreError
from gpu_trace.store.catalog import connect
from gpu_trace.store.generations import snapshot_root
from gpu_trace.store.parquet import StoreTransaction, dataset_path, ensure_layout, read_table
from tests.kill_child import kill_when_paused

runner = CliRunner()
HEADER = "job_id,num_gpu,submit_time,iterations,model_name,duration,interval\n"
V1 = HEADER + "0,1,10,5,vgg,100,1\n1,2,20,5,vgg,100,1\n2,x,30,5,vgg,100,1\n"  # 2 ok + 1 bad
V2 = HEADER + "0,1,10,5,vgg,100,1\n1,2,20,5,vgg,100,1\n2,4,30,5,vgg,100,1\n"  # 3 ok

CHILD = """
import json, os, re, sys, time
from gpu_trace.cli import main
event, index, pattern, marker = json.loads(sys.argv[1])
rx = re.compile(pattern)
def hook(name, args):
    if name == event and len(args) > index and rx.search(str(args[index])):
        open(marker, "w").close()
        time.sleep(600)
sys.addaudithook(hook)
sys.argv = ["gpu-trace", *sys.argv[2:]]
main()
"""


def state(store: Path) -> tuple[int, int, int, int]:
    """(jobs, quarantine rows, rows_written and rows_quarantined the ingests table
    claims) for source chronus, all read from one snapshot."""
    root = snapshot_root(store)
    ingests = read_table(root, "ingests", "chronus").to_pydict()
    return (
        read_table(root, "jobs", "chronus").num_rows,
        read_table(root, "quarantine", "chronus").num_rows,
        sum(ingests["rows_written"]),
        sum(ingests["rows_quarantined"]),
    )


def hidden(store: Path) -> list[str]:
    return sorted(p.name for p in store.iterdir() if p.name not in (".lock", "current"))


POINTS = [
    # (audit event, argument index, regex on it, what the kill leaves, commit visible?)
    ("os.mkdir", 0, r"\.tx-[^/]+/quarantine$", r"\.tx-", False),  # mid-staging
    ("os.link", 1, r"\.build-", r"\.build-", False),  # building the next generation
    ("os.rename", 1, r"/gen-\d{8}$", r"\.build-", False),  # built, not yet renamed
    ("os.symlink", 1, r"\.current-", r"gen-00000002", False),  # renamed, unpublished
    ("os.rename", 1, r"/current$", r"\.current-", False),  # temp symlink not swapped
    ("shutil.rmtree", 0, r"\.tx-", r"\.tx-", True),  # swapped, tx folder not removed
]


@pytest.mark.parametrize(("event", "index", "pattern", "leftover", "visible"), POINTS)
def test_kill_9_mid_ingest(
    tmp_path: Path, event: str, index: int, pattern: str, leftover: str, visible: bool
) -> None:
    store, src = tmp_path / "store", tmp_path / "trace.csv"
    src.write_text(V1)
    assert runner.invoke(app, ["ingest", "chronus", str(src), "--store", str(store)]).exit_code == 0
    assert state(store) == (2, 1, 2, 1)
    # one generation: a new store's zero-row layout files are published with the first
    # ingest, not in a commit of their own
    assert (store / "current").readlink().name == "gen-00000001"
    before = dataset_path(store, "jobs", "chronus", "trace").read_bytes()

    src.write_text(V2)
    marker = tmp_path / "paused"
    spec = json.dumps([event, index, pattern, str(marker)])
    code = kill_when_paused(
        [CHILD, spec, "ingest", "chronus", str(src), "--store", str(store)], marker, 120
    )
    assert code == -signal.SIGKILL

    # Readers see exactly the old or exactly the new ingest, never a mix.
    assert state(store) == ((3, 0, 3, 0) if visible else (2, 1, 2, 1))
    if not visible:
        assert dataset_path(store, "jobs", "chronus", "trace").read_bytes() == before
    assert any(re.match(leftover, n) for n in hidden(store)), hidden(store)

    # The next run removes every leftover and commits normally.
    result = runner.invoke(app, ["ingest", "chronus", str(src), "--store", str(store)])
    assert result.exit_code == 0, result.output
    assert state(store) == (3, 0, 3, 0)
    names = hidden(store)
    assert all(re.fullmatch(r"gen-\d{8}", n) for n in names), names
    # the first ingest's generation (layout included), the killed run's if it got that
    # far, and the last
    assert len(names) == (3 if visible else 2)
    assert (store / "current").readlink().name == names[-1]
    assert not [p for p in store.rglob("*") if p.name.startswith(".") and p.name != ".lock"]


def jobs(n: int, dataset: str) -> pl.DataFrame:
    return pl.DataFrame(
        {
            "source": ["t"] * n,
            "dataset": [dataset] * n,
            "job_id": [str(i) for i in range(n)],
            "status": ["completed"] * n,
            "time_basis": ["relative"] * n,
        }
    )


def write(store: Path, dataset: str, n: int) -> None:
    with StoreTransaction(store) as tx:
        tx.write("jobs", jobs(n, dataset), source="t", dataset=dataset)


def test_reader_snapshot_is_stable_across_commits(store: Path) -> None:
    write(store, "a", 1)
    snap = snapshot_root(store)
    con = connect(snap)
    write(store, "a", 5)
    write(store, "b", 2)
    # The snapshot (and the connection built on it) still sees the first commit only.
    assert read_table(snap, "jobs").num_rows == 1
    assert con.execute("SELECT count(*) FROM jobs").fetchone() == (1,)
    assert connect(store).execute("SELECT count(*) FROM jobs").fetchone() == (7,)
    assert read_table(store, "jobs").num_rows == 7


def test_concurrent_writers_lose_nothing(store: Path) -> None:
    ensure_layout(store)
    errors: list[BaseException] = []

    def writer(k: int) -> None:
        try:
            for i in range(4):
                write(store, f"w{k}-{i}", k + 1)
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(k,)) for k in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    datasets = read_table(store, "jobs").column("dataset").to_pylist()
    assert sorted(set(datasets)) == sorted(f"w{k}-{i}" for k in range(3) for i in range(4))
    assert len(datasets) == 4 * (1 + 2 + 3)
    assert (store / "current").readlink().name == "gen-00000013"  # layout + 12 commits


def old_layout(store: Path) -> None:
    """Turn a new store into the pre-generation layout, with stale temporaries."""
    gen = snapshot_root(store)
    for table in gen.iterdir():
        table.rename(store / table.name)
    for p in store.glob("gen-*"):
        shutil.rmtree(p)
    (store / "current").unlink()
    (store / ".lock").unlink()
    (store / "jobs" / "source=t" / ".a.parquet.0123abcd.tmp").write_bytes(b"x" * 1000)
    (store / "ingests" / "source=_empty" / ".empty.parquet.ffff.tmp").write_bytes(b"y")


def test_old_layout_is_migrated_on_first_open(store: Path) -> None:
    write(store, "a", 3)
    old_layout(store)
    assert (store / "jobs" / "source=t" / "a.parquet").exists()
    con = connect(store)
    assert con.execute("SELECT count(*) FROM jobs").fetchone() == (3,)
    assert (store / "current").readlink().name == "gen-00000001"
    assert sorted(p.name for p in store.iterdir()) == [".lock", "current", "gen-00000001"]
    assert not list(store.rglob("*.tmp"))
    write(store, "b", 2)
    assert read_table(store, "jobs").num_rows == 5


def test_interrupted_migration_is_finished(store: Path) -> None:
    write(store, "a", 3)
    old_layout(store)
    (store / "gen-00000001").mkdir()
    (store / "jobs").rename(store / "gen-00000001" / "jobs")  # crashed after one table
    write(store, "b", 2)
    assert read_table(store, "jobs").num_rows == 5
    assert sorted(p.name for p in store.iterdir()) == [
        ".lock",
        "current",
        "gen-00000001",
        "gen-00000002",
    ]


def test_migration_refuses_to_merge_over_data(store: Path) -> None:
    write(store, "a", 3)
    old_layout(store)
    (store / "gen-00000001" / "jobs").mkdir(parents=True)
    with pytest.raises(StoreError, match="cannot migrate jobs/"):
        ensure_layout(store)
    assert (store / "jobs" / "source=t" / "a.parquet").exists()


def test_store_copied_without_symlinks_still_commits(store: Path, tmp_path: Path) -> None:
    write(store, "a", 3)
    copy = tmp_path / "copy"
    shutil.copytree(store, copy)  # follows the symlink: `current` becomes a folder
    assert not (copy / "current").is_symlink()
    write(copy, "b", 1)
    assert read_table(copy, "jobs").num_rows == 4
    assert (copy / "current").is_symlink()
    assert read_table(store, "jobs").num_rows == 3


def test_dead_writer_tx_folder_removed_live_one_kept(store: Path) -> None:
    write(store, "a", 1)
    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], stdout=subprocess.PIPE, check=True
    )
    dead_tx = store / f".tx-{int(dead.stdout)}-abc123"
    (dead_tx / "jobs").mkdir(parents=True)
    (dead_tx / "jobs" / "x.parquet").write_bytes(b"z" * 4096)
    live_tx = store / f".tx-{os.getpid()}-def456"
    live_tx.mkdir()
    (store / ".build-999-0a").mkdir()
    (store / ".current-999-0b").symlink_to("gen-00000001")
    ensure_layout(store)
    # one generation: the layout files came with the first write
    assert hidden(store) == [f".tx-{os.getpid()}-def456", "gen-00000001"]
    assert read_table(store, "jobs").num_rows == 1


def test_write_twice_in_one_transaction_raises(store: Path) -> None:
    write(store, "a", 1)
    with (
        pytest.raises(StoreError, match=r"jobs/source=t/a\.parquet is written twice"),
        StoreTransaction(store) as tx,
    ):
        tx.write("jobs", jobs(2, "a"), source="t", dataset="a")
        tx.write("jobs", jobs(3, "a"), source="t", dataset="a")
    assert read_table(store, "jobs").num_rows == 1
    assert hidden(store) == ["gen-00000001"]  # the failed transaction committed nothing


def test_second_interrupt_during_cleanup_still_removes_staging(
    store: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One Ctrl-C can raise KeyboardInterrupt twice (polars raises it from inside a sink,
    Python again from the same pending signal). The second one landing inside the
    clean-up's ``rmtree`` must not leave half a staging folder behind."""
    write(store, "a", 1)
    real_rmtree = shutil.rmtree
    calls: list[str] = []

    def rmtree_cut_short(path: str | os.PathLike[str], *args: object, **kw: object) -> None:
        calls.append(str(path))
        if len(calls) == 1:  # remove part of the folder, then the second interrupt lands
            real_rmtree(next(Path(path).iterdir()))
            raise KeyboardInterrupt
        real_rmtree(path, *args, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(shutil, "rmtree", rmtree_cut_short)
    with pytest.raises(KeyboardInterrupt), StoreTransaction(store) as tx:
        tx.write("jobs", jobs(2, "b"), source="t", dataset="b")
        raise KeyboardInterrupt
    assert len(calls) == 2 and re.search(r"/\.tx-\d+-[0-9a-f]+$", calls[0])
    assert hidden(store) == ["gen-00000001"]
    assert read_table(store, "jobs").num_rows == 1


def test_transaction_never_closed_is_swept_at_exit(store: Path) -> None:
    """A Ctrl-C landing as a transaction leaves its ``with`` block, before its own
    clean-up runs: the process still removes its staging folder on the way out."""
    write(store, "a", 1)
    code = (
        "import sys, polars as pl\n"
        "from pathlib import Path\n"
        "from gpu_trace.store.parquet import StoreTransaction\n"
        "from tests.test_store_atomic import jobs\n"
        "tx = StoreTransaction(Path(sys.argv[1])).__enter__()\n"
        "tx.write('jobs', jobs(2, 'b'), source='t', dataset='b')\n"
        "assert any(p.name.startswith('.tx-') for p in Path(sys.argv[1]).iterdir())\n"
    )
    root = Path(__file__).resolve().parent.parent
    subprocess.run(
        [sys.executable, "-c", code, str(store)],
        cwd=root,
        env={**os.environ, "PYTHONPATH": str(root)},
        check=True,
    )
    assert hidden(store) == ["gen-00000001"]
