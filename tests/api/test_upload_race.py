"""Uploads without overwrite racing for one new name: one wins, the rest hear ``file exists``."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from tests.api.fs_helpers import mount_local
from tests.api.test_fs_write import leftovers, put
from tests.conftest import Api
from tests.unit.test_tasks import settled

RACERS = 16
FILE_EXISTS = (403, "file exists")


@pytest.fixture
async def admin(api: Api, tmp_path: Path) -> Api:
    (tmp_path / "root").mkdir()
    await api.as_admin()
    await mount_local(api, "/local", tmp_path / "root")
    return api


def bodies() -> list[bytes]:
    return [bytes([65 + i]) * (64 * 1024 + i) for i in range(RACERS)]


class TestUploadsWithoutOverwrite:
    @pytest.mark.parametrize("name", ["new.bin", "sub/new.bin"])
    async def test_one_of_many_uploads_wins(self, admin: Api, tmp_path: Path, name: str) -> None:
        sent = bodies()
        answers = await asyncio.gather(
            *(put(admin, f"/local/{name}", body, Overwrite="false") for body in sent)
        )
        codes = [(a["code"], a["message"]) for a in answers]
        assert codes.count((200, "success")) == 1, codes
        assert codes.count(FILE_EXISTS) == RACERS - 1, codes
        winner = sent[codes.index((200, "success"))]
        assert (tmp_path / "root" / name).read_bytes() == winner
        assert leftovers(tmp_path / "root") == []

    async def test_one_of_many_upload_tasks_wins(self, admin: Api, tmp_path: Path) -> None:
        sent = bodies()
        answers = await asyncio.gather(
            *(put(admin, "/local/t.bin", b, Overwrite="false", **{"As-Task": "true"}) for b in sent)
        )
        refused = [a for a in answers if a["code"] != 200]
        assert all((a["code"], a["message"]) == FILE_EXISTS for a in refused), refused
        task_ids = [a["data"]["task"]["id"] for a in answers if a["code"] == 200]
        tasks = [await settled(admin.services, tid) for tid in task_ids]
        won = [t for t in tasks if not t.error]
        assert len(won) == 1, [(t.state, t.error) for t in tasks]
        assert {t.error for t in tasks if t.error} <= {"file exists"}
        assert (tmp_path / "root" / "t.bin").read_bytes() in sent
        assert leftovers(tmp_path / "root") == []

    async def test_overwrite_still_replaces(self, admin: Api, tmp_path: Path) -> None:
        assert (await put(admin, "/local/f.txt", b"one"))["code"] == 200
        assert (await put(admin, "/local/f.txt", b"two", Overwrite="true"))["code"] == 200
        assert (tmp_path / "root" / "f.txt").read_bytes() == b"two"
