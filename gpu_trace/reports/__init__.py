"""HTML reports built from the store: self-contained pages (Vega inlined once, no
network) that name the data they were built from.
"""

from gpu_trace.reports.site import build_site

__all__ = ["build_site"]
