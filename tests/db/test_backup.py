"""``manifold backup`` / ``restore``: rows as JSON lines, so SQLite moves to PostgreSQL."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from manifold.backup import BackupError, backup, restore
from manifold.config import load_config
from tests.api.fs_helpers import add_meta, mount_local
from tests.conftest import started_api
from tests.db.conftest import _fresh_database
from tests.fixtures.dbservers import RunningServer


async def test_sqlite_backup_restores_into_postgresql(
    tmp_path: Path, postgresql_server: RunningServer
) -> None:
    source = tmp_path / "source"
    files = tmp_path / "files"
    files.mkdir()
    (files / "kept.txt").write_bytes(b"kept")
    async with started_api(source) as api:
        admin = await api.as_admin()
        await admin.make_user("mover", "pw-move", base_path="/local")
        await mount_local(admin, "/local", files)
        await add_meta(admin, "/local/private", password="p")
        saved = await admin.post("/api/admin/setting/save", [{"key": "site_title", "value": "Ω"}])
        assert saved["code"] == 200
        token = await api.login("mover", "pw-move")
    out = tmp_path / "backup.jsonl"
    summary = await backup(load_config(source), out)
    assert summary.rows["users"] == 3
    assert (out.stat().st_mode & 0o077) == 0
    header = json.loads(out.read_text().splitlines()[0])
    assert "database_url" not in header["config"]

    target = tmp_path / "target"
    url = await _fresh_database(postgresql_server.url)
    target.mkdir(mode=0o700)
    (target / "config.json").write_text(json.dumps({"database_url": url}))
    await restore(target, out, force=False)
    assert load_config(target).jwt_secret == load_config(source).jwt_secret
    async with started_api(target, url) as api:
        me = await api.get("/api/me", token=token)  # the token made on SQLite still works
        assert me["data"]["username"] == "mover"
        listing = await api.post("/api/fs/list", {"path": "/"}, token=token)
        assert [o["name"] for o in listing["data"]["content"]] == ["kept.txt"]
        public = await api.get("/api/public/settings")
        assert public["data"]["site_title"] == "Ω"
        admin = await api.as_admin()
        await admin.make_user("after-restore", "pw")  # new ids do not collide

    with pytest.raises(BackupError, match="not empty"):
        await restore(target, out, force=False)
    await restore(target, out, force=True)


async def test_a_file_that_is_not_a_backup_is_refused(tmp_path: Path) -> None:
    bogus = tmp_path / "bogus.jsonl"
    bogus.write_text('{"hello": 1}\n')
    with pytest.raises(BackupError, match="not a Manifold backup"):
        await restore(tmp_path / "data", bogus, force=False)
