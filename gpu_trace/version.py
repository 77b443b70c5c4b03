"""The package version, in a module of its own: the store writer, loaders and reports
stamp it into what they write, and importing it from here does not make them depend on
the package's ``__init__`` (the public API layer above them).
"""

from __future__ import annotations

__version__ = "0.1.0"
