"""Share links: a window onto some files or a folder, never a door.

A visitor reads a share as its creator would, with the creator's permissions and
base path as they are at the moment of the visit, narrowed to the shared paths:
every read goes through ``GuardedReader`` as a caller whose base path is the shared
file or folder and who cannot see hidden entries. So ``..`` in any spelling, links
and Alias hops that leave the shared folder are refused as they would be for a user
based there (``confine.Confinement``), and the shared path itself is checked
against the creator's own base path too (a link from inside it to outside).

A share that is disabled, expired, used up, or whose creator is gone, disabled,
lost the right to share or no longer reaches a shared path, answers
``ShareInvalid`` on every request. A wrong share password counts against the
client's address as a wrong folder password does (``GuessLimiter``).

An access is one download of a file's bytes from its start (``/sd``): browsing and
the range requests that continue a download are free. Each is taken with one
conditional UPDATE, so concurrent visitors never get more than ``max_accessed``.
"""

from __future__ import annotations

import builtins
import hmac
import re
import secrets
import string
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime

from manifold.db.share_repo import ShareRepo
from manifold.errors import (
    Forbidden,
    InvalidRequest,
    ManifoldError,
    NotFound,
    PermissionDenied,
    RelativePath,
    ShareInvalid,
    ShareNotFound,
    WrongShareCode,
)
from manifold.models import Obj, Perm, Role, Share, User
from manifold.paths import (
    child_path,
    clean_path,
    has_relative_segment,
    is_sub_path,
    split_path,
)
from manifold.services.auth.limiter import GuessLimiter, guessing
from manifold.services.auth.service import Caller
from manifold.services.auth.users import UserService
from manifold.services.fs.read import Found, GuardedReader

MAX_ID_LENGTH = 64
_EPOCH = datetime(1, 1, 1, tzinfo=UTC)
_ID_PATTERN = re.compile(r"^[\w-]+$")
_ID_ALPHABET = string.ascii_letters + string.digits
_ID_LENGTH = 8


@dataclass(slots=True)
class ShareInput:
    """What the Shares page and the file menu send to create or update a share."""

    files: builtins.list[str]
    id: str = ""
    new_id: str = ""
    creator: str = ""
    expires: float | None = None
    pwd: str = field(default="", repr=False)
    accessed: int = 0
    max_accessed: int = 0
    disabled: bool = False
    remark: str = ""
    readme: str = ""
    header: str = ""
    order_by: str = ""
    order_direction: str = ""
    extract_folder: str = ""
    allow_preview: bool = True
    allow_download: bool = True


@dataclass(slots=True)
class ShareView:
    share: Share
    creator: User | None


@dataclass(slots=True)
class Visit:
    """What a visitor sees at a path of a share: one object, or a folder's entries."""

    share: Share
    path: str  # below the share, cleaned
    obj: Obj
    entries: builtins.list[Obj] | None = None


