"""Manifold: one path tree over many storages, served with the AList v3 API."""

from __future__ import annotations

# The AList API level implemented comes first, so clients that check it work.
API_LEVEL = "v3.45.0"
__version__ = "3.45.0.1"
VERSION_STRING = f"{API_LEVEL} (Manifold {__version__})"
