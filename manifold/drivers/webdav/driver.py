"""The WebDav driver: a folder of a WebDAV server, over the server's shared HTTP pool.

``Obj.path`` is the object's decoded path on the server below ``address`` (the root
folder's path included); every request URL is ``address`` plus that path, encoded.
Folders are addressed with a trailing slash, as some servers require.

Logging in: Basic by default; a server that refuses it and asks for Digest gets
Digest (``init`` finds out once). Downloads: the file's URL with the Basic
``Authorization`` header, which only this server's proxy sends (the driver is
``only_proxy``); a Digest login or an unverified certificate cannot be handed over
that way, so those storages stream through a range reader of their own instead.

Writes: uploads and copies go to a ``RESERVED_PREFIX`` name in the target folder and
are moved into place when whole (``MOVE`` with ``Overwrite: F`` unless replacing);
listings leave such names out, and sweep stale ones left by a process that died.

A ``?`` in a MOVE or COPY destination is misread by some servers (wsgidav takes it
for the start of a query and stores the object under the name cut there): such
destinations are never sent with ``Overwrite: T``, and one that did not land where it
was sent is reported, moved back where possible. A file with ``?`` in its name is
replaced only on a server seen to keep such a name (the new file is moved to a
temporary name with ``?`` first), and the old one is set aside until the new one is
in place, put back if it cannot be.
"""

from __future__ import annotations

import asyncio
import base64
import builtins
import posixpath
from collections.abc import AsyncGenerator, AsyncIterator
from contextlib import suppress
from dataclasses import replace
from datetime import UTC, datetime
from urllib.parse import quote, urlsplit

import httpx

from manifold.drivers import reach
from manifold.drivers.base import (
    FOLDER_MOVE,
    FOLDER_TIMES,
    Driver,
    ErrorTable,
    LinkArgs,
    Seen,
    Temporaries,
    Temporary,
    Upload,
    check_size,
    gathered,
    is_temporary,
    parking_name,
    translating,
    validate_name,
    waited,
)
from manifold.drivers.helpers import trimmed
from manifold.drivers.progress import LONG_CALL_SECONDS
from manifold.drivers.resources import HTTP_IO_SECONDS, answer_limits
from manifold.errors import (
    InvalidRequest,
    ManifoldError,
    NotAFile,
    NotAFolder,
    NotSupported,
    ObjectExists,
    ObjectNotFound,
    PermissionDenied,
    ServerError,
    TemporaryFailure,
)
from manifold.models import DiskUsage, Link, Obj, Storage

from .meta import Addition
from .multistatus import (
    PROPFIND_BODY,
    QUOTA_BODY,
    Children,
    Entry,
    MultistatusReader,
    parse,
    quota_usage,
)

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
# Bytes of a listing's answer parsed in one go, in a worker thread (``list_pages``).
PARSE_BATCH = 256 << 10
# Seconds ``drop`` gives the clean-ups still under way before leaving them.
DROP_GRACE = 5.0
# Seconds after a cut-off write when its temporary is removed again: the server may
# still be handling it (the client gave up, the server has yet to notice).
RECHECKS = (0.2, 1.0)
CHUNK = 1 << 20
_REDIRECTS = frozenset({301, 302, 307, 308})


def _unreachable(exc: Exception) -> ManifoldError:
    # The client's text names the host and port; the reason is read from its causes.
    detail = str(exc) or type(exc).__name__
    return TemporaryFailure(f"WebDAV server unreachable ({reach.reason(exc)}): {detail}")


_HTTP_ERRORS: ErrorTable = {
    httpx.TransportError: _unreachable,
    httpx.TimeoutException: _unreachable,
    httpx.StreamError: lambda exc: TemporaryFailure(f"WebDAV request failed: {exc}"),
    httpx.HTTPError: lambda exc: ServerError(f"WebDAV request failed: {exc}"),
}


