"""``manifold import-alist``: an AList v3 backup's storages, users, metas and settings,
with AList password hashes that keep working and are upgraded at the next login."""

from __future__ import annotations

import hashlib
import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from manifold.alist_import import AListImportError, import_alist, read_source
from manifold.cli import main
from tests.conftest import started_api

STATIC_SALT = "https://github.com/alist-org/alist"


def alist_password_hash(password: str, salt: str) -> str:
    """AList's stored hash: sha256 of (sha256 of password-STATIC_SALT) + "-" + salt."""
    static = hashlib.sha256(f"{password}-{STATIC_SALT}".encode()).hexdigest()
    return hashlib.sha256(f"{static}-{salt}".encode()).hexdigest()


def backup_sample(root: Path) -> dict[str, Any]:
    """A backup as AList v3.45's manage page writes it, users completed with their hashes."""
    return {
        "encrypted": "",
        "settings": [
            {"key": "site_title", "value": "From AList", "type": "string", "group": 1},
            {"key": "version", "value": "v3.45.0", "type": "string", "group": 0},
            {"key": "no_such_setting_here", "value": "x", "type": "string", "group": 1},
        ],
        "users": [
            {"id": 1, "username": "admin", "password": "", "base_path": "/", "role": 2,
             "disabled": False, "permission": 0, "sso_id": ""},
            {"id": 2, "username": "guest", "password": "", "base_path": "/", "role": 1,
             "disabled": True, "permission": 0, "sso_id": ""},
            {"id": 3, "username": "alice", "password": "", "base_path": "/imported",
             "role": 0, "disabled": False, "permission": 0, "sso_id": "",
             "pwd_hash": alist_password_hash("wonderland", "s4lt-Of-16chars"),
             "salt": "s4lt-Of-16chars"},
            {"id": 4, "username": "bob", "password": "builder", "base_path": "/",
             "role": 0, "disabled": False, "permission": 0, "sso_id": ""},
            {"id": 5, "username": "carol", "password": "", "base_path": "/", "role": 0,
             "disabled": False, "permission": 0, "sso_id": ""},
        ],
        "storages": [
            {"id": 7, "mount_path": "/imported", "order": 0, "driver": "Local",
             "cache_expiration": 30, "status": "work",
             "addition": json.dumps({"root_folder_path": str(root)}), "remark": "",
             "modified": "2025-01-02T03:04:05.123456789+08:00", "disabled": False,
             "disable_index": False, "enable_sign": False, "order_by": "name",
             "order_direction": "asc", "extract_folder": "", "web_proxy": False,
             "webdav_policy": "native_proxy", "proxy_range": False, "down_proxy_url": ""},
        ],
        "metas": [
            {"id": 1, "path": "/imported/locked", "password": "door", "p_sub": True,
             "write": False, "w_sub": False, "hide": "", "h_sub": False, "readme": "hello",
             "r_sub": False, "header": "", "header_sub": False},
        ],
    }  # fmt: skip


def write_sample(tmp_path: Path) -> Path:
    root = tmp_path / "files"
    (root / "locked").mkdir(parents=True)
    (root / "a.txt").write_bytes(b"from alist")
    path = tmp_path / "alist_backup.json"
    path.write_text(json.dumps(backup_sample(root)))
    return path


async def test_a_backup_is_imported_and_served(tmp_path: Path) -> None:
    data = tmp_path / "data"
    source = read_source(write_sample(tmp_path))
    async with started_api(data) as api:
        report = await import_alist(api.services, source)
        assert report.imported == {"settings": 1, "users": 5, "storages": 1, "metas": 1}
        assert report.without_password == ["carol"]
        assert any("no_such_setting_here" in line for line in report.skipped)
    async with started_api(data) as api:
        token = await api.login("bob", "builder")
        listing = await api.post("/api/fs/list", {"path": "/imported"}, token=await api.login())
        assert {o["name"] for o in listing["data"]["content"]} == {"a.txt", "locked"}
        locked = await api.post("/api/fs/list", {"path": "/imported/locked"}, token=token)
        assert locked["code"] == 403
        public = await api.get("/api/public/settings")
        assert public["data"]["site_title"] == "From AList"
        guest = await api.get("/api/me")
        assert guest["code"] == 401  # the guest was disabled in AList


async def test_an_alist_password_logs_in_and_is_upgraded(tmp_path: Path) -> None:
    data = tmp_path / "data"
    source = read_source(write_sample(tmp_path))
    async with started_api(data) as api:
        await import_alist(api.services, source)
        wrong = await api.post("/api/auth/login", {"username": "alice", "password": "nope"})
        assert wrong["code"] == 400
        before = await api.services.users.by_name("alice")
        assert before is not None and before.pwd_hash.startswith("alist-sha256$")
        token = await api.login("alice", "wonderland")
        me = await api.get("/api/me", token=token)
        assert me["data"]["base_path"] == "/imported"
        after = await api.services.users.by_name("alice")
        assert after is not None and after.pwd_hash.startswith("$argon2")
        assert (await api.get("/api/me", token=token))["code"] == 200  # still valid
        again = await api.login("alice", "wonderland", fresh=True)
        assert (await api.get("/api/me", token=again))["code"] == 200


def test_an_encrypted_backup_is_refused_with_a_reason(tmp_path: Path) -> None:
    path = tmp_path / "enc.json"
    path.write_text(json.dumps({"encrypted": "U2FsdGVk", "users": []}))
    with pytest.raises(AListImportError, match="encrypted"):
        read_source(path)
    other = tmp_path / "other.json"
    other.write_text(json.dumps({"hello": 1}))
    with pytest.raises(AListImportError, match="not an AList backup"):
        read_source(other)


def test_alist_database_is_read_with_its_hashes(tmp_path: Path) -> None:
    db = tmp_path / "data.db"
    conn = sqlite3.connect(db)
    conn.execute("CREATE TABLE x_users (id INTEGER, username TEXT, pwd_hash TEXT, salt TEXT, "
                 "base_path TEXT, role INTEGER, disabled NUMERIC, permission INTEGER)")  # fmt: skip
    conn.execute("INSERT INTO x_users VALUES (3, 'dave', 'abc', 'salty', '/', 0, 0, 8)")
    for name in ("x_setting_items", "x_storages", "x_meta"):
        conn.execute(f"CREATE TABLE {name} (id INTEGER)")
    conn.commit()
    conn.close()
    source = read_source(db)
    assert source["users"][0]["pwd_hash"] == "abc"
    assert source["users"][0]["salt"] == "salty"
    assert source["storages"] == []


def test_the_command_prints_what_it_did(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["import-alist", str(write_sample(tmp_path)), "--data", str(tmp_path / "d")]) == 0
    out = capsys.readouterr().out
    assert "imported 1 settings, 5 users, 1 storages, 1 metas" in out
    assert "carol" in out
    bad = tmp_path / "bad.json"
    bad.write_text("{")
    assert main(["import-alist", str(bad), "--data", str(tmp_path / "d")]) == 1
