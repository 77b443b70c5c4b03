"""Replica schedulers (plugin kind ``batching``): which waiting requests join a replica's
next iteration and how much of their prompts it computes. One file each.
"""
