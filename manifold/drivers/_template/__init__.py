"""A skeleton for a new driver: copy this folder to ``manifold/drivers/<name>/`` and fill
in what its comments ask for. Discovery skips folders whose name starts with ``_``, so
this one is never registered; the copy is, as soon as it exists.

Nothing is imported here, so the registry can read ``meta`` without ``driver``.
"""
