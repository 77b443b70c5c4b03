"""A child process's own peak RSS, for the memory-bound tests that run a fresh process.

Not ``getrusage(RUSAGE_SELF).ru_maxrss``: on Linux a process's ``maxrss`` survives
``execve`` (the old address space's high-water mark is folded into it), and Python
starts a child with ``fork``/``vfork`` + ``exec``, so the child reads at least its
parent's peak. Under a pytest-xdist worker that has grown past 1 GB every child read
more than 1 GB (a hostile-input test failed in CI with a 0.5 GB child), and a
before/after difference read 0 whatever the child did (those tests passed vacuously).
``VmHWM`` in ``/proc/self/status`` is the peak of the child's own address space.
"""

OWN_PEAK_KIB = (
    "int(next(ln.split()[1] for ln in open('/proc/self/status') if ln.startswith('VmHWM:')))"
)
"""A Python expression (for ``python -c`` code) giving this process's own peak RSS, KiB."""
