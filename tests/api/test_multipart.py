"""Resumable multipart uploads (OpenList's ``/api/fs/multipart/*``) through the API."""

from __future__ import annotations

import asyncio
import hashlib
import os
from pathlib import Path
from typing import Any

from manifold.container import Services
from tests.api.fs_helpers import save_settings
from tests.conftest import Api

MB = 1 << 20
TREE = {"keep.txt": "keep", "sub/inner.txt": "inner"}


def payload(size: int, seed: int = 1) -> bytes:
    block = hashlib.sha256(str(seed).encode()).digest()
    return (block * (size // len(block) + 1))[:size]


def pieces(data: bytes, chunk: int) -> list[bytes]:
    return [data[i : i + chunk] for i in range(0, len(data), chunk)]


async def init(
    api: Api, path: str, data: bytes, chunk: int = MB, token: str | None = None, **extra: str
) -> dict[str, Any]:
    headers = {
        "File-Path": path,
        "X-File-Size": str(len(data)),
        "X-Chunk-Size": str(chunk),
        "X-File-Sha256": hashlib.sha256(data).hexdigest(),
        **extra,
    }
    return await api.post("/api/fs/multipart/init", headers=headers, token=token)


async def send(
    api: Api, upload_id: str, index: int, body: bytes, token: str | None = None
) -> dict[str, Any]:
    headers = {
        "Authorization": api.token if token is None else token,
        "X-Upload-Id": upload_id,
        "X-Chunk-Index": str(index),
    }
    response = await api.client.put("/api/fs/multipart/chunk", content=body, headers=headers)
    assert response.status_code == 200, response.text
    answer: dict[str, Any] = response.json()
    return answer


async def complete(api: Api, upload_id: str, token: str | None = None) -> dict[str, Any]:
    return await api.post(
        "/api/fs/multipart/complete", headers={"X-Upload-Id": upload_id}, token=token
    )


async def status(api: Api, upload_id: str, token: str | None = None) -> dict[str, Any]:
    return await api.get("/api/fs/multipart/status", params={"upload_id": upload_id}, token=token)


def staged(services: Services) -> list[str]:
    """Every file under the staging folder (parts and half-written parts)."""
    root = services.config.multipart_staging
    return [os.path.join(d, f) for d, _, files in os.walk(root) for f in files]


def visible(root: Path) -> list[str]:
    return sorted(os.listdir(root))


async def test_out_of_order_and_duplicate_chunks_make_the_file(
    admin: Api, root: Path, services: Services
) -> None:
    data = payload(3 * MB + 1234)
    started = await init(admin, "/local/big.bin", data)
    assert started["code"] == 200, started
    shot = started["data"]
    assert (shot["chunk_size"], shot["total_chunks"], shot["resumed"]) == (MB, 4, False)
    assert (shot["state"], shot["received"], shot["received_bytes"]) == ("receiving", [], 0)
    parts = pieces(data, MB)
    for index in (3, 1, 0, 1):
        answer = await send(admin, shot["upload_id"], index, parts[index])
        assert answer["code"] == 200, answer
    assert answer["data"]["received"] == [[0, 1], [3, 3]]
    assert answer["data"]["frontier"] == 2
    assert answer["data"]["received_bytes"] == 2 * MB + 1234
    assert (await send(admin, shot["upload_id"], 2, parts[2]))["code"] == 200
    done = await complete(admin, shot["upload_id"])
    assert done["code"] == 200, done
    assert (done["data"]["state"], done["data"]["received"]) == ("completed", [[0, 3]])
    assert (root / "big.bin").read_bytes() == data
    assert staged(services) == []
    assert (await status(admin, shot["upload_id"]))["code"] == 404


async def test_init_again_resumes_the_open_session(admin: Api) -> None:
    data = payload(2 * MB + 5)
    first = (await init(admin, "/local/again.bin", data))["data"]
    await send(admin, first["upload_id"], 1, pieces(data, MB)[1])
    again = (await init(admin, "/local/again.bin", data))["data"]
    assert (again["upload_id"], again["resumed"], again["received"]) == (
        first["upload_id"],
        True,
        [[1, 1]],
    )
    lookup = await admin.get(
        "/api/fs/multipart/status", params={"path": "/local/again.bin", "size": len(data)}
    )
    assert lookup["data"]["upload_id"] == first["upload_id"]


async def test_a_wrong_hash_stores_nothing_and_names_the_hash(
    admin: Api, root: Path, services: Services
) -> None:
    data = payload(2 * MB)
    shot = (await init(admin, "/local/bad.bin", data, **{"X-File-Md5": "0" * 32}))["data"]
    for index, part in enumerate(pieces(data, MB)):
        await send(admin, shot["upload_id"], index, part)
    refused = await complete(admin, shot["upload_id"])
    assert refused["code"] == 400
    assert "md5" in refused["message"]
    assert refused["data"]["state"] == "failed_permanent"
    assert visible(root) == ["keep.txt", "sub"]
    assert staged(services) == []
    assert (await status(admin, shot["upload_id"]))["code"] == 404


async def test_a_chunk_of_the_wrong_length_is_refused(admin: Api, services: Services) -> None:
    data = payload(2 * MB + 10)
    shot = (await init(admin, "/local/len.bin", data))["data"]
    short = await send(admin, shot["upload_id"], 0, b"x" * 100)
    assert short["code"] == 400
    long = await send(admin, shot["upload_id"], 2, b"x" * 11)
    assert long["code"] == 400
    beyond = await send(admin, shot["upload_id"], 3, b"x")
    assert beyond["code"] == 400
    assert (await status(admin, shot["upload_id"]))["data"]["received"] == []
    assert staged(services) == []


async def test_complete_before_every_chunk_is_refused(admin: Api, root: Path) -> None:
    data = payload(2 * MB)
    shot = (await init(admin, "/local/early.bin", data))["data"]
    await send(admin, shot["upload_id"], 0, pieces(data, MB)[0])
    early = await complete(admin, shot["upload_id"])
    assert early["code"] == 400
    assert early["data"]["received"] == [[0, 0]]
    assert not (root / "early.bin").exists()


async def test_abort_leaves_nothing(admin: Api, root: Path, services: Services) -> None:
    data = payload(2 * MB)
    shot = (await init(admin, "/local/gone.bin", data))["data"]
    await send(admin, shot["upload_id"], 1, pieces(data, MB)[1])
    assert staged(services) != []
    gone = {"X-Upload-Id": shot["upload_id"]}
    aborted = await admin.post("/api/fs/multipart/abort", headers=gone)
    assert aborted["code"] == 200
    assert staged(services) == []
    assert (await status(admin, shot["upload_id"]))["code"] == 404
    assert visible(root) == ["keep.txt", "sub"]


async def test_idle_sessions_are_swept_parts_and_all(admin: Api, services: Services) -> None:
    data = payload(2 * MB)
    shot = (await init(admin, "/local/idle.bin", data))["data"]
    await send(admin, shot["upload_id"], 0, pieces(data, MB)[0])
    await save_settings(admin, multipart_idle_seconds="1")
    await asyncio.sleep(2.5)
    assert await services.multipart.sweep() == 1
    assert staged(services) == []
    assert (await status(admin, shot["upload_id"]))["code"] == 404


async def test_a_chunk_bigger_than_the_body_cap_is_accepted(
    admin: Api, root: Path, services: Services
) -> None:
    cap = services.config.max_request_body
    data = payload(cap + MB + 7)
    await save_settings(admin, multipart_chunk_size=str((cap + MB) // MB))
    shot = (await init(admin, "/local/wide.bin", data, chunk=0))["data"]
    assert shot["chunk_size"] == cap + MB
    parts = pieces(data, shot["chunk_size"])
    for index, part in enumerate(parts):
        assert (await send(admin, shot["upload_id"], index, part))["code"] == 200
    assert (await complete(admin, shot["upload_id"]))["code"] == 200
    assert (root / "wide.bin").read_bytes() == data
