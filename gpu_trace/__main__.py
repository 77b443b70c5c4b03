"""``python -m gpu_trace``: the same command line as the ``gpu-trace`` script."""

from gpu_trace.cli import main

main()
