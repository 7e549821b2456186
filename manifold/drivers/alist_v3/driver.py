"""AList V3: a folder of another AList v3 server (or another Manifold) through its JSON
API, ``Obj.path`` being the path on the remote (``root_folder_path`` included).

Login: ``init`` asks ``/api/me`` with the stored token; when ``username`` is set and
the remote knows the token as someone else (or not at all), it logs in with
``/api/auth/login`` and saves the new token into the options. A session the remote
ends later (an expired or revoked token: code 401) is renewed the same way, once per
call, and the call made again. A guest session (no token, no username) is accepted
only where the remote allows mounting (its public ``allow_mounted`` setting).

Every call sends ``meta_password`` as the remote's folder password. Listings come a
page of ``LIST_PAGE`` entries at a time (``list_pages``), never every entry in one
answer; a refreshed listing here asks the remote to refresh too (``list_refreshed``).
A link is the remote's ``raw_url`` (its ``/d``, which serves or redirects), valid for
as long as its sign says; with ``pass_ua_to_upsteam`` the client's User-Agent goes
with the lookup, so a remote that makes links per client makes them for this one.
With ``tls_insecure_skip_verify`` the link says so (``Link.verify`` False), and the
server fetches it through its pool that skips certificate checks.

Uploads stream to ``PUT /api/fs/put`` with the size as ``Content-Length`` (chunked when
unknown, which Manifold accepts and AList v3.45 refuses). The remote stores the file
only once every byte has arrived; a stream that ends short or runs long is cut off
mid-request, so the remote sees a broken upload and keeps nothing. ``Overwrite:
false`` asks the remote to keep a taken name. The first MiB is read before sending,
so an upload no longer than that is sent again after a renewed login; a longer one
whose session ended meanwhile fails as temporary (its token renewed for the next try).

Copies: within one remote storage the remote copies before it answers; between two it
answers with copy tasks, which are followed (``/api/task/copy/info``) until they end
(moves it makes as tasks likewise, ``/api/task/move/info``). A
folder's task ends once it has made a task per entry, so a folder copy also waits
while the remote lists undone copy tasks into the copy (by their names); a failure
of one of those is not seen here, only that none is left running.
The remote's remove succeeds for a missing name, so a removal looks the object up
first.

Archives: with ``forward_archive_requests`` (on by default, as in AList) the remote
reads them: their meta and listings are the remote's answers, a member is read from
the remote's ``/ae`` link, and an extraction into this storage is the remote's own
(its tasks, not this server's). Without it, archives are read by ranges through
``link`` like any other storage's.
"""

from __future__ import annotations

import asyncio
import builtins
import itertools
import logging
import time
from collections.abc import AsyncGenerator, AsyncIterator, Mapping
from typing import Any, ClassVar
from urllib.parse import quote, urlencode, urlsplit

import httpx

from manifold.drivers.base import (
    FOLDER_MOVE,
    ArchiveEntry,
    ArchiveMeta,
    Driver,
    ErrorTable,
    LinkArgs,
    Upload,
    gathered,
    translating,
    validate_name,
    waited,
)
from manifold.drivers.progress import LONG_CALL_SECONDS
from manifold.drivers.resources import HTTP_IO_SECONDS, answer_limits
from manifold.errors import (
    InvalidRequest,
    ManifoldError,
    NotAFile,
    NotSupported,
    ObjectExists,
    PermissionDenied,
    ServerError,
    TemporaryFailure,
)
from manifold.models import DiskUsage, Link, Obj, Storage

from .meta import Addition
from .remote import (
    ROLE_GUEST,
    TASK_DONE,
    TASK_SUCCEEDED,
    Envelope,
    archive_entries,
    child_path,
    copies_into,
    entry_obj,
    envelope_error,
    is_inside,
    joined,
    list_objs,
    mount_usage,
    parent_path,
    sign_expiry,
    status_error,
)

log = logging.getLogger("manifold.drivers")

