"""One permission table, checked on the JSON API, WebDAV, SFTP, FTP and S3.

Each row is a situation and what must come of it: ``allowed``, ``refused`` (a
permission or login refusal), ``invisible`` (the listing works, the entry is not in
it) or ``outside`` (a path that tries to leave a base path: refused or not found
inside it, never the bytes outside). Every row runs on every protocol it applies to
and must give the same outcome on each, the few marked differences aside (the API
has no login bit). S3 has no users: its key pair acts as the user ``plain`` (full
rights, no bit to pass folder passwords or see hidden entries), so only ``plain``'s
rows run there. One live server (all four ports) serves the whole module.
"""

from __future__ import annotations

import json
import posixpath
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from manifold.container import Services
from manifold.models import Meta, Perm, Role, Storage
from manifold.services.auth.users import UserInput
from tests.api.fs_helpers import make_tree
from tests.conftest import start_services
from tests.protocols.perm_clients import (
    GUEST_PASSWORD,
    S3_BUCKET,
    S3_KEY_ID,
    S3_ROOT,
    S3_SECRET,
    Client,
    Login,
    Ports,
    Refused,
    S3Client,
    connect,
    listening,
)

PROTOCOLS = ("api", "dav", "sftp", "ftp", "s3")
USERS_ONLY = ("api", "dav", "sftp", "ftp")
PROTOCOL_BITS = Perm.WEBDAV_READ | Perm.WEBDAV_MANAGE | Perm.FTP_READ | Perm.FTP_MANAGE
FILE_BITS = Perm.WRITE | Perm.RENAME | Perm.MOVE | Perm.COPY | Perm.REMOVE
READ_BITS = Perm.WEBDAV_READ | Perm.FTP_READ
USERS: dict[str, tuple[int, str]] = {  # name: (permission, base path)
    "reader": (int(PROTOCOL_BITS), "/"),  # every protocol bit, no file bit
    "based": (int(PROTOCOL_BITS | FILE_BITS), "/local/home"),
    "plain": (int(PROTOCOL_BITS | FILE_BITS), "/"),
    "trusted": (
        int(PROTOCOL_BITS | FILE_BITS | Perm.ACCESS_WITHOUT_PASSWORD | Perm.SEE_HIDDEN),
        "/",
    ),
    "apionly": (int(FILE_BITS), "/"),
}
TREE: dict[str, bytes | str] = {
    "pub/a.txt": "open file",
    "pub/.secret.txt": "hidden by a meta",
    "pub/.secret-dir/x.txt": "in a hidden folder",
    "locked/in.txt": "behind a password",
    "home/b.txt": "in the base path",
    **{f"work/{p}/{name}": name for p in PROTOCOLS for name in ("keep", "mine", "gone")},
}


@dataclass(frozen=True)
class Case:
    id: str
    who: str  # a user of USERS, "guest", or "guest-off" (the guest, disabled)
    op: str  # login, see, stat, read, write, mkdir, rename, remove
    path: str  # "{p}" stands for the protocol's name
    outcome: str  # allowed, refused, invisible, outside
    dest: str = ""
    folder_password: str = ""
    on: tuple[str, ...] = USERS_ONLY
    differs: dict[str, str] = field(default_factory=dict)  # protocol: its outcome


def plain_case(id: str, op: str, path: str, outcome: str, dest: str = "") -> Case:
    return Case(id, "plain", op, path, outcome, dest, on=PROTOCOLS)