class _LoginRefused(PermissionDenied):
    """A 401: the login was refused; ``digest`` when the server asks for Digest."""

    def __init__(self, message: str, digest: bool) -> None:
        super().__init__(message)
        self.digest = digest


def _offers_digest(response: httpx.Response) -> bool:
    offers = response.headers.get_list("www-authenticate")
    return any(offer.strip().lower().startswith("digest") for offer in offers)


class _WrongCount(Exception):
    """An upload's stream gave more or fewer bytes than its size said."""


def status_error(response: httpx.Response) -> ManifoldError:
    """The ``manifold.errors`` instance for an HTTP error answer."""
    code = response.status_code
    if code in (404, 410):
        return ObjectNotFound()
    if code == 409:  # the parent of the target is missing
        return ObjectNotFound()
    if code == 412:
        return ObjectExists()
    if code in (401, 403):
        return PermissionDenied(f"permission denied by the WebDAV server (HTTP {code})")
    if code == 423 or (code >= 500 and code != 507):
        return TemporaryFailure(f"WebDAV server error: HTTP {code}")
    return ServerError(f"the WebDAV server answered HTTP {code}")


def _basic(username: str, password: str) -> str:
    token = base64.b64encode(f"{username}:{password}".encode()).decode("ascii")
    return f"Basic {token}"


async def _checked_body(upload: Upload, sent: list[int]) -> AsyncIterator[bytes]:
    """The upload's bytes, stopping before the last one when the count is wrong, so a
    server never sees a complete body of the wrong size."""
    async for data in upload.stream:
        sent[0] += len(data)
        if upload.size is not None and sent[0] > upload.size:
            raise _WrongCount()
        yield data
    if upload.size is not None and sent[0] != upload.size:
        raise _WrongCount()


