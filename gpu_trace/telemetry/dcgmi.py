"""Moved to ``gpu_trace.loaders.dcgmi``; this old path is an alias of that module."""

import importlib
import sys

sys.modules[__name__] = importlib.import_module("gpu_trace.loaders.dcgmi")
