"""A write into an Alias without "Writable" is refused on every protocol as a
permission refusal, with the same words as the API: the storage and the setting."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from manifold.models import Perm, Storage
from manifold.services.auth.users import UserInput
from tests.api.fs_helpers import make_tree
from tests.conftest import start_services
from tests.protocols.perm_clients import Login, Ports, Refused, connect, listening

ALL_BITS = int(
    Perm.WRITE | Perm.RENAME | Perm.MOVE | Perm.COPY | Perm.REMOVE | Perm.WEBDAV_READ
    | Perm.WEBDAV_MANAGE | Perm.FTP_READ | Perm.FTP_MANAGE
)  # fmt: skip
SAID = 'storage /view is not writable: turn on "Writable"'


@pytest.fixture(scope="module")
async def site(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[tuple[Ports, Path]]:
    folder = tmp_path_factory.mktemp("not-writable")
    services = await start_services(folder / "data")
    disk = make_tree(folder / "disk", {"a.txt": "alpha"})
    try:
        local = json.dumps({"root_folder_path": str(disk)})
        await services.storages.create(Storage(0, "/local", "Local", addition=local))
        view = json.dumps({"paths": "/local"})
        await services.storages.create(Storage(0, "/view", "Alias", addition=view))
        await services.users.create(UserInput("plain", "plain-pw", "/", permission=ALL_BITS))
        async with listening(services) as ports:
            yield ports, disk
    finally:
        await services.stop()


# The API's answer: tests/api/test_not_writable.py.
@pytest.mark.parametrize("protocol", ["dav", "sftp", "ftp"])
async def test_a_write_into_a_read_only_alias_names_the_setting(
    site: tuple[Ports, Path], protocol: str
) -> None:
    ports, disk = site
    client = await connect(protocol, ports, Login("plain"))
    try:
        with pytest.raises(Refused) as refused:
            await client.write(f"/view/{protocol}.txt", b"x")
        text = str(refused.value)
        if protocol == "ftp":  # 550, which the test client reads as denied by its words
            assert f"550 {SAID}" in text, text
        else:
            assert refused.value.kind == "denied", text
        if protocol in ("sftp", "dav"):
            assert SAID in text, text
    finally:
        await client.close()
    assert not (disk / f"{protocol}.txt").exists()
