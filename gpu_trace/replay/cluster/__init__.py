"""The emulated cluster a replay schedules onto.

Four parts, each readable alone:

- :mod:`.spec`: what a user describes (nodes x GPUs x type, quotas, CPU / memory), and
  :mod:`.sources`: specs read from cluster files or the trace's own inventory;
- :mod:`.state`: the mutable allocation state the engine changes (the hot path);
- :mod:`.index`: the ordered free-capacity index that answers placement queries in
  O(log G) on any node size (its special cases are its own);
- :mod:`.views`: the read-only view policies get.

The public names are re-exported here, so ``from gpu_trace.replay.cluster import X``
does not depend on which module holds X.
"""

from gpu_trace.replay.cluster.sources import from_trace, load_file
from gpu_trace.replay.cluster.spec import (
    ANY_TYPE,
    MILLI,
    UNLIMITED,
    ClusterSpec,
    from_groups,
    parse_bytes,
    parse_resources,
    parse_spec,
)
from gpu_trace.replay.cluster.state import FEW_NODES, ClusterState
from gpu_trace.replay.cluster.views import ClusterView

__all__ = [
    "ANY_TYPE",
    "FEW_NODES",
    "MILLI",
    "UNLIMITED",
    "ClusterSpec",
    "ClusterState",
    "ClusterView",
    "from_groups",
    "from_trace",
    "load_file",
    "parse_bytes",
    "parse_resources",
    "parse_spec",
]
