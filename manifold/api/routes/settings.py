"""Public settings and their administration."""

from __future__ import annotations

from fastapi import Request
from starlette.responses import PlainTextResponse, Response

from manifold.api.deps import ServicesDep, get_services
from manifold.api.envelope import ok, raw
from manifold.api.schemas import RequestBody, setting_json
from manifold.errors import BadRequest
from manifold.services.archive.service import EXTENSIONS as ARCHIVE_EXTENSIONS


class SettingBody(RequestBody):
    key: str = ""
    value: str = ""


async def ping() -> Response:
    return PlainTextResponse("pong")


async def public_settings(request: Request) -> Response:
    # Called on every page load: a plain handler, no dependency machinery.
    return raw(get_services(request).settings.public_envelope())


async def archive_extensions() -> Response:
    """The archive extensions this server can open. The web page reads this before
    anything else, and an error here would leave every page blank."""
    return ok(list(ARCHIVE_EXTENSIONS))


async def offline_download_tools(services: ServicesDep) -> Response:
    """The offline download tools that are ready: SimpleHttp always, the others once
    they have answered (at start or after their settings were saved)."""
    return ok(services.offline.ready())


async def list_settings(services: ServicesDep, group: str = "", groups: str = "") -> Response:
    wanted = groups or group
    if not wanted:
        items = services.settings.all_items()
    else:
        items = services.settings.by_groups(_ints(wanted))
    return ok([setting_json(i) for i in items])


async def default_settings(services: ServicesDep, group: str = "", groups: str = "") -> Response:
    """The default items of a settings tab; the page puts them in its form."""
    wanted = groups or group
    items = services.settings.defaults(_ints(wanted) if wanted else None)
    return ok([setting_json(i) for i in items])


def _ints(text: str) -> list[int]:
    try:
        return [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise BadRequest(f"invalid group list: {text!r}") from None


async def get_setting(services: ServicesDep, key: str = "", keys: str = "") -> Response:
    if key:
        return ok(setting_json(services.settings.items_for([key])[0]))
    if keys:
        wanted = [k for k in keys.split(",") if k]
        return ok([setting_json(i) for i in services.settings.items_for(wanted)])
    raise BadRequest("record not found")


async def save_settings(body: list[SettingBody], services: ServicesDep) -> Response:
    await services.settings.save((item.key, item.value) for item in body)
    return ok()


async def delete_setting(key: str, services: ServicesDep) -> Response:
    await services.settings.delete(key)
    return ok({})


async def reset_token(services: ServicesDep) -> Response:
    return ok(await services.settings.reset_token())
