"""The S3 driver: a bucket of any S3-compatible store, through aiobotocore.

Folders are prefixes (``manifold.drivers.prefixes``): listings ask for one level
(``Delimiter="/"``) a page at a time, following the store's continuation tokens (v1
markers or v2 tokens, as the ``list_object_version`` option says). A new folder is an
empty placeholder object inside the prefix (AList's ``.alist``), hidden from listings.

Downloads are presigned GET URLs (SigV4, ``sign_url_expire`` hours), so ``/d``
redirects the client to the store and ``/p`` fetches the same URL with ranges.

Uploads (``upload``) are one ``PutObject`` when small, else a multipart upload
completed only after its last part and aborted on any failure, so a file appears
whole or not at all. Copies run on the store (``CopyObject``); a folder is copied key
by key, and a folder moved or renamed loses its source keys only once every copy
exists, so a failure midway leaves the source whole and removes what was copied.
"""

from __future__ import annotations

import builtins
from collections.abc import (
    AsyncIterator,
    Callable,
)
from contextlib import AsyncExitStack, suppress
from datetime import UTC, datetime
from typing import Any, ClassVar
from urllib.parse import quote, urlsplit, urlunsplit

from aiobotocore.config import AioConfig
from aiobotocore.session import AioSession, get_session
from botocore import UNSIGNED
from botocore.handlers import set_list_objects_encoding_type_url

from manifold.drivers.base import (
    LinkArgs,
    Upload,
    made_progress,
    temporary_name,
    translating,
    validate_name,
)
from manifold.drivers.batches import each
from manifold.drivers.prefixes import PrefixDriver, join, key_of, name_of, prefix_of
from manifold.errors import (
    InvalidRequest,
    NotAFile,
    NotSupported,
    ObjectNotFound,
    ServerError,
)
from manifold.models import Link, Obj

from .failures import ERRORS
from .keys import is_empty, last_key, page_objects
from .listing_xml import OPERATIONS as LISTINGS
from .listing_xml import before_parse, read_timestamp
from .meta import DEFAULT_PLACEHOLDER, DEFAULT_REGION, Addition
from .native import MIN_PART, NativeUploads
from .upload import MAX_PARTS, Uploader

# SigV4 presigned URLs live at most a week.
_LONGEST_SIGN_HOURS = 7 * 24
_DEFAULT_SIGN_HOURS = 4
# CopyObject copies at most 5 GiB; bigger objects are copied in parts.
_COPY_LIMIT = 5 << 30

# One session for every S3 storage: it holds the service model, read from disk once.
_SESSION: list[AioSession] = []


def _session() -> AioSession:
    if not _SESSION:
        session = get_session()
        factory = session.get_component("response_parser_factory")
        factory.set_parser_defaults(timestamp_parser=read_timestamp)
        _SESSION.append(session)
    return _SESSION[0]


