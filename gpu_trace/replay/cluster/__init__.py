"""The emulated cluster (being split into spec, state, index and views)."""

from gpu_trace.replay.cluster.state import (
    ANY_TYPE,
    FEW_NODES,
    MILLI,
    UNLIMITED,
    ClusterSpec,
    ClusterState,
    ClusterView,
    from_groups,
    from_trace,
    load_file,
    parse_bytes,
    parse_resources,
    parse_spec,
)

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
