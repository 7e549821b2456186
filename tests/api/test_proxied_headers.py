"""Answers streamed through the server from a WebDAV back end (``/d`` and ``/p``) are
the server's own: one ``date``, AList's ``attachment`` disposition, and of the back
end's headers only what the client needs to read the body. Against the real wsgidav
the WebDav driver's tests use, through a real uvicorn."""

from __future__ import annotations

import json
import secrets
from collections.abc import Iterator
from urllib.parse import quote

import httpx
import pytest

from manifold.container import Services
from manifold.models import Storage
from tests.api.live_server import serving
from tests.drivers.webdav_server import DavServer, wsgidav
from tests.fixtures.processes import running

# What the client may see of the back end's answer; anything else is the server's own.
KEPT = {"accept-ranges", "content-encoding", "content-length", "content-range",
        "content-type", "etag", "last-modified"}  # fmt: skip
OWN = {"date", "server", "vary", "content-disposition", "x-content-type-options"}
DATA = secrets.token_bytes(70_000)
NAME = "report 1 é.pdf"


@pytest.fixture(scope="module")
def dav(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DavServer]:
    with running(wsgidav(tmp_path_factory.mktemp("proxied-dav"), "basic")) as server:
        yield server


async def mount(services: Services, dav: DavServer) -> str:
    folder = f"f{secrets.token_hex(4)}"
    (dav.root / folder).mkdir()
    (dav.root / folder / NAME).write_bytes(DATA)
    fields = {"address": dav.url, "username": dav.username, "password": dav.password,
              "root_folder_path": f"/{folder}"}  # fmt: skip
    await services.storages.create(Storage(0, "/remote", "WebDav", addition=json.dumps(fields)))
    return f"/remote/{NAME}"


@pytest.mark.parametrize("way", ["d", "p"])
async def test_a_proxied_answer_carries_the_server_s_headers(
    services: Services, dav: DavServer, way: str
) -> None:
    path = await mount(services, dav)
    sign = services.signer.sign(path)
    async with serving(services) as base, httpx.AsyncClient() as client:
        url = f"{base}/{way}{quote(path)}?sign={sign}"
        whole = await client.get(url)
        part = await client.get(url, headers={"Range": "bytes=10-19"})
    assert (whole.status_code, whole.content) == (200, DATA)
    assert (part.status_code, part.content) == (206, DATA[10:20])
    assert part.headers["content-range"] == f"bytes 10-19/{len(DATA)}"
    for answer in (whole, part):
        names = [name.lower() for name, _ in answer.headers.raw]
        names_text = [n.decode() for n in names]
        assert names_text.count("date") == 1, answer.headers
        assert set(names_text) <= KEPT | OWN, answer.headers
        disposition = answer.headers["content-disposition"]
        assert disposition.startswith('attachment; filename="report 1 _.pdf"')
        assert "filename*=UTF-8''report%201%20%C3%A9.pdf" in disposition
        assert answer.headers["etag"] and answer.headers["last-modified"]
