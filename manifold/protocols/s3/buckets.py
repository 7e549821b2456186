"""The buckets (setting ``s3_buckets``) and the one way a key becomes a path.

A bucket is a name for a folder of the tree, which is the root its requests are held
in (``Context.caller``). ``Bucket.path_of`` is the only place a key turns into a path
in that root: any ``..`` segment (in whichever spelling reached us: the URL is decoded
once, backslashes count as slashes) and NUL are refused, leading slashes are dropped.
Where the path really leads, through links and Aliases, the file services decide, as
they do for a user's base path.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass

from manifold.errors import ManifoldError
from manifold.paths import clean_path, join_base
from manifold.protocols.s3.errors import S3Error

log = logging.getLogger("manifold.s3")

MAX_KEY_BYTES = 1024


@dataclass(frozen=True, slots=True)
class Bucket:
    name: str
    path: str

    def path_of(self, key: str) -> str:
        """The path of ``key`` in the bucket's root; a key with a ``..`` is refused."""
        if len(key.encode("utf-8", "surrogatepass")) > MAX_KEY_BYTES:
            raise S3Error("KeyTooLongError", "Your key is too long", f"/{self.name}/{key}")
        try:
            return join_base("/", key)
        except ManifoldError as exc:
            raise S3Error("AccessDenied", "key leaves the bucket", f"/{self.name}/{key}") from exc


def parse_buckets(text: str) -> dict[str, Bucket]:
    """The setting's JSON ``[{"name", "path"}]``; an entry that is not one is skipped."""
    try:
        entries = json.loads(text or "[]")
    except ValueError:
        log.warning("s3_buckets is not JSON; no bucket is served")
        return {}
    found: dict[str, Bucket] = {}
    for entry in entries if isinstance(entries, list) else []:
        name = entry.get("name") if isinstance(entry, dict) else None
        path = entry.get("path") if isinstance(entry, dict) else None
        if isinstance(name, str) and name and "/" not in name and isinstance(path, str):
            found[name] = Bucket(name, clean_path(path))
    return found
