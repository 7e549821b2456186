"""Secret storage options as the admin API shows them: masked, and kept when an edit
sends the mask back.

A driver marks an option ``option(secret=True)`` (a whole rclone config section, say):
its value never leaves the server again once saved. The admin page edits a storage by
sending back what it was shown, so a mask that comes back means "unchanged"; any other
value replaces the secret.
"""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

from manifold.drivers.options import secret_options
from manifold.drivers.registry import DriverRegistry
from manifold.errors import NotFound
from manifold.models import Storage

MASK = "******"


def masked(registry: DriverRegistry, storage: Storage) -> Storage:
    """``storage`` with each secret option that holds a value shown as ``MASK``."""
    names, addition = _secrets(registry, storage)
    if not names or addition is None:
        return storage
    for name in names:
        if addition.get(name):
            addition[name] = MASK
    return replace(storage, addition=json.dumps(addition))


def unmasked(registry: DriverRegistry, storage: Storage, old: Storage) -> Storage:
    """``storage`` as edited, each secret option sent back as ``MASK`` set to its value
    in ``old`` (the stored storage) again."""
    names, addition = _secrets(registry, storage)
    if not names or addition is None:
        return storage
    before = _parsed(old.addition) or {}
    kept = [name for name in names if addition.get(name) == MASK]
    if not kept:
        return storage
    for name in kept:
        addition[name] = before.get(name, "")
    return replace(storage, addition=json.dumps(addition))


def _secrets(registry: DriverRegistry, storage: Storage) -> tuple[list[str], dict[str, Any] | None]:
    try:
        names = secret_options(registry.get(storage.driver).options)
    except NotFound:
        return [], None
    return names, _parsed(storage.addition) if names else None


def _parsed(addition: str) -> dict[str, Any] | None:
    try:
        found = json.loads(addition or "{}")
    except ValueError:
        return None
    return found if isinstance(found, dict) else None
