"""Resumable multipart uploads (OpenList's ``/api/fs/multipart/*``): sessions in the
database (``service``), chunks in a part store (``store``), bounded by settings
(``limits``), shown as OpenList's snapshot (``snapshot``)."""

from __future__ import annotations

import asyncio
import logging
import time

from manifold.services.fs.multipart.limits import Limits
from manifold.services.fs.multipart.service import InitRequest, MultipartUploads
from manifold.services.fs.multipart.snapshot import Snapshot
from manifold.services.fs.multipart.store import PartStore, StagingStore

__all__ = [
    "InitRequest",
    "Limits",
    "MultipartUploads",
    "PartStore",
    "Snapshot",
    "StagingStore",
    "keep_swept",
]

log = logging.getLogger("manifold.multipart")


async def keep_swept(uploads: MultipartUploads, tick: float = 5.0) -> None:
    """Sweep idle sessions every quarter of the idle setting (at most every 5 minutes),
    until cancelled; the setting is read again at each ``tick``, so a change to it
    takes effect within one."""
    last = time.monotonic()
    while True:
        await asyncio.sleep(tick)
        if time.monotonic() - last < min(max(uploads.limits.idle_seconds() / 4, 1.0), 300.0):
            continue
        last = time.monotonic()
        try:
            await uploads.sweep()
        except Exception as exc:  # never an unhandled error in a background task
            log.warning("sweeping the multipart uploads failed: %s", exc)
