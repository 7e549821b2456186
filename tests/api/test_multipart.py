"""Resumable multipart uploads (OpenList's ``/api/fs/multipart/*``) through the API."""

from __future__ import annotations

import asyncio
import hashlib
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from manifold.container import Services
from manifold.drivers.base import RESERVED_PREFIX
from manifold.models import Perm
from tests.api.fs_helpers import add_meta, make_tree, mount_local, save_settings
from tests.conftest import Api, open_api, start_services

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
    """Every file under the staging folder that holds bytes (a session's file holds
    none until its first chunk arrives)."""
    root = services.config.multipart_staging
    paths = [os.path.join(d, f) for d, _, files in os.walk(root) for f in files]
    return [path for path in paths if os.path.getsize(path) > 0]


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
    resent = await send(admin, shot["upload_id"], 0, pieces(data, MB)[0])
    assert (resent["code"], resent["data"]["received"]) == (200, [[0, 0]])


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


async def test_a_chunk_already_in_flight_answers_409(admin: Api, services: Services) -> None:
    data = payload(MB)
    upload_id = (await init(admin, "/local/race.bin", data))["data"]["upload_id"]
    gate = asyncio.Event()

    async def slow() -> AsyncIterator[bytes]:
        yield data[:1000]
        await gate.wait()
        yield data[1000:]

    headers = {"Authorization": admin.token, "X-Upload-Id": upload_id, "X-Chunk-Index": "0"}
    first = asyncio.create_task(
        admin.client.put("/api/fs/multipart/chunk", content=slow(), headers=headers)
    )
    for _ in range(3000):  # until the first copy is being written
        if staged(services):
            break
        await asyncio.sleep(0.01)
    again = await send(admin, upload_id, 0, data)
    assert again["code"] == 409
    assert again["data"]["received"] == []
    gate.set()
    assert (await first).json()["code"] == 200
    assert (await status(admin, upload_id))["data"]["received"] == [[0, 0]]


async def test_idle_sessions_are_swept_in_the_background(admin: Api, services: Services) -> None:
    data = payload(MB)
    upload_id = (await init(admin, "/local/bg.bin", data))["data"]["upload_id"]
    await send(admin, upload_id, 0, data)
    await save_settings(admin, multipart_idle_seconds="1")
    for _ in range(600):  # the sweep runs every few seconds; generous bound
        if (await status(admin, upload_id))["code"] == 404:
            break
        await asyncio.sleep(0.1)
    assert (await status(admin, upload_id))["code"] == 404
    assert staged(services) == []


async def test_a_start_sweeps_sessions_idle_while_stopped(tmp_path: Path) -> None:
    root = make_tree(tmp_path / "root", {"keep.txt": "keep"})
    data_dir = tmp_path / "data"
    data = payload(MB)
    async with instance(data_dir) as api:
        await mount_local(api, "/local", root)
        upload_id = (await init(api, "/local/old.bin", data))["data"]["upload_id"]
        await send(api, upload_id, 0, data)
        await save_settings(api, multipart_idle_seconds="1")
    await asyncio.sleep(2.5)  # stopped meanwhile: nothing sweeps
    async with instance(data_dir) as again:
        assert staged(again.services) == []
        assert (await status(again, upload_id))["code"] == 404


# --- limits -----------------------------------------------------------------------------


async def test_the_chunk_size_is_capped_by_the_setting(admin: Api) -> None:
    await save_settings(admin, multipart_chunk_size="2")
    data = payload(5 * MB)
    asked_more = (await init(admin, "/local/a.bin", data, chunk=8 * MB))["data"]
    assert (asked_more["chunk_size"], asked_more["total_chunks"]) == (2 * MB, 3)
    asked_tiny = (await init(admin, "/local/b.bin", data, chunk=1000))["data"]
    assert asked_tiny["chunk_size"] == MB


async def test_open_sessions_per_user_are_bounded(admin: Api) -> None:
    await save_settings(admin, multipart_max_sessions="2")
    data = payload(MB)
    first = (await init(admin, "/local/1.bin", data))["data"]
    assert (await init(admin, "/local/2.bin", data))["code"] == 200
    third = await init(admin, "/local/3.bin", data)
    assert third["code"] == 403
    assert "too many open multipart uploads" in third["message"]
    await admin.post("/api/fs/multipart/abort", headers={"X-Upload-Id": first["upload_id"]})
    assert (await init(admin, "/local/3.bin", data))["code"] == 200