CASES = [
    # The guest: enabled with read and the protocol read bits, or disabled.
    Case("guest-sees", "guest", "see", "/local/pub/a.txt", "allowed"),
    Case("guest-reads", "guest", "read", "/local/pub/a.txt", "allowed"),
    Case("guest-cannot-write", "guest", "write", "/local/work/{p}/g", "refused"),
    Case("guest-cannot-remove", "guest", "remove", "/local/work/{p}/keep", "refused"),
    Case("guest-disabled", "guest-off", "login", "/", "refused"),
    # A read-only user (every protocol bit, no file bit).
    Case("reader-sees", "reader", "see", "/local/pub/a.txt", "allowed"),
    Case("reader-reads", "reader", "read", "/local/pub/a.txt", "allowed"),
    Case("reader-cannot-write", "reader", "write", "/local/work/{p}/r", "refused"),
    Case("reader-cannot-mkdir", "reader", "mkdir", "/local/work/{p}/rdir", "refused"),
    Case("reader-cannot-replace", "reader", "write", "/local/work/{p}/keep", "refused"),
    Case(
        "reader-cannot-rename",
        "reader",
        "rename",
        "/local/work/{p}/keep",
        "refused",
        "/local/work/{p}/renamed",
    ),
    Case(
        "reader-cannot-move", "reader", "rename", "/local/work/{p}/keep", "refused", "/local/pub/m"
    ),
    Case("reader-cannot-remove", "reader", "remove", "/local/work/{p}/keep", "refused"),
    # A user whose base path is /local/home: it is their root.
    Case("based-sees-root", "based", "see", "/b.txt", "allowed"),
    Case("based-reads", "based", "read", "/b.txt", "allowed"),
    Case("based-no-tree-above", "based", "read", "/local/pub/a.txt", "outside"),
    Case("based-dots", "based", "read", "/../pub/a.txt", "outside"),
    Case("based-deep-dots", "based", "read", "/../../../local/pub/a.txt", "outside"),
    Case("based-encoded-dots", "based", "read", "/%2e%2e/pub/a.txt", "outside"),
    Case("based-write-dots", "based", "write", "/../pub/{p}-x", "outside"),
    Case("based-list-dots", "based", "see", "/../pub/a.txt", "outside"),
    Case("based-stat-dots", "based", "stat", "/../pub/a.txt", "outside"),
    Case("based-remove-dots", "based", "remove", "/../pub/a.txt", "outside"),
    # A folder password: users without the bit are kept out, with it they go in.
    plain_case("locked-list", "see", "/local/locked/in.txt", "refused"),
    plain_case("locked-read", "read", "/local/locked/in.txt", "refused"),
    plain_case("locked-write", "write", "/local/locked/{p}-new", "refused"),
    plain_case("locked-mkdir", "mkdir", "/local/locked/{p}-dir", "refused"),
    plain_case("locked-stat", "stat", "/local/locked/in.txt", "refused"),
    plain_case("locked-move-in", "rename", "/local/work/{p}/keep", "refused", "/local/locked/k"),
    plain_case("locked-remove", "remove", "/local/locked/in.txt", "refused"),
    plain_case("locked-move-out", "rename", "/local/locked/in.txt", "refused", "/local/pub/out"),
    plain_case("locked-shown-above", "see", "/local/locked", "allowed"),
    Case("trusted-lists-locked", "trusted", "see", "/local/locked/in.txt", "allowed"),
    Case("trusted-reads-locked", "trusted", "read", "/local/locked/in.txt", "allowed"),
    Case("guest-locked", "guest", "read", "/local/locked/in.txt", "refused"),
    Case(
        "guest-wrong-password",
        "guest",
        "read",
        "/local/locked/in.txt",
        "refused",
        folder_password="not-it",
        on=("api", "ftp"),
    ),
    Case(
        "guest-gives-password",
        "guest",
        "read",
        "/local/locked/in.txt",
        "allowed",
        folder_password="door",
        on=("api", "ftp"),  # WebDAV and SFTP have no way to give one
    ),
    # Hidden entries: left out of listings; by exact name, what the API does.
    plain_case("hidden-not-listed", "see", "/local/pub/.secret.txt", "invisible"),
    plain_case("hidden-not-read", "read", "/local/pub/.secret.txt", "refused"),
    plain_case("hidden-not-statted", "stat", "/local/pub/.secret.txt", "refused"),
    plain_case("hidden-not-replaced", "write", "/local/pub/.secret.txt", "refused"),
    plain_case("hidden-not-removed", "remove", "/local/pub/.secret.txt", "refused"),
    plain_case("hidden-folder-not-listed", "see", "/local/pub/.secret-dir/x.txt", "refused"),
    # A hide rule is about names in its folder: inside a hidden folder, as in the API
    # (and AList), a file named by its whole path is read.
    plain_case("hidden-folder-file", "read", "/local/pub/.secret-dir/x.txt", "allowed"),
    Case("guest-hidden", "guest", "see", "/local/pub/.secret.txt", "invisible"),
    Case("trusted-sees-hidden", "trusted", "see", "/local/pub/.secret.txt", "allowed"),
    # Without the protocol bits: refused at login, the API unaffected.
    Case("no-protocol-bits", "apionly", "login", "/", "refused", differs={"api": "allowed"}),
    # What a user with the bits does (so that the refusals above are not the only
    # answer a protocol gives).
    plain_case("plain-writes", "write", "/local/work/{p}/new", "allowed"),
    plain_case("plain-renames", "rename", "/local/work/{p}/mine", "allowed", "/local/work/{p}/m2"),
    plain_case("plain-removes", "remove", "/local/work/{p}/gone", "allowed"),
]


