"""Multipart chunks on every engine: each chunk is reserved and recorded in one
transaction (on SQLite one trip to a thread of its own), and the reservation is rolled
back when the staging budget would be passed."""

from __future__ import annotations

import asyncio
from pathlib import Path

from tests.api.fs_helpers import make_tree, mount_local, save_settings
from tests.api.test_multipart import MB, complete, init, payload, pieces, send, status
from tests.conftest import started_api


async def test_chunks_at_once_in_any_order_make_the_file(database_url: str, tmp_path: Path) -> None:
    root = make_tree(tmp_path / "root", {})
    data = payload(5 * MB + 77)
    parts = pieces(data, MB)
    async with started_api(tmp_path / "data", database_url) as api:
        await api.as_admin()
        await mount_local(api, "/local", root)
        upload_id = (await init(api, "/local/f.bin", data))["data"]["upload_id"]
        sent = await asyncio.gather(*(send(api, upload_id, i, parts[i]) for i in (5, 2, 0, 2)))
        codes = [answer["code"] for answer in sent]
        # The same chunk twice at once: one receives it, the other waits its turn or is
        # told it is in flight.
        assert (codes[0], codes[2], sorted([codes[1], codes[3]])) in (
            (200, 200, [200, 200]),
            (200, 200, [200, 409]),
        )
        await asyncio.gather(*(send(api, upload_id, i, parts[i]) for i in (1, 3, 4, 2)))
        received = (await status(api, upload_id))["data"]
        assert (received["received"], received["received_bytes"]) == ([[0, 5]], len(data))
        assert (await complete(api, upload_id))["code"] == 200
    assert (root / "f.bin").read_bytes() == data


async def test_a_chunk_past_the_budget_takes_nothing(database_url: str, tmp_path: Path) -> None:
    root = make_tree(tmp_path / "root", {})
    one, two = payload(2 * MB, 1), payload(2 * MB, 2)
    async with started_api(tmp_path / "data", database_url) as api:
        await api.as_admin()
        await mount_local(api, "/local", root)
        await save_settings(api, multipart_staging_budget="3")
        a = (await init(api, "/local/one.bin", one))["data"]["upload_id"]
        b = (await init(api, "/local/two.bin", two))["data"]["upload_id"]
        for upload_id, data, index in ((a, one, 0), (a, one, 1), (b, two, 0)):
            assert (await send(api, upload_id, index, pieces(data, MB)[index]))["code"] == 200
        for _ in range(2):  # refused twice: the first refusal kept no reservation
            full = await send(api, b, 1, pieces(two, MB)[1])
            assert (full["code"], full["data"]["received"]) == (429, [[0, 0]])
        assert (await complete(api, a))["code"] == 200
        assert (await send(api, b, 1, pieces(two, MB)[1]))["code"] == 200
        assert (await complete(api, b))["code"] == 200
    assert (root / "two.bin").read_bytes() == two


async def test_a_session_aborted_on_another_instance_takes_no_more_chunks(
    database_url: str, tmp_path: Path
) -> None:
    root = make_tree(tmp_path / "root", {})
    data = payload(3 * MB)
    parts = pieces(data, MB)
    async with started_api(tmp_path / "data", database_url) as first:
        await first.as_admin()
        await mount_local(first, "/local", root)
        async with started_api(tmp_path / "data", database_url) as second:
            await second.as_admin()
            upload_id = (await init(first, "/local/a.bin", data))["data"]["upload_id"]
            assert (await send(first, upload_id, 0, parts[0]))["code"] == 200
            assert (await send(second, upload_id, 1, parts[1]))["code"] == 200
            abort = {"X-Upload-Id": upload_id}
            assert (await second.post("/api/fs/multipart/abort", headers=abort))["code"] == 200
            assert (await send(first, upload_id, 2, parts[2]))["code"] == 404
            assert (await status(first, upload_id))["code"] == 404
    assert list(root.iterdir()) == []