class WebDavDriver(Driver[Addition]):
    # Not EXCLUSIVE_CREATE: ``Overwrite: F`` is a precondition the server checks and
    # then acts on in a second step (wsgidav looks, then renames), so two racing moves
    # to one free name can both succeed. Folder times are promised per storage, when
    # the server reports a modification time for the root folder (``promises``).
    # A folder moves in one MOVE request (FOLDER_MOVE).
    PROMISES = frozenset({FOLDER_MOVE})

    def __init__(self, storage: Storage, options: Addition) -> None:
        super().__init__(storage, options)
        self._own_resources = self.resources
        self._base = ""
        self._auth: httpx.Auth | None = None
        self._digest = False
        self._folder_times = False
        where = options.address.strip().rstrip("/")
        self._temps = Temporaries(where, self._remove_temp, recheck=RECHECKS)

    def promises(self) -> frozenset[str]:
        return self.PROMISES | {FOLDER_TIMES} if self._folder_times else self.PROMISES

    async def root_obj(self) -> Obj:
        modified = self.storage.modified or _EPOCH
        return Obj(name="", size=0, is_dir=True, modified=modified, path=self._root())

    async def init(self) -> None:
        options = self.options
        if options.vendor == "sharepoint":
            raise NotSupported("sharepoint vendor is not supported yet")
        if options.vendor not in ("other", ""):
            raise InvalidRequest(f"unknown vendor {options.vendor!r}: sharepoint or other")
        self._base = _base_url(options.address)
        self._temps.reopen()
        if options.username:
            self._auth = httpx.BasicAuth(options.username, options.password)
        root = await self._login()
        if not root.is_dir:
            raise NotAFolder(f"root folder {self._root()} is not a folder on the WebDAV server")
        self._folder_times = root.modified is not None

    async def drop(self) -> None:
        with suppress(Exception):
            await self._temps.drain(DROP_GRACE)
        if self.resources is self._own_resources:
            with suppress(Exception):
                await self._own_resources.aclose()

    async def list(self, dir: Obj) -> builtins.list[Obj]:
        return await gathered(self.list_pages(dir), dir.path, self.resources.max_listing_entries)

    async def list_pages(self, dir: Obj) -> AsyncGenerator[builtins.list[Obj], None]:
        # The answer is read as it streams in and parsed ``PARSE_BATCH`` bytes at a time
        # in this storage's threads: a folder of 200,000 entries (60 MB of XML) neither
        # holds the event loop nor the whole document, and its children come in pages.
        if not dir.is_dir:
            raise NotAFolder()
        url = self._url(dir.path, is_dir=True)
        page = _Page(url, dir.path)
        with translating(_HTTP_ERRORS):
            async with self._client.stream(
                "PROPFIND", url, headers=_depth(1), content=PROPFIND_BODY, auth=self._auth
            ) as response:
                _check_propfind(response)
                async for batch in _batched(response.aiter_bytes(), PARSE_BATCH):
                    if found := await self._read_page(page, batch):
                        yield found
        if found := await self._read_page(page, None):
            yield found

    async def _read_page(self, page: _Page, batch: bytes | None) -> builtins.list[Obj]:
        """The children in ``batch`` (None: the answer's end), read in a worker thread;
        the temporaries among them are swept when stale, on the loop."""
        found, temporaries = await self.run_blocking(page.read, batch)
        if temporaries:
            await self._temps.sweep(temporaries)
        return found

    async def link(self, file: Obj, args: LinkArgs) -> Link:
        if file.is_dir:
            raise NotAFile()
        url = self._url(file.path)
        if self._digest:
            # A Digest answer is made per request: no header can go with a URL.
            return Link(reader=lambda offset, length: self._read(file.path, offset, length))
        response = await self._send("HEAD", file.path)
        if response.status_code >= 400 and response.status_code not in (405, 501):
            raise status_error(response)
        headers = {}
        if self.options.username:
            headers["Authorization"] = _basic(self.options.username, self.options.password)
        return Link(url=url, headers=headers, verify=not self.options.tls_insecure_skip_verify)

    async def get(self, path: str) -> Obj:
        target = self._inside(path)
        entry = await self._stat(target)
        name = "" if target == self._root() else posixpath.basename(target)
        return _obj(entry, name, target)

    async def details(self) -> DiskUsage:
        """The root folder's quota properties (RFC 4331), where the server has them."""
        url = self._url(self._root(), is_dir=True)
        with translating(_HTTP_ERRORS):
            response = await self._client.request(
                "PROPFIND", url, headers=_depth(0), content=QUOTA_BODY, auth=self._auth
            )
        _check_propfind(response)
        return quota_usage(parse(response.content))

    async def make_dir(self, parent: Obj, name: str) -> Obj:
        validate_name(name)
        path = posixpath.join(parent.path, name)
        response = await self._send("MKCOL", path, is_dir=True)
        if response.is_success:
            now = datetime.now(UTC)
            return Obj(name=name, size=0, is_dir=True, modified=now, created=now, path=path)
        if response.status_code == 405:  # something holds the name already
            existing = _obj(await self._stat(path), name, path)
            if existing.is_dir:
                return existing
            raise ObjectExists()
        raise status_error(response)

    async def move(self, src: Obj, dst_dir: Obj) -> Obj:
        if posixpath.dirname(src.path) == dst_dir.path:
            return src
        _refuse_inside(src, dst_dir)
        return await self._relocate(src, posixpath.join(dst_dir.path, src.name))

    async def rename(self, src: Obj, new_name: str) -> Obj:
        validate_name(new_name)
        if new_name == src.name:
            return src
        target = posixpath.join(posixpath.dirname(src.path), new_name)
        return replace(await self._relocate(src, target), name=new_name)

    async def copy(self, src: Obj, dst_dir: Obj) -> Obj:
        _refuse_inside(src, dst_dir)
        final = posixpath.join(dst_dir.path, src.name)
        if final == src.path:
            raise ObjectExists()
        temp = self._temps.new(dst_dir.path, src.is_dir)
        temp.made = temp.pending = True
        async with self._temps.writing(temp):
            await self._copy_to(src, temp.path)
            temp.pending = False
            await self._place(temp.path, final, src.is_dir, overwrite=False)
        return replace(src, path=final)

    async def remove(self, obj: Obj) -> None:
        if obj.is_dir:
            response = await self._remove_folder(obj.path)
        else:
            response = await self._send("DELETE", obj.path)
        if response.status_code == 207:  # some members could not be removed
            raise ServerError("the WebDAV server removed only part of it")
        if not response.is_success:
            raise status_error(response)

    async def put(self, dst_dir: Obj, upload: Upload) -> Obj:
        name = validate_name(upload.name)
        final = posixpath.join(dst_dir.path, name)
        # Looked at first: nothing is sent for a name that cannot take the file.
        await self._refuse_taken(final, upload.overwrite)
        temp = self._temps.new(dst_dir.path)
        temp.made = temp.pending = True
        async with self._temps.writing(temp):
            sent = await self._upload(temp.path, upload)
            temp.pending = False
            if upload.overwrite:
                await self._refuse_taken(final, overwrite=True)
            await self._place(temp.path, final, False, overwrite=upload.overwrite)
        modified = upload.modified or datetime.now(UTC)
        return Obj(name=name, size=sent, is_dir=False, modified=modified, path=final)

    # --- requests ------------------------------------------------------------------

    @property
    def _client(self) -> httpx.AsyncClient:
        return self.resources.http(verify=not self.options.tls_insecure_skip_verify)

    def _root(self) -> str:
        return posixpath.normpath("/" + self.options.root_folder_path.strip("/"))

    def _inside(self, path: str) -> str:
        """A path inside the storage (``/`` its root) as a path on the server."""
        return posixpath.normpath(posixpath.join(self._root(), path.lstrip("/")))

    def _url(self, path: str, is_dir: bool = False) -> str:
        slash = "/" if is_dir and not path.endswith("/") else ""
        return self._base + quote(path) + slash

    async def _remove_folder(self, path: str) -> httpx.Response:
        deleting = self._send("DELETE", path, is_dir=True, answer_within=LONG_CALL_SECONDS)
        return await waited(deleting, "the WebDAV server's removal of the folder")

    async def _send(
        self,
        method: str,
        path: str,
        *,
        is_dir: bool = False,
        headers: dict[str, str] | None = None,
        answer_within: float = HTTP_IO_SECONDS,
    ) -> httpx.Response:
        """One request; ``answer_within`` seconds for an answer that may take that long."""
        with translating(_HTTP_ERRORS):
            return await self._client.request(
                method,
                self._url(path, is_dir),
                headers=headers,
                auth=self._auth,
                timeout=answer_limits(answer_within),
            )

    async def _login(self) -> Entry:
        """The root folder's entry, logging in on the way; Digest when the server
        refuses Basic and asks for it."""
        try:
            return await self._stat(self._root())
        except _LoginRefused as exc:
            if not (self.options.username and exc.digest):
                raise self._login_failed(exc) from exc
        self._auth = httpx.DigestAuth(self.options.username, self.options.password)
        self._digest = True
        try:
            return await self._stat(self._root())
        except PermissionDenied as exc:
            raise self._login_failed(exc) from exc

    def _login_failed(self, exc: PermissionDenied) -> PermissionDenied:
        who = self.options.username
        if not who:
            return PermissionDenied(f"the WebDAV server asks for a login: {exc.message}")
        return PermissionDenied(f"login to the WebDAV server as {who!r} failed: {exc.message}")

    async def _propfind(
        self, path: str, depth: int, is_dir: bool
    ) -> tuple[str, builtins.list[Entry]]:
        """The URL asked and the entries of a PROPFIND, read as the answer streams in.
        A redirect of a file's URL (a folder's without its slash) is asked again as a
        folder, once the first answer is closed: it holds a connection of the pool."""
        found = await self._propfind_once(path, depth, is_dir)
        if found is None:
            found = await self._propfind_once(path, depth, is_dir=True)
        if found is None:  # a folder's URL is never followed: refused as an error
            raise ServerError("the WebDAV server redirected a folder's URL")
        return found

    async def _propfind_once(
        self, path: str, depth: int, is_dir: bool
    ) -> tuple[str, builtins.list[Entry]] | None:
        """``_propfind`` without following: None for a redirect of a file's URL."""
        url = self._url(path, is_dir)
        with translating(_HTTP_ERRORS):
            async with self._client.stream(
                "PROPFIND", url, headers=_depth(depth), content=PROPFIND_BODY, auth=self._auth
            ) as response:
                if response.status_code in _REDIRECTS and not is_dir:
                    return None
                _check_propfind(response)
                reader = MultistatusReader()
                async for data in response.aiter_bytes():
                    reader.feed(data)
                return url, reader.close()

    async def _stat(self, path: str) -> Entry:
        """The entry of one object (PROPFIND depth 0); ``ObjectNotFound`` when absent."""
        _, entries = await self._propfind(path, 0, is_dir=False)
        for entry in entries:
            if entry.found:
                return entry
        raise ObjectNotFound()

    async def _exists(self, path: str) -> bool:
        try:
            await self._stat(path)
        except ObjectNotFound:
            return False
        return True

    async def _refuse_taken(self, path: str, overwrite: bool) -> None:
        """``ObjectExists`` when a folder holds ``path``, or anything does and
        ``overwrite`` is off."""
        try:
            entry = await self._stat(path)
        except ObjectNotFound:
            return
        if entry.is_dir or not overwrite:
            raise ObjectExists()

    async def _read(self, path: str, offset: int, length: int | None) -> AsyncIterator[bytes]:
        headers = {"Accept-Encoding": "identity"}
        if offset or length is not None:
            end = "" if length is None else str(offset + length - 1)
            headers["Range"] = f"bytes={offset}-{end}"
        with translating(_HTTP_ERRORS):
            async with self._client.stream(
                "GET", self._url(path), headers=headers, auth=self._auth
            ) as response:
                if response.status_code == 416:
                    return  # the range starts past the end: nothing to read
                if response.status_code >= 300:
                    # A redirect is not the file: this reader follows none (``redirects``).
                    raise status_error(response)
                # A server that ignores Range answers 200 with everything: cut it here.
                skip = offset if response.status_code == 200 else 0
                async for data in trimmed(response.aiter_bytes(CHUNK), skip, length):
                    yield data

    async def _upload(self, temp: str, upload: Upload) -> int:
        """PUT the upload's bytes at ``temp``; the count sent. Chunked when the size is
        unknown; with a size the body stops short of it when the count is wrong."""
        headers = {"Content-Type": "application/octet-stream"}
        if upload.size is not None:
            headers["Content-Length"] = str(upload.size)
        if upload.modified is not None:
            # ownCloud's header, honoured by rclone, wsgidav (when enabled), Nextcloud.
            headers["X-OC-Mtime"] = str(int(upload.modified.timestamp()))
        sent = [0]
        try:
            with translating(_HTTP_ERRORS):
                response = await self._client.request(
                    "PUT",
                    self._url(temp),
                    content=_checked_body(upload, sent),
                    headers=headers,
                    auth=self._auth,
                )
        except _WrongCount as exc:
            raise InvalidRequest(
                f"upload size mismatch: {upload.size} bytes announced, more or fewer sent"
            ) from exc
        if not response.is_success:
            raise status_error(response)
        check_size(sent[0], upload.size)
        return sent[0]

    async def _copy_to(self, src: Obj, temp: str) -> None:
        headers = {
            "Destination": self._url(temp, src.is_dir),
            "Overwrite": "F",
            "Depth": "infinity",
        }
        response = await self._send("COPY", src.path, is_dir=src.is_dir, headers=headers)
        if response.status_code == 207:  # some members could not be copied
            raise ServerError("the WebDAV server copied only part of it")
        if not response.is_success:
            await self._explain(src.path, posixpath.dirname(temp))
            raise status_error(response)

    async def _relocate(self, src: Obj, target: str) -> Obj:
        """MOVE ``src`` to the free name ``target``."""
        headers = {"Destination": self._url(target, src.is_dir), "Overwrite": "F"}
        response = await self._send("MOVE", src.path, is_dir=src.is_dir, headers=headers)
        if response.status_code == 412:
            raise ObjectExists()
        if not response.is_success:
            await self._explain(src.path, posixpath.dirname(target))
            raise status_error(response)
        await self._check_landed(src.path, target, src.is_dir)
        return replace(src, name=posixpath.basename(target), path=target)

    async def _place(self, temp: str, final: str, is_dir: bool, *, overwrite: bool) -> None:
        """MOVE a finished temporary into place. A destination with ``?`` is never sent
        with ``Overwrite: T`` (see the module's docstring)."""
        if overwrite and "?" in final:
            await self._place_over(temp, final, is_dir)
            return
        headers = {"Destination": self._url(final, is_dir), "Overwrite": "T" if overwrite else "F"}
        response = await self._send("MOVE", temp, is_dir=is_dir, headers=headers)
        if response.status_code == 412:
            raise ObjectExists()
        if not response.is_success:
            # A racer may have taken the name meanwhile (a server that checks, then
            # moves, answers 500 or 423 to the loser): that is a taken name.
            if not overwrite and await self._exists(final):
                raise ObjectExists()
            raise status_error(response)
        await self._check_landed(temp, final, is_dir)

    async def _place_over(self, temp: str, final: str, is_dir: bool) -> None:
        """Replace ``final``, whose name has ``?``, without ``Overwrite: T``: the new
        object goes to a name with ``?`` of its own first (a server that cuts such
        names is found out there, before anything of the old is touched); then the
        old is set aside, the new moved in, and the old removed, or put back."""
        folder = posixpath.dirname(final)
        probe = self._temps.new(folder, is_dir)
        probe.path += "?"
        probe.made = True
        async with self._temps.writing(probe):
            await self._place(temp, probe.path, is_dir, overwrite=False)
            # Set aside under a parking name, which no sweep takes: should it not go
            # back, the old file is still there to be found.
            aside = Temporary(posixpath.join(folder, parking_name()))
            aside.made = await self._set_aside(final, aside.path)
            try:
                await self._place(probe.path, final, is_dir, overwrite=False)
            except BaseException:
                if aside.made:
                    await self._put_back(aside.path, final)
                raise
            if aside.made:
                await self._temps.discard(aside)

    async def _set_aside(self, path: str, aside: str) -> bool:
        """MOVE the file ``path`` to ``aside``; False when there was nothing there."""
        headers = {"Destination": self._url(aside), "Overwrite": "F"}
        response = await self._send("MOVE", path, headers=headers)
        if response.is_success:
            return True
        if response.status_code == 404 or not await self._exists(path):
            return False  # some servers (rclone) answer 403 for a missing source
        raise status_error(response)

    async def _put_back(self, aside: str, path: str) -> None:
        """Move a file set aside back to ``path``, shielded: a cancelled replace must
        not leave the name empty."""
        headers = {"Destination": self._url(path), "Overwrite": "F"}
        back = asyncio.ensure_future(self._send("MOVE", aside, headers=headers))
        with suppress(ManifoldError):
            await asyncio.shield(back)

    async def _check_landed(self, src: str, target: str, is_dir: bool) -> None:
        """After a move to a name with ``?``: did the server put it there? If it cut the
        name at the ``?``, move it back and say so."""
        if "?" not in target or await self._exists(target):
            return
        misplaced = target.split("?", 1)[0].rstrip("/")
        if "?" not in src and misplaced:
            headers = {"Destination": self._url(src, is_dir), "Overwrite": "F"}
            with suppress(ManifoldError):
                await self._send("MOVE", misplaced, is_dir=is_dir, headers=headers)
        raise ServerError("the WebDAV server cannot take '?' in a destination name")

    async def _explain(self, src: str, dst_dir: str) -> None:
        """``ObjectNotFound`` when a MOVE or COPY failed for a missing source or target
        folder, which servers answer in different ways (rclone: 403)."""
        if not await self._exists(src) or not await self._exists(dst_dir):
            raise ObjectNotFound()

    # --- temporaries ---------------------------------------------------------------

    async def _remove_temp(self, path: str, is_dir: bool) -> bool:
        """DELETE a temporary; whether it is gone (404: it was)."""
        response = await self._send("DELETE", path, is_dir=is_dir)
        return response.is_success or response.status_code == 404


