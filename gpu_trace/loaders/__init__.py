"""Raw trace loaders: each turns one input format into canonical batches.

Each loader module declares itself with a module-level ``PLUGIN``
(:class:`gpu_trace.plugins.LoaderPlugin`: name, options with help text); ``LOADERS``
maps every declared name (the ``gpu-trace ingest <source>`` argument), built-in or
installed through the ``gpu_trace.loaders`` entry-point group, to its loader. It is
built on first use, so importing one loader module does not import them all.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from functools import cache

from gpu_trace import plugins
from gpu_trace.loaders.base import Batch, IngestReport, Loader, ingest


@cache
def _all() -> dict[str, Loader]:
    return {p.name: p.loader() for p in plugins.loaders()}


@cache
def get(name: str) -> Loader:
    """The loader declared as ``name``, importing only its own module when it is a
    built-in (:func:`gpu_trace.plugins.loader`); an unknown name is a usage error with
    "did you mean" (:func:`gpu_trace.plugins.lookup`).
    """
    loader: Loader = plugins.loader(name).loader()
    return loader


class _Loaders(Mapping[str, Loader]):
    """Name -> loader, from the declarations (a plain mapping: ``in`` and ``KeyError``
    behave as usual; :func:`get` is the lookup with a suggestion).
    """

    def __getitem__(self, name: str) -> Loader:
        return _all()[name]

    def __iter__(self) -> Iterator[str]:
        return iter(_all())

    def __len__(self) -> int:
        return len(_all())


LOADERS: Mapping[str, Loader] = _Loaders()

__all__ = ["LOADERS", "Batch", "IngestReport", "Loader", "get", "ingest"]
