"""Routers (plugin kind ``router``): which replica an arriving request goes to. One
file each.
"""
