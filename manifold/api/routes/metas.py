"""Administration of meta records."""

from __future__ import annotations

from starlette.responses import Response

from manifold.api.deps import ServicesDep
from manifold.api.envelope import ok, paged
from manifold.api.schemas import Int64, PageNumber, RequestBody, meta_json
from manifold.models import Meta


class MetaBody(RequestBody):
    id: Int64 = 0
    path: str = ""
    password: str = ""
    p_sub: bool = False
    write: bool = False
    w_sub: bool = False
    hide: str = ""
    h_sub: bool = False
    readme: str = ""
    r_sub: bool = False
    header: str = ""
    header_sub: bool = False

    def as_meta(self) -> Meta:
        return Meta(**self.model_dump())


async def list_metas(
    services: ServicesDep, page: PageNumber = 1, per_page: PageNumber = 0
) -> Response:
    metas, total = await services.metas.page(page, per_page)
    return paged([meta_json(m) for m in metas], total)


async def get_meta(id: Int64, services: ServicesDep) -> Response:
    return ok(meta_json(await services.metas.get(id)))


async def create_meta(body: MetaBody, services: ServicesDep) -> Response:
    await services.metas.create(body.as_meta())
    return ok()


async def update_meta(body: MetaBody, services: ServicesDep) -> Response:
    await services.metas.update(body.as_meta())
    return ok()


async def delete_meta(id: Int64, services: ServicesDep) -> Response:
    await services.metas.delete(id)
    return ok()
