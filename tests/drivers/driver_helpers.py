"""Helpers shared by the driver tests: drivers a test builds (dropped when it ends),
folders made level by level, the admin form of a driver, a link read whole and in
part, and a storage mounted through the API and used end to end."""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable
from typing import Any, Generic, TypeVar
from urllib.parse import quote

import httpx

from manifold.drivers.base import Driver, DriverConfig
from manifold.models import Obj
from manifold.vfs.layers import wrap
from tests.conftest import Api

D = TypeVar("D", bound=Driver[Any])


class Built(Generic[D]):
    """Initialised drivers ``build`` made for a test; ``drop`` drops each one."""

    def __init__(self, build: Callable[..., Awaitable[D]], config: DriverConfig) -> None:
        self.build = build
        self.config = config
        self.built: list[D] = []

    async def __call__(self, *args: Any, **options: Any) -> D:
        driver = await self.build(*args, **options)
        self.built.append(driver)
        return driver

    async def wrapped(self, *args: Any, **options: Any) -> Driver[Any]:
        """A driver in the layers the server mounts it in."""
        return wrap(await self(*args, **options), self.config)

    async def drop(self) -> None:
        for driver in self.built:
            await driver.drop()


async def made(driver: Driver[Any], *names: str) -> Obj:
    """The folder ``names`` below the root, made level by level."""
    current = await driver.root_obj()
    for name in names:
        current = await driver.make_dir(current, name)
    return current


async def driver_form(api: Api, name: str) -> dict[str, Any]:
    """What the admin's storage form shows of driver ``name`` (``additional``, ``config``)."""
    await api.as_admin()
    body = await api.get("/api/admin/driver/info", params={"driver": name})
    assert body["code"] == 200, body
    info: dict[str, Any] = body["data"]
    return info


def form_items(items: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    """Each item of a driver's form as (name, type, default, required)."""
    return [(i["name"], i["type"], i["default"], i["required"]) for i in items]


async def check_link_reads(url: str, data: bytes) -> httpx.Response:
    """``url`` serves ``data`` whole and a range of it; the whole answer."""
    async with httpx.AsyncClient() as http:
        whole = await http.get(url)
        part = await http.get(url, headers={"Range": "bytes=2-4"})
    assert (whole.status_code, whole.content) == (200, data)
    assert (part.status_code, part.content) == (206, data[2:5])
    return whole


async def check_served_through_the_api(api: Api, driver: str, addition: str, mount: str) -> None:
    """The storage mounted at ``mount`` (downloads redirected) and at ``mount`` + ``p``
    (proxied) makes a folder ``docs``, stores a file in it, lists it, serves it both
    ways and removes it again (the folder stays)."""
    await api.as_admin()
    for path, proxied in ((mount, False), (f"{mount}p", True)):
        body = {"mount_path": path, "driver": driver, "addition": addition, "web_proxy": proxied}
        created = await api.post("/api/admin/storage/create", body)
        assert created["code"] == 200, created
    assert (await api.post("/api/fs/mkdir", {"path": f"{mount}/docs"}))["code"] == 200
    data = os.urandom(300_000)
    sent = await api.client.put(
        "/api/fs/put",
        content=data,
        headers={"Authorization": api.token, "File-Path": quote(f"{mount}/docs/paper ü.bin")},
    )
    assert sent.json()["code"] == 200, sent.text
    listed = await api.post("/api/fs/list", {"path": f"{mount}/docs", "refresh": True})
    assert [item["name"] for item in listed["data"]["content"]] == ["paper ü.bin"]
    redirected = await api.client.get(f"/d{signed(api, f'{mount}/docs/paper ü.bin')}")
    assert redirected.status_code == 302
    async with httpx.AsyncClient() as http:
        assert (await http.get(redirected.headers["location"])).content == data
    proxied = await api.client.get(f"/p{signed(api, f'{mount}p/docs/paper ü.bin')}")
    assert (proxied.status_code, proxied.content) == (200, data)
    removed = await api.post("/api/fs/remove", {"dir": f"{mount}/docs", "names": ["paper ü.bin"]})
    assert removed["code"] == 200, removed


def signed(api: Api, path: str) -> str:
    """``path`` quoted, with the server's download signature."""
    return f"{quote(path)}?sign={api.services.signer.sign(path)}"
