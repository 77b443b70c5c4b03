"""A new scheduler, a new placement and a new preemptive policy are each one file (issue
28): the three files below are dropped into a copy of the ``gpu_trace`` package
(``replay/scheduling/`` and ``replay/placement/``), nothing else is touched, and a replay
in a subprocess with that copy first on ``PYTHONPATH`` runs each of them by name.

Every schedule is worked out by hand from the policy's own definition (in each file's
docstring), start by start and stop by stop (the engine's start / stop log: time, job,
node). Cluster specs: ``4x4`` is one node of 4 GPUs, ``8x4`` two nodes of 4 (0 and 1).
Jobs are (arrival s, run s, GPUs); restore time 0, so a preempted job keeps all its work.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

LIFO = '''
"""``lifo``: the newest waiting job first; it blocks the older ones until it fits."""

from gpu_trace.plugins import PolicyPlugin
from gpu_trace.replay.policy import PolicyBase


class Lifo(PolicyBase):
    """Newest job first, strict."""

    def __init__(self, config, engine):
        super().__init__(config, engine)
        self.stack = []

    def on_arrival(self, j):
        self.stack.append(j)

    def schedule(self):
        while self.stack and self.e.try_start(self.stack[-1]):
            self.stack.pop()


PLUGIN = PolicyPlugin("scheduler", "lifo", Lifo)
'''

LAST_FIT = '''
"""``last-fit``: the highest-numbered node that can hold the job."""

import numpy as np

from gpu_trace.plugins import PolicyPlugin
from gpu_trace.replay.placement.base import PlacementBase


class LastFit(PlacementBase):
    """The last node that fits."""

    def place(self, j, ngpu, milli, mask):
        fits = np.flatnonzero(self.fits_np(ngpu, milli, mask, j))
        return self.on_node(int(fits[-1]), ngpu, milli) if fits.size else None


PLUGIN = PolicyPlugin("placement", "last-fit", LastFit)
'''

NEWEST_FIRST = '''
"""``newest-first``: preemptive LIFO: a job that arrived later outranks, and may
preempt, one that arrived earlier."""

from gpu_trace.plugins import PolicyPlugin
from gpu_trace.replay.scheduling.preemptive import Preemptive


class NewestFirst(Preemptive):
    """Newest job first, preempting older ones."""

    def wait_key(self, j):
        return (-self.e.arrival[j], j)

    def run_key(self, j):
        return (-self.e.arrival[j], j)


PLUGIN = PolicyPlugin("scheduler", "newest-first", NewestFirst)
'''

RUN = """
import json, sys
import gpu_trace
from gpu_trace.replay import ReplayConfig, policy, replay
from gpu_trace.replay.cluster import parse_spec
from tests.replay_frames import jobs_frame

CASES = {
    "lifo": ("4x4", "lifo", "consolidate", [(0, 10, 4), (1, 5, 4), (2, 3, 4)]),
    "last-fit": ("8x4", "fifo", "last-fit", [(0, 10, 2), (1, 10, 2), (2, 5, 4)]),
    "newest-first": ("4x4", "newest-first", "consolidate", [(0, 10, 4), (2, 5, 4), (4, 2, 2)]),
}
out = {"package": gpu_trace.__file__, "names": {k: policy.names(k) for k in ("scheduler", "placement")}}
for name, (spec, sched, place, rows) in CASES.items():
    cfg = ReplayConfig(source="t", scheduler=sched, placement=place)
    r = replay(jobs_frame(rows), parse_spec(spec), cfg, record_log=True)
    ids = r.engine.w.frame["job_id"].to_list()
    out[name] = [[t, what, ids[j], sorted({p[0] for p in parts})] for t, what, j, parts in r.engine.log]
json.dump(out, sys.stdout)
"""


def _replay_in_copy(tmp_path: Path) -> dict[str, object]:
    copy = tmp_path / "tree"
    shutil.copytree(
        ROOT / "gpu_trace", copy / "gpu_trace", ignore=shutil.ignore_patterns("__pycache__")
    )
    before = {p.relative_to(copy) for p in copy.rglob("*") if p.is_file()}
    replay_dir = copy / "gpu_trace" / "replay"
    (replay_dir / "scheduling" / "lifo.py").write_text(textwrap.dedent(LIFO))
    (replay_dir / "placement" / "last_fit.py").write_text(textwrap.dedent(LAST_FIT))
    (replay_dir / "scheduling" / "newest_first.py").write_text(textwrap.dedent(NEWEST_FIRST))
    after = {p.relative_to(copy) for p in copy.rglob("*") if p.is_file()}
    assert len(after - before) == 3 and before <= after  # three new files, nothing else
    script = tmp_path / "run.py"
    script.write_text(RUN)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(copy), str(ROOT)])}
    done = subprocess.run(
        [sys.executable, str(script)],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    got: dict[str, object] = json.loads(done.stdout)
    assert str(got["package"]).startswith(str(copy))  # the copy ran, not the repository
    return got


def test_a_scheduler_a_placement_and_a_preemptive_policy_are_one_file_each(
    tmp_path: Path,
) -> None:
    got = _replay_in_copy(tmp_path)
    names = got["names"]
    assert isinstance(names, dict)
    assert {"lifo", "newest-first"} <= set(names["scheduler"])
    assert "last-fit" in names["placement"]

    # lifo on one node of 4: j0 runs 0-10 (alone); j1 (t=1) and j2 (t=2) wait; at 10 the
    # newest, j2, starts (10-13), then j1 (13-18). FIFO would have run j1 first.
    assert got["lifo"] == [
        [0.0, "start", "j0", [0]],
        [10.0, "stop", "j0", [0]],
        [10.0, "start", "j2", [0]],
        [13.0, "stop", "j2", [0]],
        [13.0, "start", "j1", [0]],
        [18.0, "stop", "j1", [0]],
    ]

    # last-fit (FIFO) on two nodes of 4: j0 (2 GPUs) goes to node 1, the last that fits;
    # j1 (2 GPUs, t=1) to node 1 too (2 GPUs left there); j2 (4 GPUs, t=2) fits only on
    # node 0 and starts at once: 2-7. j0 ends at 10, j1 at 11.
    assert got["last-fit"] == [
        [0.0, "start", "j0", [1]],
        [1.0, "start", "j1", [1]],
        [2.0, "start", "j2", [0]],
        [7.0, "stop", "j2", [0]],
        [10.0, "stop", "j0", [1]],
        [11.0, "stop", "j1", [1]],
    ]

    # newest-first on one node of 4, preemptive:
    # t=0  j0 (4 GPUs, 10 s) starts.
    # t=2  j1 (4 GPUs, 5 s) is newer: j0 is preempted after 2 s (8 s left), j1 starts.
    # t=4  j2 (2 GPUs, 2 s) is newer than j1: j1 stops after 2 s (3 s left), j2 starts;
    #      the 2 GPUs left hold neither j1 nor j0, and j2 outranks both: they wait.
    # t=6  j2 ends; j1 (arrived at 2) is newer than j0: j1 runs 6-9.
    # t=9  j1 ends; j0 runs its 8 s left: 9-17.
    assert got["newest-first"] == [
        [0.0, "start", "j0", [0]],
        [2.0, "stop", "j0", [0]],
        [2.0, "start", "j1", [0]],
        [4.0, "stop", "j1", [0]],
        [4.0, "start", "j2", [0]],
        [6.0, "stop", "j2", [0]],
        [6.0, "start", "j1", [0]],
        [9.0, "stop", "j1", [0]],
        [9.0, "start", "j0", [0]],
        [17.0, "stop", "j0", [0]],
    ]