NOT_MOUNTABLE = "the site does not allow mounted"
INTO_ITSELF = "the destination folder is a subfolder of the source folder"
# How often a copy task of the remote is asked after, at first and at most (seconds).
TASK_POLL_FIRST = 0.05
TASK_POLL_LONGEST = 1.0
# Bytes of an upload read before it is sent, so that a small one can be sent again.
REPLAYABLE = 1 << 20
# Entries asked for in one ``fs/list`` call: a big remote folder comes in pages, each
# within the call's time limit, never as one answer of every entry.
LIST_PAGE = 1000
# An answer longer than this is decoded in a worker thread, off the event loop.
DECODE_IN_THREAD = 1 << 20


class _Body:
    """An upload's bytes as sent, checked against its declared size on the way.

    The first ``REPLAYABLE`` bytes are read before the request starts: an upload no
    longer than that can be sent again after a renewed login. Too many or too few
    bytes raise ``InvalidRequest`` inside the request body, so the request breaks
    off before it is complete and the remote stores nothing.
    """

    def __init__(self, stream: AsyncIterator[bytes], size: int | None) -> None:
        self._stream = stream
        self._size = size
        self._head: builtins.list[bytes] = []
        self._whole = False
        self._streamed = False

    async def read_ahead(self) -> None:
        """Read the head; an upload that ends within it is checked at once."""
        kept = 0
        while kept < REPLAYABLE:
            data = await anext(self._stream, None)
            if data is None:
                self._whole = True
                _check_count(kept, self._size, whole=True)
                return
            kept += len(data)
            _check_count(kept, self._size, whole=False)
            if data:
                self._head.append(data)

    @property
    def replayable(self) -> bool:
        return self._whole or not self._streamed

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for data in self._head:
            yield data
        if self._whole:
            return
        sent = sum(len(data) for data in self._head)
        async for data in self._stream:
            self._streamed = True
            sent += len(data)
            _check_count(sent, self._size, whole=False)
            if data:
                yield data
        _check_count(sent, self._size, whole=True)


def _check_count(sent: int, size: int | None, *, whole: bool) -> None:
    if size is None:
        return
    if sent > size:
        raise InvalidRequest(f"upload is longer than its size of {size} bytes")
    if whole and sent != size:
        raise InvalidRequest(f"upload ended after {sent} of {size} bytes")


