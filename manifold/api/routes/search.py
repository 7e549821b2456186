"""Search (``/api/fs/search``) and the index administration (``/api/admin/index/*``).

A search binds its fields as AList's ANY routes do: a JSON body, a form, or the query.
"""

from __future__ import annotations

from dataclasses import asdict

from fastapi import Request
from starlette.responses import Response

from manifold.api.binding import bind
from manifold.api.deps import CallerDep, ServicesDep
from manifold.api.envelope import ok, paged
from manifold.api.fs_render import file_type
from manifold.api.openapi import bound
from manifold.api.schemas import Int64, PageNumber, RequestBody
from manifold.paths import clean_path
from manifold.services.search.service import SearchRequest


class SearchBody(RequestBody):
    # No defaults that pass validation: AList answers a missing page with "page can't < 1".
    parent: str = "/"
    keywords: str = ""
    scope: Int64 = 0
    page: PageNumber = 0
    per_page: PageNumber = 0
    password: str = ""


SEARCH_INPUT = bound(SearchBody)


class UpdateIndexBody(RequestBody):
    paths: list[str] = []
    max_depth: Int64 = 0


UPDATE_INDEX_INPUT = bound(UpdateIndexBody)


async def search_fs(request: Request, caller: CallerDep, services: ServicesDep) -> Response:
    services.search.searcher()
    body = await bind(request, SearchBody)
    hits, total = await services.search.search(caller, SearchRequest(**body.model_dump()))
    content = [
        {
            "parent": n.parent,
            "name": n.name,
            "is_dir": n.is_dir,
            "size": n.size,
            "type": file_type(services, n.name, n.is_dir),
        }
        for n in hits
    ]
    return paged(content, total)


async def build_index(services: ServicesDep) -> Response:
    services.search.build_index()
    return ok()


async def update_index(request: Request, services: ServicesDep) -> Response:
    services.search.searcher()
    body = await bind(request, UpdateIndexBody)
    services.search.update_index([clean_path(p) for p in body.paths], body.max_depth)
    return ok()


async def stop_index(services: ServicesDep) -> Response:
    services.search.stop_index()
    return ok()


async def clear_index(services: ServicesDep) -> Response:
    await services.search.clear_index()
    return ok()


async def index_progress(services: ServicesDep) -> Response:
    return ok(asdict(services.search.index_progress()))
