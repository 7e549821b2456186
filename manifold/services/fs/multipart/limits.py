"""The settings that bound multipart uploads, read in one place."""

from __future__ import annotations

from manifold.errors import Forbidden
from manifold.services.admin.settings import SettingsService

MB = 1 << 20
MIN_CHUNK = MB  # as OpenList: smaller chunks only multiply requests

ENABLED = "multipart_enabled"
CHUNK_SIZE = "multipart_chunk_size"  # MB, OpenList's
MAX_SESSIONS = "multipart_max_sessions"  # open sessions per user
STAGING_BUDGET = "multipart_staging_budget"  # MB of chunks staged at once, all users
IDLE_SECONDS = "multipart_idle_seconds"  # a session idle this long is swept


class Limits:
    def __init__(self, settings: SettingsService) -> None:
        self._settings = settings

    def require_enabled(self) -> None:
        if not self._settings.get_bool(ENABLED):
            raise Forbidden("multipart upload is disabled")

    def chunk_size(self, requested: int) -> int:
        """The setting is the ceiling; a client may ask for less (not under 1 MB)."""
        ceiling = max(self._settings.get_int(CHUNK_SIZE, 10) * MB, MIN_CHUNK)
        if 0 < requested < ceiling:
            return max(requested, MIN_CHUNK)
        return ceiling

    def max_sessions(self) -> int:
        return max(self._settings.get_int(MAX_SESSIONS, 16), 1)

    def staging_budget(self) -> int:
        return max(self._settings.get_int(STAGING_BUDGET, 10240), 0) * MB

    def idle_seconds(self) -> int:
        return max(self._settings.get_int(IDLE_SECONDS, 86400), 1)
