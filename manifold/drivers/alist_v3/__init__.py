"""The AList V3 driver: a folder of another AList v3 (or Manifold) server, through its
JSON API.

Nothing is imported here, so the registry can read ``meta`` without ``driver``.
"""
