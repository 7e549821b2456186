"""A write into a storage that does not take writes (an Alias without "writable") says
so and where to change it, in the API's envelope and in each protocol's own terms."""

from __future__ import annotations

import json
from pathlib import Path
from urllib.parse import quote

from tests.api.fs_helpers import mount_local
from tests.conftest import Api

TREE: dict[str, bytes | str] = {"a.txt": "alpha"}
SAID = "storage /view is not writable"


async def read_only_alias(api: Api, root: Path) -> str:
    await mount_local(api, "/disk", root)
    admin = await api.login()
    body = {"mount_path": "/view", "driver": "Alias", "addition": json.dumps({"paths": "/disk"})}
    made = await api.post("/api/admin/storage/create", body, token=admin)
    assert made["code"] == 200, made
    return admin


async def test_an_upload_into_a_read_only_alias_says_where_to_change_it(
    api: Api, root: Path
) -> None:
    admin = await read_only_alias(api, root)
    headers = {"Authorization": admin, "File-Path": quote("/view/new.txt")}
    answer = (await api.client.put("/api/fs/put", content=b"x", headers=headers)).json()
    assert answer["code"] == 500, answer  # AList's code for a driver's refusal
    assert answer["message"].startswith(SAID), answer
    assert '"Writable"' in answer["message"] and "Storages" in answer["message"]
    made = await api.post("/api/fs/mkdir", {"path": "/view/dir"}, token=admin)
    assert (made["code"], made["message"]) == (answer["code"], answer["message"])
    assert not (root / "new.txt").exists()
