"""The Azure Blob Storage driver: a container of a storage account, through the Azure
SDK's async client, authorized with the account's key (Shared Key).

Folders are prefixes (``manifold.drivers.prefixes``), with a marker blob for each
folder made here (``listing``). Listings ask for one level (delimiter ``/``) a page at
a time, following the service's continuation. Downloads are SAS URLs valid
``sign_url_expire`` hours, so ``/d`` redirects the client to the service and ``/p``
fetches the same URL with ranges. Uploads are staged blocks committed only when whole
(``upload``). Copies run on the service (Copy Blob from a SAS URL of the source,
waited for until it ends); a folder is copied blob by blob, and a folder moved or
renamed loses its source blobs only once every copy exists, so a failure midway leaves
the source whole and removes what was copied.
"""

from __future__ import annotations

import asyncio
import builtins
from collections.abc import AsyncIterator, Awaitable
from contextlib import suppress
from datetime import UTC, datetime, timedelta
from typing import Any, ClassVar, TypeVar

from azure.core import MatchConditions
from azure.core.async_paging import AsyncItemPaged
from azure.storage.blob import BlobSasPermissions, generate_blob_sas
from azure.storage.blob.aio import BlobClient, BlobServiceClient, ContainerClient

from manifold.drivers.base import (
    ErrorTable,
    LinkArgs,
    Upload,
    gathered,
    made_progress,
    temporary_name,
    translating,
    validate_name,
)
from manifold.drivers.batches import each, shielded
from manifold.drivers.prefixes import PrefixDriver, join, key_of, name_of, prefix_of
from manifold.errors import (
    NotAFile,
    NotSupported,
    ObjectExists,
    ObjectNotFound,
    ServerError,
)
from manifold.models import Link, Obj

from .account import account_of, container_of, key_checked
from .failures import errors_for
from .listing import FOLDER_METADATA, file_obj, mtime_metadata, page_objects
from .meta import DEFAULT_SIGN_HOURS, Addition
from .native import NativeBlocks
from .upload import MAX_BLOCKS, BlockUploader

T = TypeVar("T")

# A copy's source URL outlives any copy the service may still be running.
_COPY_SAS = timedelta(days=7)
# What a direct upload's SAS allows: create and write (no read, list or delete).
_WRITE = "cw"


