"""What an object carries besides its bytes, for a protocol that has such a thing: the
ETag of an S3 multipart upload and the headers kept with an object (``x-amz-meta-*``,
``Content-Type`` ...).

A note lives in the property store (``PropStore``, the table of WebDAV's dead
properties) by the object's full path, under a name no WebDAV client can give, with
the version of the object it was kept for (``ops.etag``: size and time). It is the
object's while that version holds: the file written again by any protocol, or another
file put in its place, has another size or time and the note is ignored (and replaced
by the next note kept there). A WebDAV MOVE or COPY takes it along as it takes dead
properties; a move by another route leaves it behind, and the moved object has none.
"""

from __future__ import annotations

import builtins
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from manifold.errors import PermissionDenied
from manifold.models import Obj
from manifold.services.auth.service import Caller
from manifold.services.fs.ops import GuardedOps, etag, protocol_allows
from manifold.services.fs.props import INTERNAL, PropStore
from manifold.services.fs.read import GuardedReader

NAME = f"{INTERNAL}object"


@dataclass(frozen=True, slots=True)
class Note:
    etag: str = ""  # the entity tag to give instead of the one made up from the version
    meta: Mapping[str, str] = field(default_factory=dict)  # headers, by lower-case name

    def __bool__(self) -> bool:
        return bool(self.etag or self.meta)


class ObjectNotes:
    def __init__(self, fs: GuardedReader, ops: GuardedOps, store: PropStore) -> None:
        self._fs = fs
        self._ops = ops
        self._store = store

    async def stat(self, caller: Caller, path: str) -> tuple[Obj, Note]:
        """``GuardedOps.stat`` with the object's note (empty when it has none)."""
        obj = await self._ops.stat(caller, path)
        notes = await self._notes([(self._fs.resolve(caller, path), obj)])
        return obj, notes[0]

    async def listed(
        self, caller: Caller, entries: Sequence[tuple[str, Obj]]
    ) -> builtins.list[Note]:
        """The notes of objects the caller has just been given by ``GuardedOps.list``
        (their paths as the caller names them), in one query."""
        if not protocol_allows(caller, write=False):
            raise PermissionDenied()
        return await self._notes([(self._fs.resolve(caller, p), obj) for p, obj in entries])

    async def keep(self, caller: Caller, path: str, note: Note) -> None:
        """Keep ``note`` for the file at ``path`` as it is now (an empty note drops the
        one it had), where the caller may write that file."""
        await self._ops.check_put(caller, path)
        full = self._fs.resolve(caller, path)
        obj, _ = await self._fs.get_path(full)
        value = {"version": etag(obj), "etag": note.etag, "meta": dict(note.meta)}
        added = [(full, NAME, json.dumps(value))] if note and not obj.is_dir else []
        await self._store.replace([(full, NAME)], added)

    async def forget(self, caller: Caller, path: str) -> None:
        """Drop the note of a file the caller has removed."""
        await self._ops.check_put(caller, path)
        full = self._fs.resolve(caller, path)
        await self._store.replace([(full, NAME)], [])

    async def _notes(self, entries: Sequence[tuple[str, Obj]]) -> builtins.list[Note]:
        files = [full for full, obj in entries if not obj.is_dir]
        rows = await self._store.named(NAME, files) if files else []
        values = {path: value for path, _, value in rows}
        return [_note_of(values.get(full), obj) for full, obj in entries]


def _note_of(value: str | None, obj: Obj) -> Note:
    """The note stored as ``value``, if it was kept for this version of ``obj``."""
    if value is None or obj.is_dir:
        return Note()
    try:
        found = json.loads(value)
    except ValueError:
        return Note()
    if not isinstance(found, dict) or found.get("version") != etag(obj):
        return Note()
    meta = found.get("meta")
    meta = {str(k): str(v) for k, v in meta.items()} if isinstance(meta, dict) else {}
    return Note(str(found.get("etag") or ""), meta)