@pytest.fixture(scope="module")
async def site(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Site]:
    folder = tmp_path_factory.mktemp("perm-table")
    services = await start_services(folder / "data")
    disk = make_tree(folder / "disk", TREE)
    try:
        await _fill(services, disk)
        async with listening(services) as ports:
            yield Site(services, ports, disk)
    finally:
        await services.stop()


@dataclass
class Site:
    services: Services
    ports: Ports
    disk: Path
    guest_enabled: bool = True

    async def guest(self, enabled: bool) -> None:
        if enabled != self.guest_enabled:
            await set_guest(self.services, enabled)
            self.guest_enabled = enabled

    def snapshot(self) -> dict[str, bytes | None]:
        """Every file (its bytes) and folder (None) of the disk."""
        return {
            str(p.relative_to(self.disk)): p.read_bytes() if p.is_file() else None
            for p in sorted(self.disk.rglob("*"))
        }


async def _fill(services: Services, disk: Path) -> None:
    addition = json.dumps({"root_folder_path": str(disk)})
    await services.storages.create(Storage(0, "/local", "Local", addition=addition))
    await services.metas.create(Meta(0, "/local/pub", password="", hide="^\\.secret"))
    await services.metas.create(Meta(0, "/local/locked", password="door", p_sub=True))
    for name, (permission, base) in USERS.items():
        await services.users.create(UserInput(name, f"{name}-pw", base, permission=permission))
    await set_guest(services, enabled=True)
    buckets = json.dumps([{"name": S3_BUCKET, "path": S3_ROOT}])
    await services.settings.save(
        [
            ("s3_buckets", buckets),
            ("s3_access_key_id", S3_KEY_ID),
            ("s3_secret_access_key", S3_SECRET),
        ]
    )


async def set_guest(services: Services, enabled: bool) -> None:
    guest = await services.users.guest()
    data = UserInput(guest.username, GUEST_PASSWORD, "/", Role.GUEST, not enabled, int(READ_BITS))
    await services.users.update(guest.id, data)


# --- the table, run -------------------------------------------------------------------

RUNS = [
    pytest.param(case, protocol, id=f"{case.id}-{protocol}")
    for case in CASES
    for protocol in case.on
]


@pytest.mark.parametrize(("case", "protocol"), RUNS)
async def test_the_same_outcome_on_every_protocol(site: Site, case: Case, protocol: str) -> None:
    await site.guest(case.who != "guest-off")
    before = site.snapshot()
    expected = case.differs.get(protocol, case.outcome)
    got, detail = await outcome(site, case, protocol)
    if expected == "outside":
        assert got in ("denied", "missing"), detail
    else:
        assert got == {"refused": "denied"}.get(expected, expected), detail
    if expected != "allowed":
        assert site.snapshot() == before  # a refusal changes nothing


async def outcome(site: Site, case: Case, protocol: str) -> tuple[str, str]:
    """``allowed``, ``invisible``, ``denied`` or ``missing``, and what was seen."""
    name = "guest" if case.who == "guest-off" else case.who
    who = Login(name, case.folder_password)
    path = case.path.format(p=protocol)
    try:
        client = await connect(protocol, site.ports, who)
    except Refused as exc:
        return exc.kind, str(exc)
    try:
        on_disk = Disk(site.disk, USERS.get(name, (0, "/"))[1])
        return await _act(on_disk, client, case.op, path, case.dest.format(p=protocol))
    except Refused as exc:
        return exc.kind, str(exc)
    finally:
        await client.close()