class _Page:
    """A folder's PROPFIND answer turned into its children a batch of bytes at a time;
    runs in a worker thread, one batch after another."""

    def __init__(self, url: str, folder: str) -> None:
        self._folder = folder
        self._reader = MultistatusReader()
        self._children = Children(url)

    def read(self, batch: bytes | None) -> tuple[builtins.list[Obj], builtins.list[Seen]]:
        """The children in ``batch`` (None: the answer is whole), and the temporaries
        (``RESERVED_PREFIX`` names) among them, which listings leave out."""
        entries = self._reader.close() if batch is None else self._reader.take(batch)
        found: builtins.list[Obj] = []
        temporaries: builtins.list[Seen] = []
        for name, entry in self._children.take(entries):
            child = posixpath.join(self._folder, name)
            if is_temporary(name):
                temporaries.append(Seen(child, entry.is_dir, entry.modified))
            else:
                found.append(_obj(entry, name, child))
        own = self._children.own
        if own is not None and not own.is_dir:
            raise NotAFolder()
        return found, temporaries


async def _batched(chunks: AsyncIterator[bytes], size: int) -> AsyncIterator[bytes]:
    """``chunks`` joined into pieces of at least ``size`` bytes (the last one shorter):
    one hop to a worker thread parses a useful amount."""
    pending = bytearray()
    async for data in chunks:
        pending += data
        if len(pending) >= size:
            yield bytes(pending)
            pending.clear()
    if pending:
        yield bytes(pending)


