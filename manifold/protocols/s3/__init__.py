"""Manifold's tree served as S3 buckets on a port of its own (AList's S3 server).

app.py        the ASGI app: authentication, routing, error rendering
sigv4.py      Signature Version 4 checks; aws-chunked bodies
buckets.py    the ``s3_buckets`` setting; a key to a path, never outside its bucket
listing.py    keys in S3's order, walking the tree only as far as a page needs
listings.py   bucket requests (lists, DeleteObjects)
objects.py    object requests (GET, HEAD, PUT, copy, DELETE)
uploads.py    multipart requests, over ``multipart.py``'s store
errors.py     S3's error codes and the table from Manifold's errors
xml.py        S3's XML documents
"""

from __future__ import annotations

from pathlib import Path

from manifold.protocols.s3.app import S3App
from manifold.protocols.s3.multipart import LocalMultipartStore, MultipartStore
from manifold.services.admin.settings import SettingsService
from manifold.services.auth.users import UserService
from manifold.services.fs.ops import GuardedOps

__all__ = ["LocalMultipartStore", "MultipartStore", "S3App", "s3_app"]


def s3_app(ops: GuardedOps, settings: SettingsService, users: UserService, temp: Path) -> S3App:
    """The S3 server over the file services, its multipart parts under ``temp``."""
    return S3App(ops, settings, users, LocalMultipartStore(temp / "s3-multipart"))