async def test_staged_bytes_are_bounded(admin: Api, root: Path) -> None:
    await save_settings(admin, multipart_staging_budget="3")
    assert (await init(admin, "/local/huge.bin", payload(4 * MB)))["code"] == 403
    one, two = payload(2 * MB, 1), payload(2 * MB, 2)
    a = (await init(admin, "/local/one.bin", one))["data"]["upload_id"]
    b = (await init(admin, "/local/two.bin", two))["data"]["upload_id"]
    for upload_id, data, index in ((a, one, 0), (a, one, 1), (b, two, 0)):
        assert (await send(admin, upload_id, index, pieces(data, MB)[index]))["code"] == 200
    full = await send(admin, b, 1, pieces(two, MB)[1])
    assert (full["code"], full["data"]["received"]) == (429, [[0, 0]])
    assert (await complete(admin, a))["code"] == 200
    assert (await send(admin, b, 1, pieces(two, MB)[1]))["code"] == 200
    assert (await complete(admin, b))["code"] == 200
    assert (root / "two.bin").read_bytes() == two


async def test_multipart_can_be_turned_off(admin: Api) -> None:
    await save_settings(admin, multipart_enabled="false")
    refused = await init(admin, "/local/off.bin", payload(MB))
    assert (refused["code"], refused["message"]) == (403, "multipart upload is disabled")


# --- permissions and paths --------------------------------------------------------------


async def user_token(api: Api, name: str, **fields: Any) -> str:
    await api.make_user(name, f"{name}-pw", **fields)
    return await api.login(name, f"{name}-pw")


async def test_init_makes_the_checks_of_put(admin: Api, root: Path) -> None:
    data = payload(MB)
    reader = await user_token(admin, "reader", base_path="/local", permission=0)
    assert (await init(admin, "/local/x.bin", data, token=reader))["code"] == 403
    writer = await user_token(admin, "writer", base_path="/local/sub", permission=int(Perm.WRITE))
    escaped = await init(admin, "/../../escape.bin", data, token=writer)
    assert (escaped["code"], escaped["message"]) == (
        403,
        "access using relative path is not allowed",
    )
    based = await init(admin, "/in.bin", data, token=writer)
    assert based["data"]["path"] == "/in.bin"
    upload_id = based["data"]["upload_id"]
    await send(admin, upload_id, 0, data, token=writer)
    assert (await complete(admin, upload_id, token=writer))["code"] == 200
    assert (root / "sub" / "in.bin").read_bytes() == data
    assert not (root / "in.bin").exists()
    reserved = await init(admin, f"/local/{RESERVED_PREFIX}0123456789abcdef", data)
    assert reserved["code"] in (400, 403), reserved
    taken = await init(admin, "/local/keep.txt", data, Overwrite="false")
    assert (taken["code"], taken["message"]) == (403, "file exists")


async def test_a_folder_password_is_asked_at_init_and_kept_for_complete(
    admin: Api, root: Path
) -> None:
    await add_meta(admin, "/local/sub", password="open sesame")
    data = payload(MB)
    guest = await user_token(admin, "guest1", base_path="/", permission=int(Perm.WRITE))
    refused = await init(admin, "/local/sub/p.bin", data, token=guest)
    assert refused["code"] == 403
    started = await init(admin, "/local/sub/p.bin", data, token=guest, Password="open sesame")
    assert started["code"] == 200, started
    upload_id = started["data"]["upload_id"]
    await send(admin, upload_id, 0, data, token=guest)
    assert (await complete(admin, upload_id, token=guest))["code"] == 200
    assert (root / "sub" / "p.bin").read_bytes() == data


async def test_a_session_is_its_owners_alone(admin: Api) -> None:
    data = payload(MB)
    upload_id = (await init(admin, "/local/mine.bin", data))["data"]["upload_id"]
    other = await user_token(admin, "other", base_path="/local", permission=int(Perm.WRITE))
    assert (await send(admin, upload_id, 0, data, token=other))["code"] == 403
    assert (await status(admin, upload_id, token=other))["code"] == 403
    assert (await complete(admin, upload_id, token=other))["code"] == 403


