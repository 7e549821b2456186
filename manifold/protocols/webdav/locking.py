"""LOCK and UNLOCK, and the check every write passes: the ``If`` header must hold
(else 412) and each lock on what the write touches must have its token named in it
by the user who holds the lock (else 423).

A lock is its holder's: another user's request that names its token still meets
423, an UNLOCK of it answers 403, and ``DAV:lockdiscovery`` shows the lock to
everyone but its token only to its holder. Taking a lock needs what a write of the
path needs (``GuardedOps.check_change``): a lock keeps every other user from writing.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

from starlette.responses import Response

from manifold.errors import FileExists, ManifoldError, ObjectNotFound
from manifold.models import Obj
from manifold.paths import is_sub_path
from manifold.protocols.webdav import render
from manifold.protocols.webdav.exchange import Exchange, Shared
from manifold.protocols.webdav.hrefs import OutsideMount
from manifold.protocols.webdav.locks import (
    BadIf,
    Condition,
    Lock,
    LockConflict,
    new_lock,
    parse_if,
    parse_timeout,
    submitted_tokens,
)
from manifold.protocols.webdav.statuses import DavError
from manifold.protocols.webdav.xmlbody import lockinfo
from manifold.services.fs.ops import etag

XML = "application/xml; charset=utf-8"


async def check_write(dav: Shared, ex: Exchange, path: str, deep: bool = False) -> None:
    """Refuse a write to ``path`` (user-relative) that the ``If`` header or a lock
    forbids; ``deep`` for writes that also end what is below (DELETE, MOVE)."""
    tokens = await check_if(dav, ex)
    full = ex.full_of(path)
    covering = await dav.locks.covering(full)
    if covering and not any(_submitted(ex, lock, tokens) for lock in covering):
        raise DavError(423, "lock-token-submitted")
    if deep:
        for lock in await dav.locks.below(full):
            if lock.path != full and not _submitted(ex, lock, tokens):
                raise DavError(423, "lock-token-submitted")


def _submitted(ex: Exchange, held: Lock, tokens: set[str]) -> bool:
    """Whether the request submits ``held``: names its token, as its holder."""
    return held.token in tokens and held.held_by(ex.caller.user.id)


async def check_if(dav: Shared, ex: Exchange) -> set[str]:
    """The lock tokens the ``If`` header names, once it is found to hold."""
    header = ex.header("if")
    if not header:
        return set()
    try:
        lists = parse_if(header)
    except BadIf:
        raise DavError(400, message="unreadable If header") from None
    for item in lists:
        path = ex.path
        if item.resource:
            try:
                path = dav.hrefs.destination(item.resource, ex.header("host"))
            except OutsideMount:
                continue
        if await _holds(dav, ex, path, item.conditions):
            return submitted_tokens(lists)
    raise DavError(412)


async def _holds(dav: Shared, ex: Exchange, path: str, conditions: tuple[Condition, ...]) -> bool:
    full = ex.full_of(path)
    tokens = {lock.token for lock in await dav.locks.covering(full)}
    tag: str | None = None
    for condition in conditions:
        if condition.token:
            ok = condition.token in tokens
        else:
            if tag is None:
                tag = await _etag_of(dav, ex, path)
            ok = tag == condition.etag
        if ok == condition.negated:
            return False
    return True


async def _etag_of(dav: Shared, ex: Exchange, path: str) -> str:
    try:
        obj = await dav.ops.stat(ex.caller, path)
    except ManifoldError:
        return ""
    return etag(obj)


async def lock(dav: Shared, ex: Exchange) -> Response:
    await dav.ops.check_change(ex.caller, ex.path)
    info = lockinfo(await ex.body())
    timeout = parse_timeout(ex.header("timeout"))
    if info is None:
        return await _refresh(dav, ex, timeout)
    depth = ex.header("depth", "infinity").lower()
    if depth not in ("0", "infinity"):
        raise DavError(400, message="Depth must be 0 or infinity")
    await check_if(dav, ex)
    free = await _existing(dav, ex) is None
    held = new_lock(
        ex.full, depth == "infinity", info.exclusive, info.owner, timeout,
        holder=ex.caller.user.id,
    )  # fmt: skip
    try:
        await dav.locks.create(held)
    except LockConflict:
        raise DavError(423, "no-conflicting-lock") from None
    created = free and await _placeholder(dav, ex, held)
    return _lock_answer(dav, ex, held, 201 if created else 200)


async def _placeholder(dav: Shared, ex: Exchange, held: Lock) -> bool:
    """Make the empty file a lock on a free name stands for (a lock-null resource),
    in a folder that must be there (else 409). Never over a file: one another client
    stored since the name was looked up keeps its bytes, and is what the lock now
    holds (False)."""
    try:
        await dav.ops.put(ex.caller, ex.path, _nothing(), 0, overwrite=False, strict=True)
    except FileExists:
        return False
    except BaseException:
        await dav.locks.remove(held.token)
        raise
    return True


async def _refresh(dav: Shared, ex: Exchange, seconds: int) -> Response:
    tokens = await check_if(dav, ex)
    for held in await dav.locks.covering(ex.full):
        if _submitted(ex, held, tokens):
            renewed = await dav.locks.refresh(held.token, seconds)
            if renewed is not None:
                return _lock_answer(dav, ex, renewed, 200)
    raise DavError(412, "lock-token-matches-request-uri")


async def unlock(dav: Shared, ex: Exchange) -> Response:
    token = ex.header("lock-token").strip().strip("<>").strip()
    if not token:
        raise DavError(400, message="Lock-Token header missing")
    held = [lock for lock in await dav.locks.covering(ex.full) if lock.token == token]
    if not held:
        raise DavError(409, "lock-token-matches-request-uri")
    if not held[0].held_by(ex.caller.user.id):
        raise DavError(403, message="the lock belongs to another user")
    await dav.locks.remove(token)
    return Response(status_code=204)


async def discovery(dav: Shared, ex: Exchange, full: str) -> str:
    """``DAV:lockdiscovery`` of a full path: every lock on it, the token of those the
    caller holds alone."""
    locks = await dav.locks.covering(full)
    return render.lock_discovery(_entry(dav, ex, lk) for lk in locks)


async def forget_below(dav: Shared, full: str) -> None:
    """End the locks on ``full`` and below (what was there is gone)."""
    for held in await dav.locks.below(full):
        await dav.locks.remove(held.token)


def _root_href(dav: Shared, ex: Exchange, held: Lock) -> str:
    base = ex.full_of("/")
    relative = held.path[len(base.rstrip("/")) :] if is_sub_path(base, held.path) else held.path
    return dav.hrefs.href(relative or "/", False)


def _entry(dav: Shared, ex: Exchange, held: Lock) -> render.ActiveLock:
    token = held.token if held.held_by(ex.caller.user.id) else ""
    return (token, held.exclusive, held.infinite, held.owner, held.timeout,
            _root_href(dav, ex, held))  # fmt: skip


def _lock_answer(dav: Shared, ex: Exchange, held: Lock, status: int) -> Response:
    body = (
        '<?xml version="1.0" encoding="utf-8"?>\n<D:prop xmlns:D="DAV:">'
        f"{render.lock_discovery([_entry(dav, ex, held)])}</D:prop>"
    )
    headers = {"Lock-Token": f"<{held.token}>"}
    return Response(body.encode(), status, headers, media_type=XML)


async def _existing(dav: Shared, ex: Exchange) -> Obj | None:
    try:
        return await dav.ops.stat(ex.caller, ex.path)
    except ObjectNotFound:
        return None


async def _nothing() -> AsyncIterator[bytes]:
    return
    yield b""
