"""Strm (OpenList): a read-only tree of ``.strm`` files for media servers (Jellyfin,
Emby, Kodi) over other paths of this server's tree.

Each line of ``paths`` is ``name:/path`` or ``/path`` (named by its base name), as
Alias's; with a single name the root shows that path's contents. Below them, folders
are shown as they are; a file whose extension is in ``filterFileTypes`` (and at least
``minFileSize`` MB) shows as ``<stem>.strm``, whose content is this server's ``/d``
link of the file; one in ``downloadFileTypes`` (subtitles) is passed through, bytes
and all; anything else is left out. Two files that would show under one name (``a.mkv``
and ``a.mp4``): the first listed is shown.

The link is ``<site><PathPrefix><path>``, the path percent-encoded unless
``encodePath`` is off, the site ``siteUrl`` or else the server's ``site_url``
(``withoutUrl``: no site at all). It carries a sign whenever ``/d`` asks one of that
path (its storage signs, a password covers it, ``sign_all``), from the server's own
signer, and always with ``withSign``: a ``.strm`` file never holds a link that the
server would refuse.
"""

from __future__ import annotations

import builtins
import posixpath
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from urllib.parse import quote

from manifold.drivers.alias.driver import parse_paths
from manifold.drivers.base import Driver, LinkArgs, VirtualTree
from manifold.drivers.strm.meta import PASSED_TYPES, VIDEO_TYPES, Addition
from manifold.errors import InvalidRequest, NotAFile, NotAFolder, ObjectNotFound, ServerError
from manifold.models import Link, Obj
from manifold.paths import is_sub_path

STRM_ID = "strm"
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


class StrmDriver(Driver[Addition]):
    _targets: dict[str, list[str]]
    _videos: frozenset[str]
    _passed: frozenset[str]

    async def init(self) -> None:
        options = self.options
        self._targets = parse_paths(options.paths)
        if not self._targets:
            raise InvalidRequest("paths is required")
        self._refuse_loops()
        self._videos = _types(options.filterFileTypes or VIDEO_TYPES)
        self._passed = _types(options.downloadFileTypes or PASSED_TYPES)
        if options.minFileSize < 0:
            raise InvalidRequest("minFileSize must not be negative")
        if not options.withoutUrl and not self._site():
            raise InvalidRequest(
                "siteUrl is required when the server has no site_url (or turn on withoutUrl)"
            )
        if not options.withoutUrl and not self._site().startswith(("http://", "https://")):
            raise InvalidRequest("siteUrl must start with http:// or https://")

    def _refuse_loops(self) -> None:
        mount = self.storage.mount_path.rstrip("/") or "/"
        for targets in self._targets.values():
            for target in targets:
                if mount == "/" or is_sub_path(mount, target):
                    raise InvalidRequest(f"strm path {target} lies inside the strm storage")
                if is_sub_path(target, mount):
                    raise InvalidRequest(f"strm path {target} holds the strm storage")

    async def drop(self) -> None:
        return None

    async def list(self, dir: Obj) -> builtins.list[Obj]:
        if not dir.is_dir:
            raise NotAFolder()
        path = dir.path or "/"
        if path == "/" and len(self._targets) > 1:
            modified = self.storage.modified or _EPOCH
            return [Obj(name, 0, True, modified, path="/" + name) for name in self._targets]
        shown: dict[str, Obj] = {}
        found = False
        for real in self._real_paths(path):
            try:
                children = await self._tree().list_path(real)
            except (ObjectNotFound, NotAFolder):
                continue
            found = True
            for child in children:
                obj = self._shown(path, real, child)
                if obj is not None and obj.name not in shown:
                    shown[obj.name] = obj
        if not found:
            raise ObjectNotFound()
        return list(shown.values())

    async def get(self, path: str) -> Obj:
        if path == "/":
            return await self.root_obj()
        folder, name = posixpath.split(path)
        parent = Obj(posixpath.basename(folder), 0, True, _EPOCH, path=folder)
        for obj in await self.list(parent):
            if obj.name == name:
                return obj
        raise ObjectNotFound()

    async def link(self, file: Obj, args: LinkArgs) -> Link:
        if file.is_dir:
            raise NotAFile()
        if file.id != STRM_ID:
            return await self._tree().link_path(file.path, args)
        content = self._content(file.path)
        return Link(reader=lambda offset, length: _slice(content, offset, length))

    def _shown(self, folder: str, real_folder: str, child: Obj) -> Obj | None:
        """How ``child`` of the real folder shows here (None: left out). A folder's
        path is this storage's; a file's is the real one, which its link needs."""
        if child.is_dir:
            path = posixpath.join(folder, child.name)
            return Obj(child.name, 0, True, child.modified, child.created, path)
        real = posixpath.join(real_folder, child.name)
        stem, dot, ext = child.name.rpartition(".")
        ext = ext.lower() if dot else ""
        if ext in self._passed:
            return Obj(child.name, child.size, False, child.modified, child.created, real)
        if ext not in self._videos or child.size < self.options.minFileSize * 1024 * 1024:
            return None
        size = len(self._content(real))
        return Obj(f"{stem}.strm", size, False, child.modified, child.created, real, STRM_ID)

    def _content(self, real: str) -> bytes:
        """What the ``.strm`` file of the file at ``real`` holds: its ``/d`` link."""
        options = self.options
        link = quote(real) if options.encodePath else real
        sign = self.resources.download_sign(real, options.withSign)
        if sign:
            link += "?sign=" + sign
        prefix = options.PathPrefix.strip().rstrip("/")
        link = "/" + (prefix + link).lstrip("/")
        return (link if options.withoutUrl else self._site() + link).encode()

    def _site(self) -> str:
        return (self.options.siteUrl.strip() or self.resources.site_url).rstrip("/")

    def _real_paths(self, path: str) -> builtins.list[str]:
        if len(self._targets) == 1:
            (targets,) = self._targets.values()
            rest = path
        else:
            name, _, rest = path.lstrip("/").partition("/")
            targets = self._targets.get(name, [])
        return [posixpath.normpath(posixpath.join(t, rest.lstrip("/"))) for t in targets]

    def _tree(self) -> VirtualTree:
        if self.tree is None:
            raise ServerError("strm is not connected to the tree")
        return self.tree


def _types(text: str) -> frozenset[str]:
    return frozenset(t.strip().lower().lstrip(".") for t in text.split(",") if t.strip())


async def _slice(content: bytes, offset: int, length: int | None) -> AsyncIterator[bytes]:
    end = len(content) if length is None else offset + length
    if offset < len(content):
        yield content[offset:end]


DRIVER = StrmDriver
