"""The data folder holds the admin token and the JWT secret: only its owner may read it."""

from __future__ import annotations

import os
import sqlite3
import stat
from pathlib import Path

import pytest

from manifold.config import load_config
from manifold.db.engine import open_engine
from tests.api.fs_helpers import mount_local
from tests.api.test_fs_write import put
from tests.conftest import Api, start_services


def loose_entries(data_dir: Path) -> list[str]:
    """Entries below ``data_dir`` (itself included) that others could read or enter."""
    found = []
    for folder, dirs, files in os.walk(data_dir):
        for name in [".", *dirs, *files]:
            path = os.path.normpath(os.path.join(folder, name))
            mode = stat.S_IMODE(os.lstat(path).st_mode)
            wanted = 0o700 if os.path.isdir(path) else 0o600
            if mode != wanted:
                found.append(f"{path}: {oct(mode)}")
    return found


class TestFreshInstall:
    async def test_every_file_is_private_after_writes(self, api: Api, tmp_path: Path) -> None:
        await api.as_admin()
        (tmp_path / "root").mkdir()
        await mount_local(api, "/local", tmp_path / "root")
        for name in ("a.txt", "b.txt"):
            assert (await put(api, f"/local/{name}", b"data"))["code"] == 200
        body = await put(api, "/local/c.txt", b"task data", **{"As-Task": "true"})
        assert body["code"] == 200, body
        data_dir = api.services.config.data_dir
        names = os.listdir(data_dir)
        assert {"data.db", "data.db-wal", "data.db-shm", "temp"} <= set(names)
        assert loose_entries(data_dir) == []

    @pytest.mark.parametrize("umask", [0o022, 0o002, 0o000])
    def test_the_folder_is_made_private_whatever_the_umask(
        self, tmp_path: Path, umask: int
    ) -> None:
        old = os.umask(umask)
        try:
            config = load_config(tmp_path / "a" / "data", env={})
        finally:
            os.umask(old)
        assert stat.S_IMODE(config.data_dir.stat().st_mode) == 0o700
        assert loose_entries(config.data_dir) == []


class TestExistingInstall:
    @pytest.mark.parametrize("loose", [0o644, 0o666, 0o604])
    async def test_loose_files_are_tightened_at_start(self, tmp_path: Path, loose: int) -> None:
        data_dir = tmp_path / "data"
        data_dir.mkdir(mode=0o755)
        data_dir.chmod(0o755)
        db = data_dir / "data.db"
        with sqlite3.connect(db) as conn:
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("CREATE TABLE t (x)")
        (data_dir / "temp").mkdir(mode=0o755)
        (data_dir / "temp").chmod(0o755)
        for path in data_dir.iterdir():
            if path.is_file():
                path.chmod(loose)
        services = await start_services(data_dir)
        try:
            assert loose_entries(data_dir) == []
        finally:
            await services.stop()

    def test_a_new_sqlite_file_is_private_before_sqlite_opens_it(self, tmp_path: Path) -> None:
        tmp_path.chmod(0o700)
        db = tmp_path / "fresh.db"
        open_engine(f"sqlite+aiosqlite:///{db}")
        assert stat.S_IMODE(db.stat().st_mode) == 0o600