def _depth(depth: int) -> dict[str, str]:
    return {"Depth": str(depth), "Content-Type": "application/xml; charset=utf-8"}


def _check_propfind(response: httpx.Response) -> None:
    """The error of a PROPFIND that was not answered with entries."""
    if response.status_code == 401:
        raise _LoginRefused(status_error(response).message, _offers_digest(response))
    if response.status_code not in (200, 207):
        raise status_error(response)


def _obj(entry: Entry, name: str, path: str) -> Obj:
    is_dir = entry.is_dir
    created = entry.created
    modified = entry.modified or created or _EPOCH
    size = 0 if is_dir else entry.size
    return Obj(name=name, size=size, is_dir=is_dir, modified=modified, created=created, path=path)


def _refuse_inside(src: Obj, dst_dir: Obj) -> None:
    if src.is_dir and (dst_dir.path == src.path or dst_dir.path.startswith(src.path + "/")):
        raise InvalidRequest("can't move or copy a folder into itself")


def _base_url(address: str) -> str:
    """``address`` checked and without its trailing slash: every URL starts with it."""
    parts = urlsplit(address.strip())
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise InvalidRequest("address must be an http:// or https:// URL of the WebDAV server")
    if parts.username is not None or parts.password is not None:
        raise InvalidRequest(
            "put the user name and password in their own fields, not in the address"
        )
    if parts.query or parts.fragment:
        raise InvalidRequest("address must not carry a query or a fragment")
    return f"{parts.scheme}://{parts.netloc}{parts.path.rstrip('/')}"


DRIVER = WebDavDriver
