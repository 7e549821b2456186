"""Manifold: one path tree over many storages, served with the AList v3 API."""

from __future__ import annotations

# The AList version clients see in the ``version`` setting, exactly: they parse it.
API_LEVEL = "v3.45.0"
__version__ = "3.45.0.1"
# Manifold's own version, for ``manifold --version`` and the ``manifold_version`` setting.
VERSION_STRING = f"{API_LEVEL} (Manifold {__version__})"
