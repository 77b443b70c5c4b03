"""Replay policies: admission, scheduling and placement, registered by name in
:mod:`gpu_trace.replay.policies.base`.
"""
