"""Admission: refuse, at arrival, jobs that could never run on this cluster."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from gpu_trace.plugins import PolicyPlugin
from gpu_trace.replay.cluster import MILLI
from gpu_trace.replay.policy import EngineView, HasView, PolicyBase


@dataclass(frozen=True)
class FitsConfig:
    """Options of the ``fits`` admission policy."""

    multi_node: bool = field(
        default=True,
        metadata={"help": "Admit jobs larger than one node (they span whole nodes)."},
    )


class Fits(PolicyBase):
    """Admit a job only if the empty cluster could hold it: enough GPUs of an allowed
    type (on one node unless multi-node jobs are allowed) and within its VC's quota.
    """

    Config = FitsConfig

    def __init__(self, config: FitsConfig, engine: EngineView | HasView) -> None:
        super().__init__(config, engine)
        self.cache: dict[int, tuple[int, int]] = {}
        self.res_cache: dict[tuple[int, int, int, int], bool] = {}

    def admit(self, j: int) -> str | None:
        """None to admit job ``j``, else why the empty cluster could never run it."""
        e = self.e
        mask = e.mask[j]
        if mask == 0:
            return "GPU type constraint matches no node"
        cap = self.cache.get(mask)
        if cap is None:
            cap = self.cache[mask] = e.state.capacity_for(mask)
        largest, total = cap
        ngpu = e.ngpu[j]
        limit = total if self.config.multi_node else largest
        if ngpu > limit:
            return f"needs {ngpu} GPUs, the cluster has {limit} usable"
        cpu, mem = e.cpu_req[j], e.mem_req[j]
        if cpu or mem:
            key = (mask, cpu, mem, ngpu)
            fits = self.res_cache.get(key)
            if fits is None:
                fits = self.res_cache[key] = self._res_fit(ngpu, cpu, mem, mask, largest)
            if not fits:
                where = "one node" if ngpu <= largest else "the nodes its GPUs need"
                return (
                    f"needs {cpu / 1000:g} CPUs and {mem / 2**30:g} GiB on {where}; "
                    "the cluster never has them"
                )
        quota = e.vc_quota_milli.get(e.vc[j])
        if quota is not None and ngpu * e.milli[j] > quota:
            return f"needs {ngpu * e.milli[j] / MILLI:g} GPUs, above its VC quota"
        return None

    def _res_fit(self, ngpu: int, cpu: int, mem: int, mask: int, largest: int) -> bool:
        """Could the empty cluster hold the job's CPU and memory with its GPUs? One node
        with all of it; a multi-node job holds CPU / memory in proportion to its GPUs on
        each node, so node n can give at most min(GPUs, cap x ngpu / request) GPUs.
        """
        s = self.e.state
        ok = s.node_ok_np(mask)
        gpus = np.asarray(s.node_gpus, dtype=np.int64)
        if ngpu <= largest:
            return bool((ok & (gpus >= ngpu) & (s.cpu_cap >= cpu) & (s.mem_cap >= mem)).any())
        give = gpus.astype(np.float64)  # float: capacities x GPUs would overflow int64
        if cpu:
            give = np.minimum(give, np.floor(s.cpu_cap.astype(np.float64) * ngpu / cpu))
        if mem:
            give = np.minimum(give, np.floor(s.mem_cap.astype(np.float64) * ngpu / mem))
        return int(give[ok].sum()) >= ngpu


PLUGINS = (PolicyPlugin("admission", "fits", Fits, rank=0),)