async def test_permission_revoked_before_complete_stores_nothing(
    admin: Api, root: Path, services: Services
) -> None:
    data = payload(2 * MB)
    bob = await user_token(admin, "bob", base_path="/local", permission=int(Perm.WRITE))
    upload_id = (await init(admin, "/bob.bin", data, token=bob))["data"]["upload_id"]
    for index, part in enumerate(pieces(data, MB)):
        assert (await send(admin, upload_id, index, part, token=bob))["code"] == 200
    admin_token = await admin.login()
    users = await admin.get("/api/admin/user/list", token=admin_token)
    user = next(u for u in users["data"]["content"] if u["username"] == "bob")
    updated = await admin.post(
        "/api/admin/user/update", {**user, "permission": 0}, token=admin_token
    )
    assert updated["code"] == 200
    refused = await complete(admin, upload_id, token=bob)
    assert refused["code"] == 403, refused
    assert not (root / "bob.bin").exists()
    assert staged(services) == []
    assert (await status(admin, upload_id, token=bob))["code"] == 404


# --- restarts and instances -------------------------------------------------------------


@asynccontextmanager
async def instance(data_dir: Path) -> AsyncIterator[Api]:
    services = await start_services(data_dir)
    try:
        async with open_api(services) as api:
            await api.as_admin()
            yield api
    finally:
        await services.stop()


async def test_a_restart_between_chunks_loses_nothing(tmp_path: Path) -> None:
    root = make_tree(tmp_path / "root", {"keep.txt": "keep"})
    data_dir = tmp_path / "data"
    data = payload(3 * MB + 3)
    parts = pieces(data, MB)
    async with instance(data_dir) as api:
        await mount_local(api, "/local", root)
        upload_id = (await init(api, "/local/r.bin", data))["data"]["upload_id"]
        await send(api, upload_id, 2, parts[2])
        await send(api, upload_id, 0, parts[0])
    async with instance(data_dir) as api:
        resumed = (await init(api, "/local/r.bin", data))["data"]
        assert (resumed["upload_id"], resumed["received"]) == (upload_id, [[0, 0], [2, 2]])
        await send(api, upload_id, 1, parts[1])
        await send(api, upload_id, 3, parts[3])
        assert (await complete(api, upload_id))["code"] == 200
    assert (root / "r.bin").read_bytes() == data


async def test_two_instances_take_alternate_chunks(tmp_path: Path) -> None:
    root = make_tree(tmp_path / "root", {"keep.txt": "keep"})
    data_dir = tmp_path / "data"
    data = payload(8 * MB + 77)
    parts = pieces(data, MB)
    async with instance(data_dir) as first:
        await mount_local(first, "/local", root)
        async with instance(data_dir) as second:
            upload_id = (await init(first, "/local/two.bin", data))["data"]["upload_id"]
            sent = await asyncio.gather(
                *(
                    send((first, second)[index % 2], upload_id, index, part)
                    for index, part in enumerate(parts)
                )
            )
            assert [answer["code"] for answer in sent] == [200] * len(parts)
            shot = (await status(second, upload_id))["data"]
            assert shot["received"] == [[0, len(parts) - 1]]
            assert (await complete(second, upload_id))["code"] == 200
            assert staged(second.services) == []
    assert (root / "two.bin").read_bytes() == data


async def test_a_chunk_in_flight_on_another_instance_answers_409(tmp_path: Path) -> None:
    root = make_tree(tmp_path / "root", {"keep.txt": "keep"})
    data_dir = tmp_path / "data"
    data = payload(MB)
    gate = asyncio.Event()

    async def slow() -> AsyncIterator[bytes]:
        yield data[:1000]
        await gate.wait()
        yield data[1000:]

    async with instance(data_dir) as first:
        await mount_local(first, "/local", root)
        async with instance(data_dir) as second:
            upload_id = (await init(first, "/local/x.bin", data))["data"]["upload_id"]
            headers = {
                "Authorization": first.token,
                "X-Upload-Id": upload_id,
                "X-Chunk-Index": "0",
            }
            put = first.client.put("/api/fs/multipart/chunk", content=slow(), headers=headers)
            sending = asyncio.create_task(put)
            for _ in range(3000):  # until the first copy is being written
                if staged(first.services):
                    break
                await asyncio.sleep(0.01)
            assert (await send(second, upload_id, 0, data))["code"] == 409
            gate.set()
            assert (await sending).json()["code"] == 200
            assert (await complete(second, upload_id))["code"] == 200
    assert (root / "x.bin").read_bytes() == data