class S3Driver(PrefixDriver[Addition]):
    # No EXCLUSIVE_CREATE: a put that must not replace sends ``If-None-Match: *``
    # (AWS, MinIO and moto refuse it with 412 when the key exists), but a copy has no
    # such condition that stores keep (moto ignores it), and moto's own put check
    # looks before it writes rather than atomically; a look before each write
    # narrows the window only. No FOLDER_TIMES, no FOLDER_MOVE (``PrefixDriver``).
    PROMISES: ClassVar[frozenset[str]] = frozenset()
    # Keys a listing page asks for (S3's own maximum is 1000).
    PAGE_SIZE: ClassVar[int] = 1000
    # Bytes of each uploaded part; an upload that fits in one is a single PutObject.
    PART_SIZE: ClassVar[int] = 8 << 20
    # Above this size a copy goes in parts (UploadPartCopy) of ``COPY_PART_SIZE``.
    COPY_LIMIT: ClassVar[int] = _COPY_LIMIT
    COPY_PART_SIZE: ClassVar[int] = 512 << 20
    # Keys one DeleteObjects removes (S3's maximum).
    DELETE_BATCH: ClassVar[int] = 1000

    _client: Any = None
    _signer: Any = None
    _stack: AsyncExitStack | None = None
    _uploader: Uploader | None = None
    _native: NativeUploads | None = None
    # The API's multipart uploads go into the bucket's own (``native``).
    MULTIPART_MIN_PART: ClassVar[int] = MIN_PART
    MULTIPART_MAX_PARTS: ClassVar[int] = MAX_PARTS

    # --- lifecycle -------------------------------------------------------------

    async def init(self) -> None:
        options = self.options
        missing = [
            name
            for name in ("bucket", "endpoint", "access_key_id", "secret_access_key")
            if not getattr(options, name)
        ]
        if missing:
            raise InvalidRequest(f"{', '.join(missing)} is required")
        self._root = "/" + options.root_folder_path.strip("/")
        self._hidden = options.placeholder or DEFAULT_PLACEHOLDER
        await self.drop()
        stack = AsyncExitStack()
        try:
            with translating(ERRORS):
                await self._connect(stack)
                await self._client.head_bucket(Bucket=options.bucket)
        except ValueError as exc:  # botocore's word for an endpoint it cannot parse
            await stack.aclose()
            raise InvalidRequest("endpoint is not a valid URL") from exc
        except ObjectNotFound as exc:
            await stack.aclose()
            raise ObjectNotFound(f"bucket {options.bucket} not found") from exc
        except BaseException:
            await stack.aclose()
            raise
        self._stack = stack
        self._uploader = Uploader(self._client, options.bucket, self.PART_SIZE)
        self._native = NativeUploads(self._uploader, self._copy_key)

    async def drop(self) -> None:
        stack, self._stack = self._stack, None
        uploader, self._uploader = self._uploader, None
        self._client = self._signer = None
        if uploader is not None:
            with suppress(Exception):
                await uploader.close()
        if stack is not None:
            with suppress(Exception):
                await stack.aclose()

    async def _connect(self, stack: AsyncExitStack) -> None:
        options = self.options
        session = _session()
        # The service model is read from disk: in this storage's threads, once.
        await self.run_blocking(session.warm_up_loader_caches, "s3")
        endpoint = _with_scheme(options.endpoint)
        self._client = await stack.enter_async_context(
            session.create_client("s3", endpoint_url=endpoint, **self._client_args())
        )
        # v1 listings ask for plain keys, as AList's SDK does: botocore would ask for
        # URL-encoded ones and decode every prefix, and stores differ on whether a v1
        # answer encodes its common prefixes (moto does not), which turns a folder
        # named ``%46`` into ``F``. v2 stores encode both alike.
        self._client.meta.events.unregister(
            "before-parameter-build.s3.ListObjects", set_list_objects_encoding_type_url
        )
        for operation in LISTINGS:
            self._client.meta.events.register(f"before-parse.s3.{operation}", before_parse)
        self._signer = self._client
        if options.custom_host:
            signed = options.enable_custom_host_presign
            self._signer = await stack.enter_async_context(
                session.create_client(
                    "s3", endpoint_url=endpoint, **self._client_args(signed=signed)
                )
            )
            host = _with_scheme(options.custom_host, urlsplit(endpoint).scheme)
            self._signer.meta.events.register("before-sign.s3.GetObject", _to_host(host))

    def _client_args(self, signed: bool = True) -> dict[str, Any]:
        options = self.options
        config = AioConfig(
            signature_version="s3v4" if signed else UNSIGNED,
            s3={"addressing_style": "path"} if options.force_path_style else {},
            # The driver's layers retry idempotent calls; one more try here covers a
            # part of an upload that met a passing error.
            retries={"mode": "standard", "total_max_attempts": 2},
            connect_timeout=10,
            read_timeout=60,
            max_pool_connections=self.TREE_CONCURRENCY * 4,
            # Checksums only where S3 requires them: many S3-compatible stores refuse
            # the newer trailing checksums.
            request_checksum_calculation="when_required",
            response_checksum_validation="when_required",
        )
        return {
            "region_name": options.region or DEFAULT_REGION,
            "aws_access_key_id": options.access_key_id,
            "aws_secret_access_key": options.secret_access_key,
            "aws_session_token": options.session_token or None,
            "verify": not options.tls_insecure_skip_verify,
            "config": config,
        }

    async def _call(self, operation: str, **params: Any) -> Any:
        """One request of the S3 API for this bucket, its errors translated."""
        with translating(ERRORS):
            return await getattr(self._client, operation)(Bucket=self.options.bucket, **params)

    # --- reading ---------------------------------------------------------------

    async def list(self, dir: Obj) -> builtins.list[Obj]:
        found: builtins.list[Obj] = []
        async for page in self.list_pages(dir):
            found += page
        return found

    async def _listing(self, folder: str) -> AsyncIterator[tuple[bool, builtins.list[Obj]]]:
        seen: set[str] = set()
        async for page in self._pages(prefix_of(folder), delimiter="/"):
            objects = page_objects(page, folder, self._hidden, self._folder_time(), seen)
            yield is_empty(page), objects

    async def link(self, file: Obj, args: LinkArgs) -> Link:
        if file.is_dir:
            raise NotAFile()
        key = key_of(file.path)
        await self._call("head_object", Key=key)  # a URL to nothing would answer 404 later
        seconds = self._sign_seconds()
        params = {"Bucket": self.options.bucket, "Key": key}
        if not self.options.custom_host:
            params["ResponseContentDisposition"] = self._disposition(name_of(file.path))
        with translating(ERRORS):
            url: str = await self._signer.generate_presigned_url(
                "get_object", Params=params, ExpiresIn=seconds
            )
        presigned = not self.options.custom_host or self.options.enable_custom_host_presign
        if self.options.custom_host and self.options.remove_bucket:
            url = url.replace(f"/{self.options.bucket}", "", 1)
        expires = float(seconds) if presigned else None
        return Link(url=url, expires_in=expires, verify=not self.options.tls_insecure_skip_verify)

    def _sign_seconds(self) -> int:
        """How long a signed URL lives: ``sign_url_expire`` hours, within SigV4's week."""
        hours = self.options.sign_url_expire
        if hours <= 0:
            hours = _DEFAULT_SIGN_HOURS
        return min(hours, _LONGEST_SIGN_HOURS) * 3600

    def direct_upload_tools(self) -> builtins.list[str]:
        return ["HttpDirect"] if self.options.enable_direct_upload else []

    async def direct_upload_info(self, dir: Obj, name: str, size: int) -> dict[str, Any]:
        """A presigned PUT of exactly this key: the signature covers the key, so the
        URL writes nothing else, and it dies with the storage's signing lifetime."""
        if not self.options.enable_direct_upload:
            raise NotSupported("not implement")
        params = {"Bucket": self.options.bucket, "Key": key_of(join(dir.path, name))}
        with translating(ERRORS):
            url: str = await self._client.generate_presigned_url(
                "put_object", Params=params, ExpiresIn=self._sign_seconds()
            )
        return {"upload_url": url, "chunk_size": 0, "method": "PUT"}

    def _disposition(self, name: str) -> str:
        quoted = quote(name, safe="$&+:=@")  # as Go's url.PathEscape, which AList uses
        if self.options.add_filename_to_disposition:
            return f"attachment; filename=\"{name}\"; filename*=UTF-8''{quoted}"
        return f"attachment; filename*=UTF-8''{quoted}"

    # --- writing ---------------------------------------------------------------

    async def _mark_folder(self, path: str) -> None:
        await self._call("put_object", Key=prefix_of(path) + self._hidden, Body=b"")

    async def _upload(self, path: str, upload: Upload) -> Obj:
        assert self._uploader is not None and self._native is not None
        if upload.native is not None:
            size = await self._native.finish(key_of(path), upload.native, upload.overwrite)
        else:
            size = await self._uploader.put(key_of(path), upload)
        return _file_obj(path, size, datetime.now(UTC))

    # --- the API's multipart uploads (``native``) ----------------------------------

    async def multipart_begin(self, dst_dir: Obj, name: str, hidden: bool) -> str:
        assert self._native is not None
        path = join(dst_dir.path, self._refuse_reserved(validate_name(name)))
        temp = key_of(join(dst_dir.path, temporary_name())) if hidden else ""
        return await self._native.begin(key_of(path), temp)

    async def _remove_file(self, path: str) -> None:
        await self._call("head_object", Key=key_of(path))  # a delete of nothing succeeds
        await self._delete_key(key_of(path))

    def _refuse_reserved(self, name: str) -> str:
        if name == self._hidden:
            raise InvalidRequest(f"invalid name: {name!r} keeps folders of this storage")
        return name

    # --- folders as prefixes -----------------------------------------------------

    async def _pages(
        self, prefix: str, delimiter: str = "", limit: int = 0
    ) -> AsyncIterator[dict[str, Any]]:
        """The store's listing pages of ``prefix``, following its continuation."""
        params: dict[str, Any] = {"Prefix": prefix, "MaxKeys": limit or self.PAGE_SIZE}
        if delimiter:
            params["Delimiter"] = delimiter
        v2 = self.options.list_object_version == "v2"
        while True:
            page = await self._call("list_objects_v2" if v2 else "list_objects", **params)
            made_progress()
            yield page
            if limit or not page.get("IsTruncated"):
                return
            after = page.get("NextContinuationToken") if v2 else page.get("NextMarker")
            after = after or last_key(page)
            if not after:
                return
            if v2 and page.get("NextContinuationToken"):
                params["ContinuationToken"] = after
            elif v2:
                params["StartAfter"] = after
            else:
                params["Marker"] = after

    async def _has_keys(self, prefix: str) -> bool:
        async for page in self._pages(prefix, limit=1):
            return not is_empty(page)
        return False

    async def _sized_keys(self, prefix: str) -> AsyncIterator[tuple[str, int]]:
        async for page in self._pages(prefix):
            for item in page.get("Contents") or ():
                yield item["Key"], int(item["Size"])

    async def _file(self, path: str) -> Obj | None:
        if name_of(path) == self._hidden:
            return None
        try:
            head = await self._call("head_object", Key=key_of(path))
        except ObjectNotFound:
            return None
        return _file_obj(path, int(head["ContentLength"]), head["LastModified"])

    # --- copies and removals ------------------------------------------------------

    async def _copy_file(self, src: Obj, target: str) -> Obj:
        await self._copy_key(key_of(src.path), key_of(target), src.size)
        return _file_obj(target, src.size, datetime.now(UTC))

    async def _copy_key(self, key: str, new_key: str, size: int) -> None:
        source = {"Bucket": self.options.bucket, "Key": key}
        if size <= self.COPY_LIMIT:
            await self._call("copy_object", Key=new_key, CopySource=source)
            return
        assert self._uploader is not None
        await self._uploader.copy_in_parts(source, new_key, size, self.COPY_PART_SIZE)

    async def _delete_key(self, key: str) -> None:
        await self._call("delete_object", Key=key)

    async def _delete_keys(self, keys: builtins.list[str]) -> None:
        """Delete ``keys`` in batches of ``DELETE_BATCH``."""
        batches = [
            keys[start : start + self.DELETE_BATCH]
            for start in range(0, len(keys), self.DELETE_BATCH)
        ]
        await each(batches, self._delete_batch, self.TREE_CONCURRENCY)

    async def _delete_batch(self, keys: builtins.list[str]) -> None:
        objects = [{"Key": key} for key in keys]
        answer = await self._call("delete_objects", Delete={"Objects": objects, "Quiet": True})
        errors = answer.get("Errors") or ()
        if errors:
            first = errors[0]
            raise ServerError(
                f"s3 DeleteObjects: {len(errors)} not deleted, first {first.get('Code')}"
            )


def _file_obj(path: str, size: int, modified: datetime) -> Obj:
    return Obj(name=name_of(path), size=size, is_dir=False, modified=modified, path=path)


def _with_scheme(address: str, scheme: str = "https") -> str:
    """``address`` as a URL: a bare host gets ``scheme`` (AList's SDK adds https)."""
    address = address.strip()
    return address if "://" in address else f"{scheme}://{address}"


def _to_host(host: str) -> Callable[..., None]:
    """A hook that points a GET request at ``host`` before it is signed (AList's
    custom host): the link is signed, if at all, for the host the client will ask."""
    wanted = urlsplit(host)

    def point(request: Any, **_: Any) -> None:
        parts = urlsplit(request.url)
        request.url = urlunsplit(
            (wanted.scheme, wanted.netloc, parts.path, parts.query, parts.fragment)
        )

    return point


DRIVER = S3Driver
