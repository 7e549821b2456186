"""The protocol servers' shared records, as the state offers them: WebDAV lock rows
and S3 multipart upload records (their SQL is ``db.protocol_repo``'s). The protocol
layer reaches the database only through ``manifold.state``."""

from __future__ import annotations

from manifold.db.protocol_repo import DavLockRepo, LockRow, S3UploadRepo, UploadRow

__all__ = ["DavLockRepo", "LockRow", "S3UploadRepo", "UploadRow"]
