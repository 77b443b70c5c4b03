"""Admission policies: whether an arriving job may ever run (one module per policy,
declared in its module-level ``PLUGINS`` or ``PLUGIN``).
"""
