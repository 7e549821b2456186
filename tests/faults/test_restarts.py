"""A back end's server killed while a download and an upload run through it, then
started again: the download fails rather than ending short, the upload leaves nothing
under any name, and the storage serves again by itself once the server is back (for
the back ends whose server ``Backend.server`` lets the test kill)."""

from __future__ import annotations

import asyncio
import secrets
import time
from urllib.parse import quote

import httpx

from tests.api.fs_helpers import fs_list
from tests.api.test_fs_write import put
from tests.faults.backends import Backend
from tests.faults.conftest import Site, on_every_backend

# Bigger than what the sockets between the server and the proxy hold (a few MiB on
# loopback), so that the kill lands while the server is still sending; held to RATE
# bytes a second, the transfers last seconds.
PAYLOAD = secrets.token_bytes(24 << 20)
RATE = 2 << 20
UNDER_WAY = 1.5  # seconds the transfers run before the kill
RECOVER_BOUND = 60.0  # generous: a loaded machine


async def test_a_server_killed_mid_transfer_fails_it_and_serves_again_once_back(
    site: Site,
) -> None:
    restartable = Site(site.api, {n: b for n, b in site.backends.items() if b.server}, site.local)
    assert restartable.backends, "no back end's server can be killed here"
    problems = await on_every_backend(restartable, lambda b: _killed(site, b))
    assert not problems, problems


async def _killed(site: Site, backend: Backend) -> None:
    assert backend.server is not None
    folder = f"{backend.mount}/killed"
    assert (await put(site.api, f"{folder}/src.bin", PAYLOAD))["code"] == 200
    await asyncio.sleep(backend.saves_within)  # a file the server itself would lose
    backend.proxy.bandwidth(RATE)
    download = asyncio.ensure_future(_whole(site, f"{folder}/src.bin"))
    upload = asyncio.ensure_future(put(site.api, f"{folder}/up.bin", PAYLOAD))
    await asyncio.sleep(UNDER_WAY)
    backend.server.kill()
    try:
        assert not await download, "a download cut by the kill was delivered as whole"
        assert (await upload)["code"] != 200, "an upload cut by the kill succeeded"
    finally:
        backend.proxy.clear()
        backend.server.start()
    await _recovered(site, folder)
    assert await backend.files("/killed") == {"src.bin": len(PAYLOAD)}
    assert await _whole(site, f"{folder}/src.bin"), "the download after the restart"


async def _whole(site: Site, path: str) -> bool:
    """Whether a download of ``path`` answered 200 with every byte (a cut is not)."""
    signed = f"/p{quote(path)}?sign={site.api.services.signer.sign(path)}"
    try:
        response = await site.api.client.get(signed)
    except httpx.TransportError:
        return False
    return response.status_code == 200 and response.content == PAYLOAD


async def _recovered(site: Site, folder: str) -> None:
    deadline = time.monotonic() + RECOVER_BOUND
    while (body := await fs_list(site.api, folder, refresh=True))["code"] != 200:
        assert time.monotonic() < deadline, f"still failing after the restart: {body}"
        await asyncio.sleep(0.5)