async def _act(disk: Disk, client: Client, op: str, path: str, dest: str) -> tuple[str, str]:
    folder, _, name = path.rpartition("/")
    if op == "login":
        return "allowed", str(await client.names(path))
    if op == "see":
        names = await client.names(folder or "/")
        return ("allowed" if name in names else "invisible"), str(names)
    if op == "stat":
        await client.stat(path)
        return "allowed", ""
    if op == "read":
        data = await client.read(path)
        on_disk = disk.at(path).read_bytes()
        assert data == on_disk
        return "allowed", ""
    if op == "write":
        await client.write(path, b"written")
        assert disk.at(path).read_bytes() == b"written"
        return "allowed", ""
    if op == "mkdir":
        await client.mkdir(path)
        assert disk.at(path).is_dir()
        return "allowed", ""
    if op == "rename":
        await client.rename(path, dest)
        assert disk.at(dest).is_file()
        assert not disk.at(path).exists()
        return "allowed", ""
    assert op == "remove"
    await client.remove(path)
    assert not disk.at(path).exists()
    return "allowed", ""


@dataclass(frozen=True)
class Disk:
    """Where a caller's tree path is on the disk served at ``/local``."""

    root: Path
    base: str

    def at(self, path: str) -> Path:
        full = posixpath.normpath(posixpath.join(self.base, path.lstrip("/")))
        assert full.startswith("/local/"), full
        return self.root / full.removeprefix("/local/")


# --- S3: a folder password holds for every request -----------------------------------


def _source(key: str) -> dict[str, str]:
    return {"Bucket": S3_BUCKET, "Key": key}


S3_REFUSED = [
    ("list_objects_v2", {"Prefix": "locked/"}),
    ("list_objects_v2", {"Prefix": "locked/", "Delimiter": "/"}),
    ("list_objects", {"Prefix": "locked/"}),
    ("get_object", {"Key": "locked/in.txt"}),
    ("head_object", {"Key": "locked/in.txt"}),
    ("put_object", {"Key": "locked/put", "Body": b"x"}),
    ("put_object", {"Key": "locked/sub/", "Body": b""}),
    ("copy_object", {"Key": "pub/copied", "CopySource": _source("locked/in.txt")}),
    ("copy_object", {"Key": "locked/copied", "CopySource": _source("pub/a.txt")}),
    ("delete_object", {"Key": "locked/in.txt"}),
    ("create_multipart_upload", {"Key": "locked/multi"}),
]


@pytest.mark.parametrize(("method", "kwargs"), S3_REFUSED, ids=[m for m, _ in S3_REFUSED])
async def test_s3_refuses_every_request_behind_a_folder_password(
    site: Site, method: str, kwargs: dict[str, Any]
) -> None:
    client = S3Client(site.ports)
    before = site.snapshot()
    with pytest.raises(Refused) as refused:
        await client.call(method, **kwargs)
    assert refused.value.kind == "denied"
    assert site.snapshot() == before
    await client.close()


async def test_s3_walks_past_password_folders_and_hidden_entries(site: Site) -> None:
    client = S3Client(site.ports)
    found = await client.call("list_objects_v2", Prefix="")
    keys = {o["Key"] for o in found["Contents"]}
    assert "pub/a.txt" in keys and "home/b.txt" in keys
    assert not any(k.startswith(("locked/", "pub/.secret")) for k in keys), keys
    await client.close()


async def test_s3_multipart_is_checked_at_each_part(site: Site) -> None:
    """An upload begun before its folder got a password sends no more parts; aborting
    it (which only drops the parts held) still works, on the same client: the refused
    part's connection is closed, not left holding a body it never read."""
    client = S3Client(site.ports)
    key = "work/s3/late.bin"
    upload = (await client.call("create_multipart_upload", Key=key))["UploadId"]
    meta = await site.services.metas.create(Meta(0, "/local/work/s3", "later", p_sub=True))
    try:
        with pytest.raises(Refused) as refused:
            await client.call("upload_part", Key=key, UploadId=upload, PartNumber=1, Body=b"x")
        assert refused.value.kind == "denied"
        await client.call("abort_multipart_upload", Key=key, UploadId=upload)
    finally:
        await site.services.metas.delete(meta.id)
        await client.close()
    assert not (site.disk / "work/s3/late.bin").exists()
