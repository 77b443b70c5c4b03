"""Ingest fuzz campaign: ``python -m bench.fuzz --cases 10000 --seed 0 --out bench/out/fuzz``
(``make fuzz``; not part of ``make test``).

Each case takes one seed input of one ingest kind (bundled samples, test fixtures and
small ``gpu-trace synth`` outputs), mutates it (``bench.fuzz_mutators``), writes it into a
temp folder under the name its loader expects, and runs ``gpu-trace ingest KIND FILE``
in-process through typer's CliRunner on the real CLI app with a fresh store. Verdicts
(``bench.fuzz_check``):

- ``traceback``: an exception escaped the command, an exit code outside {0, 1, 2}, or
  exit 1 without exactly one ``error:`` line on stderr;
- ``silent_drop``: exit 0 but the store (read back with DuckDB) does not account for
  the harness's own count of the input's records, or its tables disagree with
  ``ingests``;
- ``hang``: the case ran past ``--timeout`` seconds (the worker is killed);
- ``ok`` / ``rejected`` otherwise.

Cases run in one supervised child process, so that a hang or a crash in native code
can be killed and the campaign goes on (a restart, not a pool: parallel runs belong on
Ray, like every other fan-out in gpu-trace). Everything is deterministic per ``--seed``
(case *i* uses ``random.Random(f"{seed}:{i}")``). Every failing case is saved to
``OUT/failures/<kind>/<i>/`` (input tree, ``reason.txt``, ``traceback.txt``,
``repro.sh``); ``OUT/summary.json`` has the per-kind figures. Exit 1 on any failure.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import multiprocessing as mp
import os
import random
import shutil
import sys
import tempfile
import time
import traceback
from collections.abc import Iterator
from dataclasses import dataclass, field
from multiprocessing.connection import Connection, wait
from pathlib import Path
from typing import Any

from bench.fuzz_mutators import mutate

ROOT = Path(__file__).resolve().parents[1]
KINDS = (
    "openb",
    "helios",
    "pai2020",
    "philly",
    "nvidia-smi",
    "dcgmi",
    "prometheus",
    "prometheus-range",
    "chronus",
    "gavel",
    "kubernetes",
    "acme",
    "slurm",
)
SEED_LINES = 40
"""Seed files are cut to their first lines so that each case stays small and fast."""
CLASSES = ("ok", "rejected", "traceback", "silent_drop", "hang")


@dataclass
class Seed:
    """One file to mutate, the folder it sits in and the unmutated files beside it."""

    kind: str
    name: str
    data: bytes
    folder: str = "in"
    companions: dict[str, bytes] = field(default_factory=dict)
    origin: str = ""


def _head(path: Path, lines: int = SEED_LINES) -> bytes:
    with path.open("rb") as fh:
        return b"".join(fh.readline() for _ in range(lines))


SYNTH_JOBS: dict[str, int] = {}
"""Jobs per synth seed where a family needs more than the default 12; big outputs are
cut to their first records."""


def _synth(family: str, out: Path, seed: int) -> list[Path]:
    from typer.testing import CliRunner

    from gpu_trace.cli import app
    from gpu_trace.loaders.provenance import PREFIX

    jobs = str(SYNTH_JOBS.get(family, 12))
    result = CliRunner().invoke(
        app, ["synth", family, "--jobs", jobs, "--seed", str(seed), "--out", str(out)]
    )
    if result.exit_code != 0:
        msg = f"synth {family} failed: {result.output}"
        raise RuntimeError(msg)
    # the manifest beside the files (gpu-trace-synth-<family>.json) is not a trace input
    return sorted(p for p in out.rglob("*") if p.is_file() and not p.name.startswith(PREFIX))


def _json_head(path: Path, records: int = 12) -> bytes:
    """The first records of a JSON-array job log, re-serialized one per line."""
    doc = json.loads(path.read_bytes())[:records]
    return ("[\n" + ",\n".join(json.dumps(r) for r in doc) + "\n]\n").encode()


def _helios_zip(data: Path) -> bytes:
    """The Helios fixture clusters as the upstream ``data.zip`` (deflated members
    ``data/<Cluster>/cluster_*.csv``), to fuzz the archive path too.
    """
    import io
    import zipfile

    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        for f in sorted(data.glob("*/*.csv")):
            info = zipfile.ZipInfo(f"data/{f.parent.name}/{f.name}", (2020, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED
            zf.writestr(info, _head(f))
    return buf.getvalue()


def seeds(work: Path, seed: int, kinds: tuple[str, ...] = KINDS) -> dict[str, list[Seed]]:
    """Every kind's seed inputs: samples, fixtures and fresh synth outputs (synth only
    for the families in ``kinds``).
    """
    s: dict[str, list[Seed]] = {k: [] for k in KINDS}
    samples, fixtures = ROOT / "data/samples", ROOT / "tests/fixtures"
    _job_log_seeds(s, samples, fixtures)
    _telemetry_seeds(s, samples / "telemetry")
    _other_seeds(s, samples, fixtures)
    for family in (
        f for f in ("openb", "helios", "pai2020", "philly", "acme", "slurm") if f in kinds
    ):
        out = work / f"synth-{family}"
        for f in _synth(family, out, seed):
            got = _synth_seed(family, f, f.relative_to(out))
            if got is not None:
                s[family].append(got)
    return s


def _job_log_seeds(s: dict[str, list[Seed]], samples: Path, fixtures: Path) -> None:
    """openb, Helios (also as the upstream zip), PAI 2020 and Philly seeds."""
    for f in sorted((samples / "openb").glob("openb_*.csv")):
        s["openb"].append(Seed("openb", f.name, _head(f), origin=str(f.relative_to(ROOT))))
    for f in sorted((fixtures / "helios/data").glob("*/*.csv")):
        s["helios"].append(
            Seed("helios", f.name, _head(f), f.parent.name, origin=str(f.relative_to(ROOT)))
        )
    for f in sorted((samples / "helios").glob("*_cluster_gpu_number.csv")):
        cluster = f.name.split("_")[0]
        s["helios"].append(
            Seed("helios", "cluster_gpu_number.csv", _head(f), cluster, origin=str(f))
        )
    s["helios"].append(
        Seed(
            "helios",
            "data.zip",
            _helios_zip(fixtures / "helios/data"),
            origin="zip of tests/fixtures/helios/data",
        )
    )
    pai = fixtures / "pai2020/basic"
    headers = {f"headers/{h.name}": h.read_bytes() for h in (pai / "headers").glob("*.header")}
    for f in sorted(pai.glob("pai_*.csv")):
        s["pai2020"].append(
            Seed("pai2020", f.name, _head(f), companions=headers, origin=str(f.relative_to(ROOT)))
        )
    for f in sorted((fixtures / "philly").iterdir()):
        s["philly"].append(Seed("philly", f.name, f.read_bytes(), origin=str(f.relative_to(ROOT))))


def _telemetry_seeds(s: dict[str, list[Seed]], tele: Path) -> None:
    """nvidia-smi, dcgmi, Prometheus exposition and ``query_range`` seeds (the latter
    also as one pretty-printed document).
    """
    for f in sorted(tele.glob("nvidia-smi-*")):
        s["nvidia-smi"].append(
            Seed("nvidia-smi", f.name, _head(f), origin=str(f.relative_to(ROOT)))
        )
    for f in sorted(tele.glob("dcgmi-*")):
        s["dcgmi"].append(Seed("dcgmi", f.name, _head(f), origin=str(f.relative_to(ROOT))))
    for f in sorted(tele.glob("*.prom")):
        s["prometheus"].append(
            Seed("prometheus", f.name, _head(f, 80), origin=str(f.relative_to(ROOT)))
        )
    for f in sorted(tele.glob("prometheus-range-*.jsonl")):
        s["prometheus-range"].append(
            Seed("prometheus-range", f.name, _head(f, 6), origin=str(f.relative_to(ROOT)))
        )
        # the same answers as one pretty-printed document (the single-response form)
        doc = json.loads(f.read_bytes().splitlines()[0])
        s["prometheus-range"].append(
            Seed(
                "prometheus-range",
                "query_range.json",
                json.dumps(doc, indent=1).encode(),
                origin=f"first answer of {f.relative_to(ROOT)}, indented",
            )
        )


def _other_seeds(s: dict[str, list[Seed]], samples: Path, fixtures: Path) -> None:
    """Chronus, Gavel, Kubernetes (also as JSON lines), AcmeTrace and Slurm seeds."""
    for f in sorted((samples / "processed/chronus").glob("*.csv")):
        s["chronus"].append(Seed("chronus", f.name, _head(f), origin=str(f.relative_to(ROOT))))
    for f in sorted((samples / "processed/gavel").glob("*.trace")):
        s["gavel"].append(Seed("gavel", f.name, _head(f), origin=str(f.relative_to(ROOT))))
    for f in sorted((samples / "kubernetes").glob("*.json")):
        # the pretty-printed List, and the same items as JSON lines
        s["kubernetes"].append(
            Seed("kubernetes", f.name, f.read_bytes(), origin=str(f.relative_to(ROOT)))
        )
        items = json.loads(f.read_bytes())["items"]
        lines = "".join(json.dumps(i) + "\n" for i in items).encode()
        s["kubernetes"].append(
            Seed("kubernetes", f"{f.stem}.jsonl", lines, origin=f"{f.name} as JSON lines")
        )
    for f in sorted((samples / "acme").rglob("*.csv")):
        s["acme"].append(
            Seed("acme", f.name, _head(f), f.parent.name, origin=str(f.relative_to(ROOT)))
        )
    for f in [*sorted((samples / "slurm").glob("*.psv")), *sorted((fixtures / "slurm").glob("*"))]:
        s["slurm"].append(Seed("slurm", f.name, _head(f), origin=str(f.relative_to(ROOT))))


def _synth_seed(family: str, f: Path, rel: Path) -> Seed | None:
    """The seed made from one file ``gpu-trace synth family`` wrote (None: a file the
    family's ingest is not given, e.g. PAI headers, which travel as companions).
    """
    if family == "pai2020":
        if f.suffix != ".csv":
            return None
        beside = {str(h.relative_to(f.parent)): h.read_bytes() for h in f.parent.rglob("*.header")}
        return Seed(family, f.name, _head(f), companions=beside, origin=f"synth {rel}")
    if family == "helios":
        if f.suffix != ".csv":
            return None
        return Seed(family, f.name, _head(f), f.parent.name, origin=f"synth {rel}")
    if family == "philly":
        if not f.name.startswith("cluster_"):
            return None
        data = _json_head(f) if f.name == "cluster_job_log" else _head(f)
        return Seed(family, f.name, data, origin=f"synth {rel}")
    if family == "acme":
        return Seed(family, f.name, _head(f), f.parent.name, origin=f"synth {rel}")
    if f.suffix == ".csv":
        return Seed(family, f.name, _head(f), origin=f"synth {rel}")
    return None


def make_case(
    i: int, seed: int, pool: dict[str, list[Seed]], kinds: tuple[str, ...], *, clean: bool = False
) -> dict[str, Any]:
    """Case ``i``: kinds round-robin, seed file and mutations from its own RNG.
    ``clean``: seed *i* unmutated (calibrates the counting rules: all must be ok).
    """
    rng = random.Random(f"{seed}:{i}")
    kind = kinds[i % len(kinds)]
    base = pool[kind][(i // len(kinds)) % len(pool[kind])] if clean else rng.choice(pool[kind])
    data, applied = (base.data, []) if clean else mutate(base.data, rng)
    companions = dict(base.companions)
    if companions and not clean and rng.random() < 0.1:
        # header damage through the .header file of headerless PAI tables
        key = rng.choice(sorted(companions))
        companions[key], extra = mutate(companions[key], rng)
        applied += [f"{key}:{m}" for m in extra]
    return {
        "i": i,
        "kind": kind,
        "name": base.name,
        "folder": base.folder,
        "data": data,
        "companions": companions,
        "mutators": applied,
        "origin": base.origin,
    }


def write_case(case: dict[str, Any], root: Path) -> Path:
    """Lay the case out under ``root``; returns the path given to ``ingest``."""
    folder = root / case["folder"]
    folder.mkdir(parents=True, exist_ok=True)
    for rel, blob in case["companions"].items():
        (folder / rel).parent.mkdir(parents=True, exist_ok=True)
        (folder / rel).write_bytes(blob)
    target = folder / case["name"]
    target.write_bytes(case["data"])
    return target


_RUNNER: Any = None


def runner() -> Any:
    """Typer's CliRunner over the real app, with the click command built once: typer
    rebuilds it from the annotations on every invoke (~0.15 s, a third of a case).
    Returns (runner, app, command); invoke through :func:`_invoke`, which hands typer the
    built command for that one call only (patching it for good made every later
    ``CliRunner().invoke(other_app)`` in the process run gpu-trace instead).
    """
    global _RUNNER
    if _RUNNER is None:
        import typer.main
        import typer.testing

        from gpu_trace.cli import app

        _RUNNER = (typer.testing.CliRunner(), app, typer.main.get_command(app))
    return _RUNNER


def _invoke(argv: list[str]) -> Any:
    import typer.testing

    cli, app, command = runner()
    saved = typer.testing._get_command  # type: ignore[attr-defined]
    typer.testing._get_command = lambda _app: command  # type: ignore[attr-defined]
    try:
        return cli.invoke(app, argv, catch_exceptions=True)
    finally:
        typer.testing._get_command = saved  # type: ignore[attr-defined]


def _scratch() -> str | None:
    """A tmpfs for the per-case folders when there is one (rmdir on overlay disks is slow)."""
    shm = Path("/dev/shm")
    return str(shm) if shm.is_dir() and os.access(shm, os.W_OK) else None


def run_case(case: dict[str, Any]) -> dict[str, Any]:
    """Run one case in this process and classify it."""
    from bench.fuzz_check import Outcome, classify_exit, expect, read_store, reconcile

    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="gpu-trace-fuzz-", dir=_scratch()) as tmp:
        target = write_case(case, Path(tmp))
        store = Path(tmp) / "store"
        argv = ["ingest", case["kind"], str(target), "--store", str(store)]
        result = _invoke(argv)
        tb = "".join(traceback.format_exception(*result.exc_info)) if result.exc_info else ""
        outcome = classify_exit(result.exit_code, result.exception, result.stderr, tb)
        if outcome is None:
            try:
                exp = expect(case["kind"], case["name"], case["data"])
                why = reconcile(exp, read_store(store, case["kind"]), case["name"])
            except Exception as exc:  # a harness problem must not hide as "ok"
                why = f"harness could not read the store: {type(exc).__name__}: {exc}"
            outcome = Outcome("silent_drop", why) if why else Outcome("ok", "reconciled")
    return {
        "i": case["i"],
        "kind": case["kind"],
        "cls": outcome.cls,
        "reason": outcome.reason,
        "traceback": outcome.traceback,
        "stdout": result.stdout[-2000:] if outcome.cls != "ok" else "",
        "seconds": time.perf_counter() - t0,
    }


def _worker(conn: Connection) -> None:
    os.environ.setdefault("POLARS_MAX_THREADS", "1")
    while True:
        case = conn.recv()
        if case is None:
            return
        try:
            conn.send(run_case(case))
        except Exception as exc:  # the harness itself failed: report as a traceback
            conn.send(
                {
                    "i": case["i"],
                    "kind": case["kind"],
                    "cls": "traceback",
                    "reason": f"harness: {type(exc).__name__}: {exc}",
                    "traceback": traceback.format_exc(),
                    "stdout": "",
                    "seconds": 0.0,
                }
            )


class Worker:
    """One long-lived process that runs cases; killed and replaced after a hang."""

    ctx = mp.get_context("spawn")

    def __init__(self) -> None:
        self.conn, child = self.ctx.Pipe()
        self.proc = self.ctx.Process(target=_worker, args=(child,), daemon=True)
        self.proc.start()
        child.close()
        self.case: dict[str, Any] | None = None
        self.since = 0.0
        self.done = 0

    def submit(self, case: dict[str, Any]) -> None:
        """Send the worker a case and start its clock (for the hang timeout)."""
        self.case, self.since = case, time.perf_counter()
        self.conn.send(case)

    def kill(self) -> None:
        """Kill the process at once (a hang, or a worker that died)."""
        self.proc.kill()
        self.proc.join()

    def stop(self) -> None:
        """Ask the worker to exit, and kill it if it has not within 5 s."""
        with contextlib.suppress(OSError):
            self.conn.send(None)
        self.proc.join(5)
        if self.proc.is_alive():
            self.kill()


def run_all(
    cases: Iterator[dict[str, Any]], *, jobs: int, timeout: float, recycle: int = 400
) -> Iterator[tuple[dict[str, Any], dict[str, Any]]]:
    """Run cases on ``jobs`` workers; yields (case, result) as they finish."""
    workers = [Worker() for _ in range(jobs)]
    pending = iter(cases)
    exhausted = False
    try:
        while True:
            exhausted = _feed(workers, pending, exhausted, recycle)
            busy = [w for w in workers if w.case is not None]
            if not busy:
                return
            ready = wait([w.conn for w in busy], timeout=0.2)
            yield from _collect(workers, ready, time.perf_counter(), timeout)
    finally:
        for w in workers:
            w.stop()


def _feed(
    workers: list[Worker], pending: Iterator[dict[str, Any]], exhausted: bool, recycle: int
) -> bool:
    """Give every idle worker the next case (a worker that ran ``recycle`` cases is
    replaced first, to bound leaks); whether the cases are used up.
    """
    for k, w in enumerate(workers):
        if w.case is None and not exhausted:
            if w.done >= recycle:
                w.stop()
                workers[k] = w = Worker()
            nxt = next(pending, None)
            if nxt is None:
                exhausted = True
            else:
                w.submit(nxt)
    return exhausted


def _collect(
    workers: list[Worker], ready: list[Any], now: float, timeout: float
) -> Iterator[tuple[dict[str, Any], dict[str, Any]]]:
    """The results of the workers that answered; a worker that died or ran past
    ``timeout`` is killed and replaced, its case reported as a traceback or a hang.
    """
    for k, w in enumerate(workers):
        if w.case is None:
            continue
        if w.conn in ready:
            try:
                res = w.conn.recv()
            except EOFError:
                res = _dead(w.case, f"worker died (exit {w.proc.exitcode})", now - w.since)
                w.kill()
                workers[k] = Worker()
                yield w.case, res
                continue
            case, w.case = w.case, None
            w.done += 1
            yield case, res
        elif now - w.since > timeout:
            case = w.case
            w.kill()
            workers[k] = Worker()
            yield case, _dead(case, f"no result after {timeout:g} s", now - w.since, "hang")


def _dead(case: dict[str, Any], why: str, seconds: float, cls: str = "traceback") -> dict[str, Any]:
    return {
        "i": case["i"],
        "kind": case["kind"],
        "cls": cls,
        "reason": why,
        "traceback": "",
        "stdout": "",
        "seconds": seconds,
    }


def save_failure(out: Path, case: dict[str, Any], res: dict[str, Any]) -> Path:
    """A ready reproducer: the input tree, the reason, the traceback and a script."""
    where = out / "failures" / case["kind"] / str(case["i"])
    if where.exists():
        shutil.rmtree(where)
    target = write_case(case, where)
    (where / "reason.txt").write_text(f"{res['cls']}: {res['reason']}\n")
    (where / "traceback.txt").write_text(res["traceback"] or "(none)\n")
    (where / "case.json").write_text(
        json.dumps(
            {k: case[k] for k in ("i", "kind", "name", "folder", "mutators", "origin")}
            | {"stdout": res.get("stdout", ""), "seconds": round(res["seconds"], 3)},
            indent=2,
        )
    )
    rel = target.relative_to(where)
    (where / "repro.sh").write_text(
        "#!/bin/sh\n# run from the repository root\n"
        f'd=$(dirname "$0"); gpu-trace ingest {case["kind"]} "$d/{rel}" --store "$(mktemp -d)/store"\n'
    )
    return where


def signature_of(res: dict[str, Any]) -> str:
    """The dedup key of a result (see :func:`bench.fuzz_check.signature`)."""
    from bench.fuzz_check import Outcome, signature

    return signature(res["kind"], Outcome(res["cls"], res["reason"], res["traceback"]))


def main(argv: list[str] | None = None) -> int:
    """Run the campaign (see the module docstring); exit 1 when any case failed."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--cases", type=int, default=10_000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path, default=ROOT / "bench/out/fuzz")
    ap.add_argument("--kinds", default=",".join(KINDS), help="comma-separated subset")
    ap.add_argument("--timeout", type=float, default=10.0, help="seconds per case (hang)")
    ap.add_argument("--start", type=int, default=0, help="first case index (to rerun one)")
    ap.add_argument("--clean", action="store_true", help="unmutated seeds (calibration)")
    args = ap.parse_args(argv)
    kinds = tuple(k for k in args.kinds.split(",") if k)
    unknown = set(kinds) - set(KINDS)
    if unknown:
        ap.error(f"unknown kinds: {', '.join(sorted(unknown))}")
    out: Path = args.out
    if (out / "failures").exists():
        shutil.rmtree(out / "failures")
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="gpu-trace-fuzz-seeds-") as work:
        pool = seeds(Path(work), args.seed, kinds)
    stats = {k: dict.fromkeys(CLASSES, 0) | {"cases": 0, "seconds": 0.0} for k in kinds}
    sigs: dict[str, dict[str, Any]] = {}
    rejections: dict[str, int] = {}
    cases = (
        make_case(i, args.seed, pool, kinds, clean=args.clean)
        for i in range(args.start, args.start + args.cases)
    )
    for n, (case, res) in enumerate(run_all(cases, jobs=1, timeout=args.timeout), 1):
        st = stats[case["kind"]]
        st["cases"] += 1
        st[res["cls"]] += 1
        st["seconds"] += res["seconds"]
        if res["cls"] == "rejected":
            key = signature_of(res)
            rejections[key] = rejections.get(key, 0) + 1
        if res["cls"] not in ("ok", "rejected"):
            where = save_failure(out, case, res)
            sig = signature_of(res)
            entry = sigs.setdefault(
                sig,
                {
                    "signature": sig,
                    "count": 0,
                    "first": str(where),
                    "reason": res["reason"],
                    "cases": [],
                },
            )
            entry["count"] += 1
            entry["cases"].append(case["i"])
        if n % 500 == 0:
            print(f"  {n}/{args.cases} cases, {time.perf_counter() - t0:.0f} s", file=sys.stderr)
    wall = time.perf_counter() - t0
    summary = {
        "cases": args.cases,
        "seed": args.seed,
        "timeout_s": args.timeout,
        "wall_s": round(wall, 1),
        "per_kind": {k: v | {"seconds": round(v["seconds"], 1)} for k, v in stats.items()},
        "totals": {c: sum(v[c] for v in stats.values()) for c in (*CLASSES, "cases")},
        "signatures": sorted(sigs.values(), key=lambda e: -e["count"]),
        "rejections": dict(sorted(rejections.items(), key=lambda kv: -kv[1])),
    }
    (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    print(table(summary))
    bad = sum(summary["totals"][c] for c in ("traceback", "silent_drop", "hang"))
    print(f"{args.cases} cases in {wall:.0f} s; {bad} failing; summary {out / 'summary.json'}")
    return 1 if bad else 0


def table(summary: dict[str, Any]) -> str:
    """The per-kind counts of each verdict as a plain-text table, for the terminal."""
    cols = ("cases", *CLASSES, "seconds")
    rows = [("kind", *cols)]
    for kind, v in summary["per_kind"].items():
        rows.append((kind, *(str(v[c]) for c in cols)))
    tot = summary["totals"]
    rows.append(("total", *(str(tot.get(c, "")) if c != "seconds" else "" for c in cols)))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "\n".join(
        "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows
    )


if __name__ == "__main__":
    sys.exit(main())
