"""The Local driver: a folder on this machine's file system.

Nothing is imported here, so the registry can read ``meta`` without ``driver``.
"""