class AListV3Driver(Driver[Addition]):
    # Neither promise holds for every remote. EXCLUSIVE_CREATE: an AList v3.45 remote
    # decides ``Overwrite: false`` by looking before it stores, and a Manifold remote
    # is exclusive only where its own storage is. FOLDER_TIMES: a remote storage
    # without folder times (S3) shows the zero time. FOLDER_MOVE: one request; a
    # Manifold remote that moves a folder as a task answers once the task is made.
    PROMISES: ClassVar[frozenset[str]] = frozenset({FOLDER_MOVE})

    def __init__(self, storage: Storage, options: Addition) -> None:
        super().__init__(storage, options)
        self._own_resources = self.resources
        self._renewing = asyncio.Lock()
        # The remote user's base path: task names show full paths on the remote.
        self._base_path = "/"
        # The token whose renewal the remote refused (the login failed), if any.
        self._refused_with: str | None = None
        self._errors: ErrorTable = {
            httpx.RequestError: self._network_error,
            httpx.UnsupportedProtocol: self._bad_url,
            httpx.InvalidURL: self._bad_url,
        }

    async def init(self) -> None:
        """Check the URL, make sure of a session (logging in when asked to) and, for a
        guest session, that the remote allows being mounted."""
        options = self.options
        options.url = options.url.strip().rstrip("/")
        options.root_folder_path = "/" + options.root_folder_path.strip("/")
        if urlsplit(options.url).scheme not in ("http", "https"):
            raise InvalidRequest("url must start with http:// or https://")
        if options.username and not options.token:
            await self._login()
        me = await self._me()
        if options.username and me.get("username") != options.username:
            await self._login()
            me = await self._me()
        self._base_path = str(me.get("base_path") or "/")
        if me.get("role") == ROLE_GUEST and not await self._mountable():
            raise PermissionDenied(NOT_MOUNTABLE)

    async def drop(self) -> None:
        """Close the HTTP pool when it is this driver's own (built outside a server);
        a server's shared pool is the server's to close."""
        if self.resources is self._own_resources:
            try:
                await self._own_resources.aclose()
            except Exception:  # never raises: a pool half closed is closed enough
                log.debug("closing the HTTP pool of %s failed", self.storage.mount_path)

    async def list(self, dir: Obj) -> builtins.list[Obj]:
        return await gathered(self.list_pages(dir), dir.path, self.resources.max_listing_entries)

    async def list_pages(self, dir: Obj) -> AsyncGenerator[builtins.list[Obj], None]:
        async for page in self._pages(dir, refresh=False):
            yield page

    async def list_refreshed(self, dir: Obj) -> builtins.list[Obj]:
        """The listing with ``refresh``: the remote drops its cached listing first (it
        refuses that to a user who may not write there, as it refuses any client)."""
        limit = self.resources.max_listing_entries
        return await gathered(self._pages(dir, refresh=True), dir.path, limit)

    async def _pages(self, dir: Obj, refresh: bool) -> AsyncGenerator[builtins.list[Obj], None]:
        """The remote's ``fs/list`` a page of ``LIST_PAGE`` entries at a time (the first
        one refreshed when asked), each name once, until a short page or the total."""
        seen: set[str] = set()
        for number in itertools.count(1):
            body = self._list_body(dir, number, refresh)
            data = await self._api("POST", "/api/fs/list", json=body) or {}
            content = data.get("content") or []
            known = len(seen)
            yield list_objs(dir.path, content, seen)
            total = data.get("total")
            done = isinstance(total, int) and number * LIST_PAGE >= total
            # A remote that ignores ``page`` sends the same names again: nothing new ends it.
            if len(content) < LIST_PAGE or done or len(seen) == known:
                return

    def _list_body(self, dir: Obj, number: int, refresh: bool) -> dict[str, Any]:
        password = self.options.meta_password
        body = {"path": dir.path, "password": password, "page": number, "per_page": LIST_PAGE}
        return {**body, "refresh": refresh and number == 1}

    async def link(self, file: Obj, args: LinkArgs) -> Link:
        if file.is_dir:
            raise NotAFile()
        headers = {}
        agent = _header(args.headers, "user-agent")
        if self.options.pass_ua_to_upsteam and agent:
            headers["User-Agent"] = agent
        data = await self._fs_get(file.path, headers)
        url = str(data.get("raw_url") or "")
        if data.get("is_dir") or not url:
            raise NotAFile()
        verify = not self.options.tls_insecure_skip_verify
        return Link(url=url, expires_in=sign_expiry(url, time.time()), verify=verify)

    async def get(self, path: str) -> Obj:
        full = child_path(self.options.root_folder_path, path.strip("/")).rstrip("/") or "/"
        return await self._lookup(full)

    async def details(self) -> DiskUsage:
        """The space the remote tells of the storage mounted at the root folder (its
        ``mount_details``, which AList gives a mount point's folder to any user but
        the guest); ``NotSupported`` where it gives none."""
        return mount_usage(await self._fs_get(self.options.root_folder_path))

    async def make_dir(self, parent: Obj, name: str) -> Obj:
        path = child_path(parent.path, validate_name(name))
        await self._api("POST", "/api/fs/mkdir", json=self._body(path=path))
        return await self._lookup(path)

    async def move(self, src: Obj, dst_dir: Obj) -> Obj:
        if parent_path(src.path) == dst_dir.path:
            return src
        self._refuse_into_itself(src, dst_dir)
        data = await self._api("POST", "/api/fs/move", json=self._pair(src, dst_dir))
        # A remote that moves as tasks (OpenList, Manifold: between its storages, or
        # a folder of its S3) answers them; the move is whole once they end.
        tasks = data.get("tasks") if isinstance(data, dict) else None
        for task in tasks or []:
            await self._follow(task, "move")
        return await self._lookup(child_path(dst_dir.path, src.name))

    async def rename(self, src: Obj, new_name: str) -> Obj:
        path = child_path(parent_path(src.path), validate_name(new_name))
        if path == src.path:
            return src
        body = self._body(path=src.path, name=new_name, overwrite=False)
        await self._api("POST", "/api/fs/rename", json=body)
        return await self._lookup(path)

    async def copy(self, src: Obj, dst_dir: Obj) -> Obj:
        """Copy on the remote; a copy it makes as tasks (between two of its storages)
        is waited for, so the copy is whole when this returns."""
        if parent_path(src.path) == dst_dir.path:
            raise ObjectExists()  # the source itself holds the name
        self._refuse_into_itself(src, dst_dir)
        data = await self._api("POST", "/api/fs/copy", json=self._pair(src, dst_dir))
        target = child_path(dst_dir.path, src.name)
        tasks = (data or {}).get("tasks") or []
        for task in tasks:
            await self._follow(task)
        if tasks and src.is_dir:
            await self._wait_for_copies_into(target)
        return await self._lookup(target)

    async def remove(self, obj: Obj) -> None:
        # The remote answers success for a missing name: look first, to say so.
        await self._fs_get(obj.path)
        body = self._body(dir=parent_path(obj.path), names=[obj.name])
        if not obj.is_dir:
            await self._api("POST", "/api/fs/remove", json=body)
            return
        # A folder goes in one call however big it is: watched as under way up to
        # its own limit rather than the call's time limit.
        removing = self._api("POST", "/api/fs/remove", json=body, answer_within=LONG_CALL_SECONDS)
        await waited(removing, "the remote's removal of the folder")

    async def put(self, dst_dir: Obj, upload: Upload) -> Obj:
        path = child_path(dst_dir.path, validate_name(upload.name))
        headers = self._put_headers(path, upload)
        body = _Body(upload.stream, upload.size)
        await body.read_ahead()
        token = self.options.token
        answer = await self._exchange("PUT", "/api/fs/put", token, headers=headers, content=body)
        if answer.code == 401 and await self._renew(token):
            if not body.replayable:  # the bytes are gone: the caller sends them again
                raise TemporaryFailure("request failed: the session ended during the upload")
            answer = await self._exchange(
                "PUT", "/api/fs/put", self.options.token, headers=headers, content=body
            )
        if not answer.ok:
            raise answer.error()
        return await self._lookup(path)

    # --- archives, read by the remote (``forward_archive_requests``) ----------------

    async def archive_meta(self, file: Obj, password: str) -> ArchiveMeta:
        data = await self._archive_api("/api/fs/archive/meta", file, password)
        content = data.get("content")
        tree = None if content is None else archive_entries(content)
        return ArchiveMeta(str(data.get("comment") or ""), bool(data.get("encrypted")), tree)

    async def archive_list(
        self, file: Obj, password: str, inner: str
    ) -> builtins.list[ArchiveEntry]:
        fields = {"page": 1, "per_page": 0, "inner_path": inner}
        data = await self._archive_api("/api/fs/archive/list", file, password, **fields)
        return builtins.list(archive_entries(data.get("content")))

    async def archive_link(self, file: Obj, password: str, inner: str) -> Link:
        """The remote's own member URL (its ``/ae``), signed with its archive sign."""
        data = await self._archive_api("/api/fs/archive/meta", file, password)
        raw = str(data.get("raw_url") or "")
        if not raw:
            raise ServerError("request failed: the archive meta gave no raw_url")
        query = urlencode({"inner": inner, "pass": password, "sign": str(data.get("sign") or "")})
        url = f"{raw}?{query}"
        return Link(url=url, verify=not self.options.tls_insecure_skip_verify)

    async def archive_decompress(
        self,
        file: Obj,
        dst_dir: Obj,
        password: str,
        inner: str,
        into_new_dir: bool,
        overwrite: bool,
    ) -> None:
        """The remote extracts, as tasks of its own; this returns once they are made."""
        self._forwarding()
        body = self._body(
            src_dir=parent_path(file.path),
            dst_dir=dst_dir.path,
            name=[file.name],
            archive_pass=password,
            inner_path=inner,
            cache_full=False,
            put_into_new_dir=into_new_dir,
            overwrite=overwrite,
        )
        await self._api("POST", "/api/fs/archive/decompress", json=body)

    async def _archive_api(
        self, api: str, file: Obj, password: str, **fields: Any
    ) -> dict[str, Any]:
        self._forwarding()
        body = self._body(path=file.path, archive_pass=password, refresh=False, **fields)
        data = await self._api("POST", api, json=body)
        if not isinstance(data, dict):
            raise ServerError(f"request failed: {api} gave no answer")
        return data

    def _forwarding(self) -> None:
        """Archives are the remote's to read only with ``forward_archive_requests``;
        without it the server reads them through ``link`` like any file."""
        if not self.options.forward_archive_requests:
            raise NotSupported()

    # --- the remote's API ---------------------------------------------------------

    async def _api(
        self,
        method: str,
        api: str,
        *,
        json: Any = None,
        params: Mapping[str, str] | None = None,
        headers: Mapping[str, str] | None = None,
        answer_within: float = HTTP_IO_SECONDS,
    ) -> Any:
        """The ``data`` of one remote call; a session that ended (401) is renewed and
        the call made once more. ``answer_within``: see ``_exchange``."""
        sent = {"json": json, "params": params, "headers": headers, "answer_within": answer_within}
        token = self.options.token
        answer = await self._exchange(method, api, token, **sent)
        if answer.code == 401 and await self._renew(token):
            answer = await self._exchange(method, api, self.options.token, **sent)
        if not answer.ok:
            raise answer.error()
        return answer.data

    async def _exchange(
        self,
        method: str,
        api: str,
        token: str,
        *,
        json: Any = None,
        params: Mapping[str, str] | None = None,
        headers: Mapping[str, str] | None = None,
        content: _Body | None = None,
        answer_within: float = HTTP_IO_SECONDS,
    ) -> Envelope:
        """One request; an HTTP 401 reads as the envelope's 401, another HTTP error
        status as AList's ``request failed, status: ...``. ``answer_within``: seconds
        the answer may take (a long call watched with ``waited``)."""
        sent = dict(headers or {})
        if token:
            sent["Authorization"] = token
        # UTF-8 header values, as a Go client sends them: a folder password may be any text.
        encoded = httpx.Headers(sent, encoding="utf-8")
        client = self.resources.http(verify=not self.options.tls_insecure_skip_verify)
        with translating(self._errors):
            response = await client.request(
                method,
                self.options.url + api,
                json=json,
                params=params,
                headers=encoded,
                content=content,
                timeout=answer_limits(answer_within),
            )
        if response.status_code == 401:
            return Envelope(401, "unauthorized", None)
        if response.status_code >= 400:
            raise status_error(response.status_code, response.reason_phrase)
        if len(response.content) > DECODE_IN_THREAD:
            return await self.run_blocking(Envelope.parse, response.content)
        return Envelope.parse(response.content)

    async def _renew(self, stale: str) -> bool:
        """Log in again after the remote refused token ``stale``; whether there is a
        new token to try. Calls refused together log in once."""
        async with self._renewing:
            if self.options.token != stale:
                return True  # another call has renewed it meanwhile
            if not self.options.username or self._refused_with == stale:
                return False
            try:
                await self._login()
            except TemporaryFailure:
                raise
            except ManifoldError:
                # Refused (a changed password): calls after this one do not try again,
                # or they would lock the remote account out. Editing the storage does.
                self._refused_with = stale
                raise
            return True

    async def _login(self) -> None:
        """A token for ``username``, kept in the options and saved with them."""
        body = {"username": self.options.username, "password": self.options.password}
        answer = await self._exchange("POST", "/api/auth/login", "", json=body)
        token = answer.data.get("token") if isinstance(answer.data, dict) else None
        if not answer.ok or not isinstance(token, str) or not token:
            error = answer.error() if not answer.ok else ServerError("login gave no token")
            raise error.with_context("failed to log in")
        self.options.token = token
        try:
            await self.save_options()
        except ManifoldError as exc:  # the token works anyway; the next start logs in
            log.warning("saving the new token of %s failed: %s", self.storage.mount_path, exc)

    async def _me(self) -> dict[str, Any]:
        """The remote's user for the current session (its guest without one)."""
        me = await self._api("GET", "/api/me")
        if not isinstance(me, dict):
            raise ServerError("request failed: /api/me gave no user")
        return me

    async def _mountable(self) -> bool:
        data = await self._api("GET", "/api/public/settings")
        return isinstance(data, dict) and data.get("allow_mounted") == "true"

    async def _fs_get(self, path: str, headers: Mapping[str, str] | None = None) -> Any:
        body = self._body(path=path)
        return await self._api("POST", "/api/fs/get", json=body, headers=headers)

    async def _lookup(self, path: str) -> Obj:
        return entry_obj(await self._fs_get(path), path)

    async def _follow(self, task: Any, kind: str = "copy") -> None:
        """Wait until the remote's ``kind`` task ``task`` ends; its error if it failed.

        A task the remote will not show (to a guest, or gone already) is not waited
        for: the lookup of the copy that follows tells whether it is there.
        """
        if not isinstance(task, dict):
            return
        delay = TASK_POLL_FIRST
        while task.get("state") not in TASK_DONE:
            await asyncio.sleep(delay)
            delay = min(TASK_POLL_LONGEST, delay * 2)
            params = {"tid": str(task.get("id", ""))}
            answer = await self._exchange(
                "POST", f"/api/task/{kind}/info", self.options.token, params=params
            )
            if not answer.ok or not isinstance(answer.data, dict):
                return
            task = answer.data
        if task.get("state") != TASK_SUCCEEDED:
            raise envelope_error(500, str(task.get("error") or f"{kind} task failed"))

    async def _wait_for_copies_into(self, target: str) -> None:
        """Wait while the remote has copy tasks under way into ``target``: a folder's
        copy task makes one task per entry, and ends before they do."""
        full = joined(self._base_path, target)
        delay = TASK_POLL_FIRST
        while True:
            answer = await self._exchange("GET", "/api/task/copy/undone", self.options.token)
            if not answer.ok or not isinstance(answer.data, builtins.list):
                return
            if not any(copies_into(task, full) for task in answer.data):
                return
            await asyncio.sleep(delay)
            delay = min(TASK_POLL_LONGEST, delay * 2)

    # --- request parts ------------------------------------------------------------

    def _body(self, **fields: Any) -> dict[str, Any]:
        """A request body with the folder password (AList v3.45 ignores it on writes,
        Manifold checks it there too)."""
        return {**fields, "password": self.options.meta_password}

    def _pair(self, src: Obj, dst_dir: Obj) -> dict[str, Any]:
        return self._body(
            src_dir=parent_path(src.path), dst_dir=dst_dir.path, names=[src.name], overwrite=False
        )

    def _put_headers(self, path: str, upload: Upload) -> dict[str, str]:
        headers = {
            "File-Path": quote(path, safe="/"),
            "Password": self.options.meta_password,
            "Content-Type": "application/octet-stream",
        }
        if upload.size is not None:
            headers["Content-Length"] = str(upload.size)
        if not upload.overwrite:
            headers["Overwrite"] = "false"
        if upload.modified is not None:
            headers["Last-Modified"] = str(int(upload.modified.timestamp() * 1000))
        return headers

    @staticmethod
    def _refuse_into_itself(src: Obj, dst_dir: Obj) -> None:
        if src.is_dir and is_inside(dst_dir.path, src.path):
            raise ServerError(INTO_ITSELF)

    # --- errors -------------------------------------------------------------------

    def _network_error(self, exc: Exception) -> ManifoldError:
        return TemporaryFailure(f"request failed: {self._redacted(str(exc) or type(exc).__name__)}")

    def _bad_url(self, exc: Exception) -> ManifoldError:
        return InvalidRequest(f"invalid url: {self._redacted(str(exc))}")

    def _redacted(self, text: str) -> str:
        """``text`` without any secret of the options (a library may quote a URL
        with credentials in it, or a header)."""
        options = self.options
        userinfo = urlsplit(options.url).netloc.rpartition("@")[0]
        for secret in (options.password, options.token, options.meta_password, userinfo):
            if secret:
                text = text.replace(secret, "***")
        return text


def _header(headers: Mapping[str, str], name: str) -> str:
    for key, value in headers.items():
        if key.lower() == name:
            return value
    return ""


DRIVER = AListV3Driver
