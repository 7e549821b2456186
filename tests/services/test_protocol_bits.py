"""The protocols' own bits (WebDAV 8/9, FTP/SFTP 10/11) bind admins too, as in AList
since v3.41; only the admin token, which AList lets in without looking at any bit,
passes without them. The FTP and SFTP servers stand on the same check."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from manifold.container import Services
from manifold.errors import PermissionDenied
from manifold.models import Perm, Role, Storage, User
from manifold.services.auth.service import Caller, Protocol
from tests.api.fs_helpers import make_tree

FRESH_ADMIN = 0x30FF  # AList's new admin: bits 0-7, 12 and 13


def admin(permission: int, protocol: Protocol, token: str = "") -> Caller:
    user = User(1, "admin", "", 0, "/", Role.ADMIN, False, permission, "", "")
    return Caller(user, "198.51.100.4", token, protocol)


@pytest.fixture
async def disk(services: Services, tmp_path: Path) -> Path:
    root = make_tree(tmp_path / "a", {"docs/readme.txt": "hello"})
    addition = json.dumps({"root_folder_path": str(root)})
    await services.storages.create(Storage(0, "/a", "Local", addition=addition))
    return root


@pytest.mark.parametrize(
    ("protocol", "read", "write"),
    [("webdav", Perm.WEBDAV_READ, Perm.WEBDAV_MANAGE), ("ftp", Perm.FTP_READ, Perm.FTP_MANAGE),
     ("sftp", Perm.FTP_READ, Perm.FTP_MANAGE)],
)  # fmt: skip
async def test_an_admin_needs_the_protocol_bits(
    services: Services, disk: Path, protocol: Protocol, read: Perm, write: Perm
) -> None:
    files = services.ops
    with pytest.raises(PermissionDenied):
        await files.list(admin(FRESH_ADMIN, protocol), "/a")
    reader = admin(FRESH_ADMIN | read, protocol)
    assert [o.name for o in await files.list(reader, "/a")] == ["docs"]
    with pytest.raises(PermissionDenied):
        await files.mkdir(reader, "/a/made")
    with pytest.raises(PermissionDenied):
        await files.remove(reader, "/a/docs/readme.txt")
    await files.mkdir(admin(FRESH_ADMIN | read | write, protocol), "/a/made")
    assert sorted(p.name for p in disk.iterdir()) == ["docs", "made"]
    assert await files.list(admin(FRESH_ADMIN, "api"), "/a")  # the API has no such bits


async def test_the_admin_token_passes_without_them(services: Services, disk: Path) -> None:
    await services.ops.mkdir(admin(FRESH_ADMIN, "webdav", token="the-admin-token"), "/a/made")
    assert (disk / "made").is_dir()
