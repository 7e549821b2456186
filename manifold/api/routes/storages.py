"""Administration of storages and the driver catalogue."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from starlette.responses import Response

from manifold.api.deps import ServicesDep
from manifold.api.envelope import ok, paged
from manifold.api.fs_time import iso_time
from manifold.api.schemas import Int64, PageNumber, RequestBody
from manifold.models import DiskUsage, Storage


class StorageBody(RequestBody):
    id: Int64 = 0
    mount_path: str = ""
    order: Int64 = 0
    driver: str = ""
    cache_expiration: Int64 = 30
    addition: str = "{}"
    remark: str = ""
    disabled: bool = False
    disable_index: bool = False
    enable_sign: bool = False
    order_by: str = ""
    order_direction: str = ""
    extract_folder: str = ""
    web_proxy: bool = False
    webdav_policy: str = "native_proxy"
    proxy_range: bool = False
    down_proxy_url: str = ""

    def as_storage(self) -> Storage:
        return Storage(**self.model_dump())


def storage_json(storage: Storage, usage: DiskUsage | None = None) -> dict[str, Any]:
    shown = asdict(storage)
    shown["modified"] = iso_time(storage.modified)
    if usage is not None:  # left out where the back end does not know it
        shown["mount_details"] = mount_details(usage)
    return shown


def mount_details(usage: DiskUsage) -> dict[str, int]:
    """A storage's space under OpenList's names (the storages table, ``/api/fs/get``)."""
    return {"total_space": usage.total, "used_space": usage.used, "free_space": usage.free}


async def list_storages(
    services: ServicesDep, page: PageNumber = 1, per_page: PageNumber = 0
) -> Response:
    storages, total = await services.storages.page(page, per_page)
    usage = await services.storages.usage(storages)
    shown = [storage_json(services.storages.shown(s), usage.get(s.id)) for s in storages]
    return paged(shown, total)


async def get_storage(id: Int64, services: ServicesDep) -> Response:
    return ok(storage_json(services.storages.shown(await services.storages.get(id))))


async def create_storage(body: StorageBody, services: ServicesDep) -> Response:
    storage = await services.storages.create(body.as_storage())
    return ok({"id": storage.id})


async def update_storage(body: StorageBody, services: ServicesDep) -> Response:
    await services.storages.update(body.as_storage())
    return ok()


async def delete_storage(id: Int64, services: ServicesDep) -> Response:
    await services.storages.delete(id)
    return ok()


async def enable_storage(id: Int64, services: ServicesDep) -> Response:
    await services.storages.set_disabled(id, False)
    return ok()


async def disable_storage(id: Int64, services: ServicesDep) -> Response:
    await services.storages.set_disabled(id, True)
    return ok()


async def load_all(services: ServicesDep) -> Response:
    await services.storages.load_all()
    return ok()


async def driver_list(services: ServicesDep) -> Response:
    registry = services.storages.registry
    return ok({info.name: registry.info_json(info.name) for info in registry.all()})


async def driver_names(services: ServicesDep) -> Response:
    return ok([info.name for info in services.storages.registry.all() if info.available])


async def driver_info(driver: str, services: ServicesDep) -> Response:
    return ok(services.storages.registry.info_json(driver))