class ShareService:
    def __init__(
        self,
        repo: ShareRepo,
        users: UserService,
        reader: GuardedReader,
        guesses: GuessLimiter,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._repo = repo
        self._users = users
        self._reader = reader
        self._guesses = guesses
        self._clock = clock

    # -- the owner's side ------------------------------------------------------

    async def page(
        self, caller: Caller, page: int, per_page: int
    ) -> tuple[builtins.list[ShareView], int]:
        """The caller's shares; every share for an admin."""
        mine = None if caller.user.is_admin else caller.user.id
        shares, total = await self._repo.page(mine, page, per_page)
        return [await self._view(s) for s in shares], total

    async def get(self, caller: Caller, share_id: str) -> ShareView:
        return await self._view(await self._owned(caller, share_id))

    async def create(self, caller: Caller, data: ShareInput) -> ShareView:
        creator = await self._creator(caller, data.creator)
        if data.id and not _may_choose_id(caller.user):
            raise PermissionDenied()
        share_id = _checked_id(data.id) if data.id else _new_id()
        share = _filled(Share(id=share_id, files=[], creator_id=creator.id), data)
        share.files = await self._checked_files(creator, data.files)
        await self._repo.create(share)
        return ShareView(share, creator)

    async def update(self, caller: Caller, data: ShareInput) -> ShareView:
        old = await self._owned(caller, data.id)
        creator = (
            await self._creator(caller, data.creator)
            if data.creator or not caller.user.is_admin
            else await self._user(old.creator_id)
        )
        if creator is None:
            raise InvalidRequest("no such a user")
        share = _filled(replace(old, creator_id=creator.id), data)
        share.files = await self._checked_files(creator, data.files)
        if data.new_id and data.new_id != old.id:
            if not _may_choose_id(caller.user):
                raise PermissionDenied()
            share.id = _checked_id(data.new_id)
        await self._repo.save(share, old.id)
        return ShareView(share, creator)

    async def delete(self, caller: Caller, share_id: str) -> None:
        await self._repo.delete((await self._owned(caller, share_id)).id)

    async def set_disabled(self, caller: Caller, share_id: str, disabled: bool) -> None:
        await self._repo.set_disabled((await self._owned(caller, share_id)).id, disabled)

    async def _owned(self, caller: Caller, share_id: str) -> Share:
        """The share, when the caller made it or is an admin; another user's share is
        as missing as one that does not exist."""
        share = await self._repo.get(share_id) if share_id else None
        if share is None or not (caller.user.is_admin or share.creator_id == caller.user.id):
            raise NotFound("sharing not found")
        return share

    async def _creator(self, caller: Caller, name: str) -> User:
        """Who the share is made for: the caller, or the named user when an admin asks."""
        if caller.user.is_admin and name:
            user = await self._users.by_name(name)
            if user is None:
                raise InvalidRequest("no such a user")
            return user
        if not _may_share(caller.user):
            raise PermissionDenied()
        return caller.user

    async def _checked_files(self, creator: User, files: builtins.list[str]) -> builtins.list[str]:
        """``files`` cleaned, each inside the creator's base path and readable by them."""
        cleaned = [clean_path(f) for f in files if f.strip()]
        if not cleaned:
            raise InvalidRequest("must add at least 1 object")
        owner = Caller(creator, "")
        for path in cleaned:
            if has_relative_segment(path) or not is_sub_path(creator.base_path, path):
                raise PermissionDenied(f"permission denied to share path [{path}]")
            await self._reader.stat(owner, _below(creator.base_path, path), "")
        return cleaned

    async def _view(self, share: Share) -> ShareView:
        return ShareView(share, await self._user(share.creator_id))

    async def _user(self, user_id: int) -> User | None:
        try:
            return await self._users.get(user_id)
        except ManifoldError:
            return None

    # -- the visitor's side ----------------------------------------------------

    async def visit(self, share_id: str, path: str, pwd: str, client: str, listing: bool) -> Visit:
        """The object at ``path`` of the share, with the folder's entries when
        ``listing``; the share's root holds each shared path when there are several."""
        share, creator = await self._open(share_id, pwd, client)
        if not share.allow_preview:
            raise Forbidden("this share does not allow previews")
        rest = _checked_path(path)
        if len(share.files) > 1 and rest == "/":
            root = Obj(name=share.id, size=0, is_dir=True, modified=_EPOCH)
            entries = await self._roots(share, creator, client) if listing else None
            return Visit(share, rest, root, entries)
        window, below = _window(share, creator, client, rest)
        found = await self._found(window, creator, below)
        if not listing:
            return Visit(share, rest, found.obj)
        if not found.obj.is_dir:
            return Visit(share, rest, found.obj, [])
        listed = await self._reader.list(window, below, "", 1, 0)
        entries = listed.entries
        if self._reader.links_confine(window) and entries:
            inside = [child_path(listed.path, o.name) for o in entries]
            escaping = await self._reader.escaping(window, inside)
            entries = [o for o, p in zip(entries, inside, strict=True) if p not in escaping]
        return Visit(share, rest, found.obj, _ordered(entries, share))

    async def download(
        self, share_id: str, path: str, pwd: str, client: str, counts: bool
    ) -> tuple[Obj, str]:
        """The shared file at ``path`` and its full virtual path, one access taken when
        ``counts``; ``ShareInvalid`` when none is left."""
        share, creator = await self._open(share_id, pwd, client)
        if not share.allow_download:
            raise Forbidden("this share does not allow downloads")
        rest = _checked_path(path)
        if len(share.files) > 1 and rest == "/":
            raise InvalidRequest("cannot get sharing root link")
        window, below = _window(share, creator, client, rest)
        found = await self._found(window, creator, below)
        if found.obj.is_dir:
            raise InvalidRequest("cannot download a folder: its files are downloaded one by one")
        if counts and not await self._repo.take_access(share.id):
            raise ShareInvalid()
        return found.obj, found.path

    async def _open(self, share_id: str, pwd: str, client: str) -> tuple[Share, User]:
        """The share and its creator, once it is valid and ``pwd`` opens it."""
        share = await self._repo.get(share_id) if share_id else None
        if share is None:
            raise ShareNotFound()
        creator = await self._user(share.creator_id)
        if creator is None or not self._valid(share, creator):
            raise ShareInvalid()
        if share.pwd:
            async with guessing(self._guesses if pwd else None, client):
                if not hmac.compare_digest(pwd.encode(), share.pwd.encode()):
                    raise WrongShareCode()
        return share, creator

    def _valid(self, share: Share, creator: User) -> bool:
        if share.disabled or creator.disabled or not _may_share(creator):
            return False
        if share.expires is not None and share.expires <= self._clock():
            return False
        if 0 < share.max_accessed <= share.accessed:
            return False
        return bool(share.files) and all(is_sub_path(creator.base_path, f) for f in share.files)

    async def _found(self, window: Caller, creator: User, below: str) -> Found:
        """``below`` in the window, refused when a link takes it out of the creator's
        own base path (the window's checks stop at the shared path)."""
        found = await self._reader.get(window, below, "")
        await self._reader.confine(Caller(creator, window.client), found.path)
        return found

    async def _roots(self, share: Share, creator: User, client: str) -> builtins.list[Obj]:
        """The shared paths that are there and readable now, each by its name."""
        objs: builtins.list[Obj] = []
        for path in share.files:
            window = Caller(_narrowed(creator, path), client)
            try:
                objs.append((await self._found(window, creator, "/")).obj)
            except ManifoldError:
                continue
        return _ordered(objs, share)


def _may_share(user: User) -> bool:
    return user.is_admin or user.can(Perm.SHARE)


def _may_choose_id(user: User) -> bool:
    return user.is_admin or user.can(Perm.SHARE_CUSTOM_ID)


def _checked_id(share_id: str) -> str:
    if len(share_id) > MAX_ID_LENGTH:
        raise InvalidRequest(f"share id must be at most {MAX_ID_LENGTH} characters")
    if not _ID_PATTERN.match(share_id):
        raise InvalidRequest(
            "share id can only contain letters, numbers, underscores, hyphens, and CJK characters"
        )
    return share_id


def _new_id() -> str:
    return "".join(secrets.choice(_ID_ALPHABET) for _ in range(_ID_LENGTH))


def _filled(share: Share, data: ShareInput) -> Share:
    """``share`` with the settings ``data`` carries."""
    if data.max_accessed < 0 or data.accessed < 0:
        raise InvalidRequest("access counts cannot be negative")
    return replace(
        share,
        expires=data.expires,
        pwd=data.pwd,
        accessed=data.accessed,
        max_accessed=data.max_accessed,
        disabled=data.disabled,
        remark=data.remark,
        readme=data.readme,
        header=data.header,
        order_by=data.order_by,
        order_direction=data.order_direction,
        extract_folder=data.extract_folder,
        allow_preview=data.allow_preview,
        allow_download=data.allow_download,
    )


def _below(base: str, path: str) -> str:
    """``path`` (inside ``base``) relative to ``base``."""
    base = clean_path(base)
    return "/" if path == base else path[len(base.rstrip("/")) :]


def _checked_path(path: str) -> str:
    """A visitor's path below a share: any ``..`` or NUL is refused, not cleaned away."""
    if "\x00" in path or has_relative_segment(path):
        raise RelativePath()
    return clean_path(path)


def _narrowed(creator: User, path: str) -> User:
    """The creator as a visitor reads: based at ``path``, blind to hidden entries."""
    return replace(
        creator,
        base_path=path,
        role=Role.GENERAL,
        permission=creator.permission & ~Perm.SEE_HIDDEN,
    )


def _window(share: Share, creator: User, client: str, rest: str) -> tuple[Caller, str]:
    """The caller that reads ``rest`` of the share, and the path it reads."""
    if len(share.files) == 1:
        return Caller(_narrowed(creator, share.files[0]), client), rest
    name, _, below = rest.lstrip("/").partition("/")
    for path in share.files:
        if split_path(path)[1] == name:
            return Caller(_narrowed(creator, path), client), "/" + below
    raise ShareNotFound(f"failed find child [{name}] of sharing [{share.id}]")


_SORT_KEYS: dict[str, Callable[[Obj], object]] = {
    "name": lambda o: o.name,
    "size": lambda o: o.size,
    "modified": lambda o: o.modified.timestamp(),
}


def _ordered(objs: builtins.list[Obj], share: Share) -> builtins.list[Obj]:
    """``objs`` in the share's order, folders first or last when it says so."""
    key = _SORT_KEYS.get(share.order_by)
    if key is not None:
        objs = sorted(objs, key=key, reverse=share.order_direction == "desc")  # type: ignore[arg-type]
    if share.extract_folder in ("front", "back"):
        front = share.extract_folder == "front"
        objs = sorted(objs, key=lambda o: o.is_dir != front)
    return objs