class AzureBlobDriver(PrefixDriver[Addition]):
    # No EXCLUSIVE_CREATE: a put or a file copy that must not replace is conditional
    # (If-None-Match: *), but a folder is copied blob by blob, and of racing folder
    # copies each would refuse another's blobs halfway; a look before each write
    # narrows the window only. No FOLDER_TIMES, no FOLDER_MOVE (``PrefixDriver``).
    PROMISES: ClassVar[frozenset[str]] = frozenset()
    # Names a listing page asks for (the service's own maximum is 5000).
    PAGE_SIZE: ClassVar[int] = 5000
    # Bytes of each staged block; an upload that fits in one is a single Put Blob.
    BLOCK_SIZE: ClassVar[int] = 4 << 20
    # Seconds of one hour of ``sign_url_expire``: a test shortens it to see links expire.
    SIGN_HOUR: ClassVar[int] = 3600
    # Seconds between two looks at a copy the service runs in the background.
    COPY_POLL: ClassVar[float] = 0.5

    _service: BlobServiceClient | None = None
    _uploader: BlockUploader | None = None
    _native: NativeBlocks | None = None
    # The API's multipart uploads are staged blocks of the blob (``native``): of any
    # size, as many as a blob takes.
    MULTIPART_MIN_PART: ClassVar[int] = 1
    MULTIPART_MAX_PARTS: ClassVar[int] = MAX_BLOCKS

    # --- lifecycle -------------------------------------------------------------

    async def init(self) -> None:
        options = self.options
        account = account_of(options.endpoint)
        key = key_checked(options.access_key)
        container = container_of(options.container_name)
        self._root = "/" + options.root_folder_path.strip("/")
        await self.drop()
        self._account, self._key, self._container_name = account, key, container
        self._errors: ErrorTable = errors_for(account.url, container)
        service = BlobServiceClient(
            account.url,
            credential={"account_name": account.name, "account_key": key},
            # The driver's layers retry idempotent calls; one more try here covers a
            # block of an upload that met a passing error.
            retry_total=1,
            connection_timeout=10,
            read_timeout=60,
        )
        try:
            self._container: ContainerClient = service.get_container_client(container)
            await self._ensure_container()
        except BaseException:
            await service.close()
            raise
        self._service = service
        self._uploader = BlockUploader(self._errors, self.BLOCK_SIZE)
        self._native = NativeBlocks(self._blob, self._call, self._copy_blob)

    async def drop(self) -> None:
        service, self._service = self._service, None
        self._uploader = self._native = None
        if service is not None:
            with suppress(Exception):  # closing what may be broken already
                await service.close()

    async def _ensure_container(self) -> None:
        """Make the container when it does not exist, as OpenList does."""
        try:
            await self._call(self._container.get_container_properties())
        except ObjectNotFound:
            with suppress(ObjectExists):  # made meanwhile by someone else
                await self._call(self._container.create_container())

    async def _call(self, request: Awaitable[T]) -> T:
        """One request of the blob API, its errors translated."""
        with translating(self._errors):
            return await request

    def _blob(self, key: str) -> BlobClient:
        return self._container.get_blob_client(key)

    # --- reading ---------------------------------------------------------------

    async def list(self, dir: Obj) -> builtins.list[Obj]:
        return await gathered(self.list_pages(dir), dir.path, self.resources.max_listing_entries)

    async def _listing(self, folder: str) -> AsyncIterator[tuple[bool, builtins.list[Obj]]]:
        seen: set[str] = set()
        async for page in self._pages(prefix_of(folder), delimiter="/"):
            yield not page, page_objects(page, folder, self._folder_time(), seen)

    async def link(self, file: Obj, args: LinkArgs) -> Link:
        if file.is_dir:
            raise NotAFile()
        key = key_of(file.path)
        # A URL to nothing would answer 404 only when fetched.
        await self._call(self._blob(key).get_blob_properties())
        seconds = self._sign_seconds()
        return Link(url=self._signed_url(key, timedelta(seconds=seconds)), expires_in=seconds)

    def _sign_seconds(self) -> int:
        hours = self.options.sign_url_expire
        return (hours if hours > 0 else DEFAULT_SIGN_HOURS) * self.SIGN_HOUR

    def direct_upload_tools(self) -> builtins.list[str]:
        return ["HttpDirect"] if self.options.enable_direct_upload else []

    async def direct_upload_info(self, dir: Obj, name: str, size: int) -> dict[str, Any]:
        """A service SAS that may create or write this one blob and nothing else, for
        as long as a download link lives; Put Blob needs the blob type header."""
        if not self.options.enable_direct_upload:
            raise NotSupported("not implement")
        valid = timedelta(seconds=self._sign_seconds())
        url = self._signed_url(key_of(join(dir.path, name)), valid, _WRITE)
        headers = {"x-ms-blob-type": "BlockBlob"}
        return {"upload_url": url, "chunk_size": 0, "headers": headers, "method": "PUT"}

    def _signed_url(self, key: str, valid: timedelta, permission: str = "r") -> str:
        """The blob's URL with a service SAS (read-only unless said) valid for ``valid``."""
        token = generate_blob_sas(
            self._account.name,
            self._container_name,
            key,
            account_key=self._key,
            permission=BlobSasPermissions.from_string(permission),
            expiry=datetime.now(UTC) + valid,
        )
        return f"{self._blob(key).url}?{token}"

    # --- writing ---------------------------------------------------------------

    async def _mark_folder(self, path: str) -> None:
        marker = self._blob(prefix_of(path))
        await self._call(marker.upload_blob(b"", overwrite=True, metadata=FOLDER_METADATA))

    async def _upload(self, path: str, upload: Upload) -> Obj:
        assert self._uploader is not None and self._native is not None
        metadata = mtime_metadata(upload.modified)
        if upload.native is not None:
            size = await self._native.finish(
                key_of(path), upload.native, upload.overwrite, metadata
            )
        else:
            size = await self._uploader.put(self._blob(key_of(path)), upload, metadata)
        modified = upload.modified or datetime.now(UTC)
        return Obj(name=name_of(path), size=size, is_dir=False, modified=modified, path=path)

    # --- the API's multipart uploads (``native``) ----------------------------------

    async def multipart_begin(self, dst_dir: Obj, name: str, hidden: bool) -> str:
        path = join(dst_dir.path, self._refuse_reserved(validate_name(name)))
        temp = key_of(join(dst_dir.path, temporary_name())) if hidden else ""
        return NativeBlocks.begin(key_of(path), temp)

    # --- folders as prefixes -----------------------------------------------------

    async def _pages(
        self, prefix: str, delimiter: str = "", limit: int = 0
    ) -> AsyncIterator[builtins.list[Any]]:
        """The service's listing pages of ``prefix`` (one level with ``delimiter``)."""
        wanted: dict[str, Any] = {
            "name_starts_with": prefix or None,
            "include": ["metadata"],
            "results_per_page": limit or self.PAGE_SIZE,
        }
        paged: AsyncItemPaged[Any] = (
            self._container.walk_blobs(delimiter=delimiter, **wanted)
            if delimiter
            else self._container.list_blobs(**wanted)
        )
        pages = paged.by_page()
        while True:
            with translating(self._errors):
                try:
                    page = await anext(pages)
                except StopAsyncIteration:
                    return
                items = [item async for item in page]
            made_progress()
            yield items
            if limit:
                return

    async def _has_keys(self, prefix: str) -> bool:
        async for page in self._pages(prefix, limit=1):
            return bool(page)
        return False

    async def _sized_keys(self, prefix: str) -> AsyncIterator[tuple[str, int]]:
        """Every blob that starts with ``prefix``, folder markers included."""
        async for page in self._pages(prefix):
            for item in page:
                yield item.name, int(item.size or 0)

    async def _file(self, path: str) -> Obj | None:
        try:
            properties = await self._call(self._blob(key_of(path)).get_blob_properties())
        except ObjectNotFound:
            return None
        return file_obj(path, properties)

    # --- copies and removals ------------------------------------------------------

    async def _copy_file(self, src: Obj, target: str) -> Obj:
        """The copy as the service has it; ``src``'s values if it is gone already."""
        await self._copy_blob(key_of(src.path), key_of(target), exclusive=True)
        return await self._file(target) or Obj(
            name=name_of(target), size=src.size, is_dir=False, modified=src.modified, path=target
        )

    async def _copy_key(self, key: str, new_key: str, size: int) -> None:
        await self._copy_blob(key, new_key)

    async def _copy_blob(self, name: str, new_name: str, exclusive: bool = False) -> None:
        """Copy blob ``name`` to ``new_name`` on the service and wait until it is whole;
        with ``exclusive`` the service refuses a taken name (``ObjectExists``)."""
        source = self._signed_url(name, _COPY_SAS)
        target = self._blob(new_name)
        condition = MatchConditions.IfMissing if exclusive else None
        started = await self._call(target.start_copy_from_url(source, match_condition=condition))
        status = started.get("copy_status")
        try:
            while status == "pending":  # a big blob, copied in the service's background
                await asyncio.sleep(self.COPY_POLL)
                made_progress()
                properties = await self._call(target.get_blob_properties())
                status = properties.copy.status
        except BaseException:
            await shielded(self._abort_copy(target, str(started.get("copy_id"))))
            raise
        if status != "success":
            await shielded(self._delete_key(new_name, missing_ok=True))
            raise ServerError(f"azure blob: the copy of {name_of(name)} ended {status}")

    async def _abort_copy(self, target: BlobClient, copy_id: str) -> None:
        try:
            await self._call(target.abort_copy(copy_id))
        finally:
            await self._delete_key(target.blob_name, missing_ok=True)

    async def _delete_keys(self, keys: builtins.list[str]) -> None:
        """Delete ``keys``: files first, folder markers after, so a removal that stops
        halfway leaves the folders it had not emptied standing."""
        files = [key for key in keys if not key.endswith("/")]
        markers = sorted((key for key in keys if key.endswith("/")), key=len, reverse=True)
        for batch in (files, markers):
            await each(
                batch,
                lambda key: self._delete_key(key, missing_ok=True),
                self.TREE_CONCURRENCY,
            )

    async def _delete_key(self, key: str, missing_ok: bool = False) -> None:
        try:
            await self._call(self._blob(key).delete_blob(delete_snapshots="include"))
        except ObjectNotFound:
            if not missing_ok:
                raise


DRIVER = AzureBlobDriver
