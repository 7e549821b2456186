"""Crypt over a Local storage: the conformance suite in each name mode, and what the
format promises a user: plain sizes, names that do not decrypt left out, a wrong
password or a damaged block answered by an error, ranges that read only their blocks."""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator, Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from manifold.container import Services
from manifold.drivers.base import LinkArgs, Upload
from manifold.drivers.crypt.blocks import (
    BLOCK_SIZE,
    DATA_SIZE,
    HEADER_SIZE,
    derive_keys,
    encrypted_size,
    header_nonce,
    new_header,
    seal_blocks,
)
from manifold.drivers.crypt.driver import CryptDriver
from manifold.drivers.crypt.meta import Addition
from manifold.drivers.crypt.obscure import MARKER
from manifold.drivers.crypt.streams import BATCH, encrypted
from manifold.errors import InvalidRequest, ManifoldError, ObjectNotFound
from manifold.models import THUMB_SELF, Link, Obj, Storage
from manifold.testing.conformance import (
    DriverConformance,
    DriverFactory,
    chunks,
    find,
    put_bytes,
    read_link,
    read_obj,
)
from tests.conftest import Api
from tests.drivers.sftp_server import SshServer

PASSWORD = "correct horse"
SALT = "battery staple"
MODES = [
    {"filename_encryption": "standard", "directory_name_encryption": "true"},
    {"filename_encryption": "obfuscate", "directory_name_encryption": "false"},
    {"filename_encryption": "off"},
]


async def mount_local(services: Services, mount_path: str, root: Path) -> None:
    root.mkdir(parents=True, exist_ok=True)
    addition = json.dumps({"root_folder_path": str(root)})
    await services.storages.create(Storage(0, mount_path, "Local", addition=addition))


async def crypt_of(services: Services, remote_path: str, **options: Any) -> CryptDriver:
    settings: dict[str, Any] = {"password": PASSWORD, "salt": SALT, **options}
    driver = CryptDriver(
        Storage(9999, "/crypt", "Crypt"), Addition(remote_path=remote_path, **settings)
    )
    driver.tree = services.tree
    await driver.init()
    return driver


class TestCryptConformance(DriverConformance):
    @pytest.fixture(params=MODES, ids=lambda m: m["filename_encryption"])
    async def driver_factory(
        self, services: Services, tmp_path: Path, request: pytest.FixtureRequest
    ) -> DriverFactory:
        await mount_local(services, "/local", tmp_path / "local")
        (tmp_path / "local" / "vault").mkdir()

        async def build() -> CryptDriver:
            return await crypt_of(services, "/local/vault", **request.param)

        return build


@pytest.fixture
async def vault(services: Services, tmp_path: Path) -> Path:
    """A Local storage at /local whose folder ``vault`` holds the encrypted objects."""
    await mount_local(services, "/local", tmp_path / "local")
    (tmp_path / "local" / "vault").mkdir()
    return tmp_path / "local" / "vault"


async def test_names_that_do_not_decrypt_are_left_out(services: Services, vault: Path) -> None:
    crypt = await crypt_of(services, "/local/vault", **MODES[0])
    root = await crypt.root_obj()
    await put_bytes(crypt, root, "kept.txt", b"kept")
    (vault / "README.md").write_text("not encrypted")
    (vault / "plain folder").mkdir()
    listed = await crypt.list(root)
    assert [(o.name, o.size) for o in listed] == [("kept.txt", 4)]
    below = os.listdir(vault)
    assert len(below) == 3 and "kept.txt" not in below


async def test_show_hidden_off_leaves_out_dot_names(services: Services, vault: Path) -> None:
    crypt = await crypt_of(services, "/local/vault", show_hidden=False, **MODES[0])
    root = await crypt.root_obj()
    await put_bytes(crypt, root, ".hidden", b"h")
    await crypt.make_dir(root, ".folder")
    await put_bytes(crypt, root, "seen", b"s")
    assert [o.name for o in await crypt.list(root)] == ["seen"]


async def test_listings_show_plain_sizes(services: Services, vault: Path) -> None:
    crypt = await crypt_of(services, "/local/vault", filename_encryption="off")
    root = await crypt.root_obj()
    for size in (0, 1, DATA_SIZE, DATA_SIZE + 1):
        await put_bytes(crypt, root, f"f{size}", os.urandom(size))
    sizes = {o.name: o.size for o in await crypt.list(root)}
    assert sizes == {f"f{s}": s for s in (0, 1, DATA_SIZE, DATA_SIZE + 1)}
    on_disk = {p.name: p.stat().st_size for p in vault.iterdir()}
    assert on_disk == {f"f{s}.bin": encrypted_size(s) for s in (0, 1, DATA_SIZE, DATA_SIZE + 1)}


async def test_a_wrong_password_lists_an_error(services: Services, vault: Path) -> None:
    right = await crypt_of(services, "/local/vault", **MODES[0])
    await put_bytes(right, await right.root_obj(), "secret.txt", b"secret")
    await right.make_dir(await right.root_obj(), "folder")
    wrong = await crypt_of(services, "/local/vault", password="wrong horse", **MODES[0])
    with pytest.raises(ManifoldError, match="wrong password"):
        await wrong.list(await wrong.root_obj())


async def test_a_wrong_password_fails_the_first_block(services: Services, vault: Path) -> None:
    right = await crypt_of(services, "/local/vault", filename_encryption="off")
    await put_bytes(right, await right.root_obj(), "secret.txt", b"secret")
    wrong = await crypt_of(services, "/local/vault", password="wrong", filename_encryption="off")
    file = await wrong.get("/secret.txt")
    with pytest.raises(ManifoldError, match="bad password"):
        await read_obj(wrong, file)


async def test_a_damaged_block_fails_only_reads_of_it(services: Services, vault: Path) -> None:
    crypt = await crypt_of(services, "/local/vault", filename_encryption="off")
    data = os.urandom(3 * DATA_SIZE)
    file = await put_bytes(crypt, await crypt.root_obj(), "three.bin", data)
    damaged = bytearray((vault / "three.bin.bin").read_bytes())
    damaged[HEADER_SIZE + BLOCK_SIZE + 100] ^= 1
    (vault / "three.bin.bin").write_bytes(bytes(damaged))
    assert await read_obj(crypt, file, 10, 1000) == data[10:1010]
    assert (
        await read_obj(crypt, file, 2 * DATA_SIZE, 50) == data[2 * DATA_SIZE : 2 * DATA_SIZE + 50]
    )
    with pytest.raises(ManifoldError, match="failed to authenticate"):
        await read_obj(crypt, file, DATA_SIZE + 5, 10)
    with pytest.raises(ManifoldError, match="failed to authenticate"):
        await read_obj(crypt, file)


async def test_the_remote_path_may_not_hold_or_lie_in_the_storage(services: Services) -> None:
    with pytest.raises(InvalidRequest, match="inside the crypt storage"):
        await crypt_of(services, "/crypt/inner")
    with pytest.raises(InvalidRequest, match="holds the crypt storage"):
        await crypt_of(services, "/")


class CountingTree:
    """A tree of one file (``/below/big.bin.bin``, on disk at ``path``) that counts the
    bytes read through its links: what a read through Crypt costs the storage below."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.bytes_read = 0

    def _obj(self) -> Obj:
        return Obj("big.bin.bin", self.path.stat().st_size, False, datetime.now(UTC))

    async def get_path(self, path: str) -> Obj:
        if path != "/below/big.bin.bin":
            raise ObjectNotFound()
        return self._obj()

    async def list_path(self, path: str) -> list[Obj]:
        return [self._obj()]

    async def link_path(self, path: str, args: LinkArgs) -> Link:
        return Link(reader=self._read)

    def mount_path_of(self, path: str) -> str | None:
        return "/below"

    async def _read(self, offset: int, length: int | None) -> AsyncIterator[bytes]:
        left = length
        with self.path.open("rb") as file:
            file.seek(offset)
            while data := file.read(1 << 20 if left is None else min(1 << 20, left)):
                self.bytes_read += len(data)
                left = None if left is None else left - len(data)
                yield data


async def test_a_range_near_the_end_of_10_gib_reads_two_blocks(tmp_path: Path) -> None:
    """Only the header and the blocks at 9 GiB hold real bytes: the rest of the file is a
    hole, so reading any of it would fail authentication."""
    size, at, length = 10 * 2**30, 9 * 2**30, 100_000
    keys = derive_keys(PASSWORD, SALT)
    header = new_header()
    index = at // DATA_SIZE
    data = os.urandom(2 * DATA_SIZE)
    path = tmp_path / "big.bin.bin"
    with path.open("wb") as file:
        file.truncate(encrypted_size(size))
        file.write(header)
        file.seek(HEADER_SIZE + index * BLOCK_SIZE)
        file.write(seal_blocks(keys.data, header_nonce(header), index, data))
    tree = CountingTree(path)
    crypt = CryptDriver(
        Storage(9999, "/crypt", "Crypt"),
        Addition(remote_path="/below", password=PASSWORD, salt=SALT),
    )
    crypt.tree = tree
    await crypt.init()
    (listed,) = await crypt.list(await crypt.root_obj())
    assert (listed.name, listed.size) == ("big.bin", size)
    assert await read_obj(crypt, listed, at, length) == data[:length]
    assert tree.bytes_read <= HEADER_SIZE + 2 * BLOCK_SIZE


async def test_uploads_are_encrypted_as_they_stream() -> None:
    """The first blocks go out before the upload has sent more than a batch of them."""
    sent = 0

    async def source() -> AsyncIterator[bytes]:
        nonlocal sent
        for _ in range(64):
            sent += DATA_SIZE
            yield bytes(DATA_SIZE)

    async def run(func: Callable[..., bytes], *args: Any) -> bytes:
        return func(*args)

    keys = derive_keys(PASSWORD, SALT)
    out = encrypted(source(), keys.data, 64 * DATA_SIZE, run)
    assert len(await anext(out)) == HEADER_SIZE
    assert len(await anext(out)) == BATCH * BLOCK_SIZE
    assert sent <= 2 * BATCH * DATA_SIZE
    assert sum([len(d) async for d in out]) == encrypted_size(64 * DATA_SIZE) - (
        HEADER_SIZE + BATCH * BLOCK_SIZE
    )


async def test_a_wrong_count_uploads_nothing_below(services: Services, vault: Path) -> None:
    crypt = await crypt_of(services, "/local/vault", filename_encryption="off")
    with pytest.raises(InvalidRequest):
        await crypt.put(await crypt.root_obj(), Upload("short.bin", chunks(b"x" * 10), 11, None))
    assert os.listdir(vault) == []


async def _mount(api: Api, mount_path: str, driver: str, addition: dict[str, Any]) -> None:
    body = {"mount_path": mount_path, "driver": driver, "addition": json.dumps(addition)}
    created = await api.post("/api/admin/storage/create", body)
    assert created["code"] == 200, created


async def test_through_the_api_passwords_are_kept_obscured_and_a_wrong_one_is_refused(
    api: Api, tmp_path: Path
) -> None:
    await api.as_admin()
    (tmp_path / "vault").mkdir()
    await _mount(api, "/local", "Local", {"root_folder_path": str(tmp_path)})
    settings = {"remote_path": "/local/vault", "salt": SALT}
    await _mount(api, "/right", "Crypt", {"password": PASSWORD, **settings})
    await _mount(api, "/wrong", "Crypt", {"password": "wrong", **settings})
    sent = {"File-Path": "/right/a.txt", "Authorization": api.token}
    put = await api.client.put("/api/fs/put", content=b"the secret", headers=sent)
    assert put.json()["code"] == 200, put.text
    storages = await api.get("/api/admin/storage/list")
    additions = [s["addition"] for s in storages["data"]["content"] if s["driver"] == "Crypt"]
    assert len(additions) == 2
    assert all(PASSWORD not in a and SALT not in a and MARKER in a for a in additions)
    right = await api.post("/api/fs/get", {"path": "/right/a.txt"})
    got = await api.client.get(right["data"]["raw_url"].split("manifold.test")[1])
    assert (got.status_code, got.content) == (200, b"the secret")
    wrong = await api.post("/api/fs/get", {"path": "/wrong/a.txt"})
    refused = await api.client.get(wrong["data"]["raw_url"].split("manifold.test")[1])
    assert refused.status_code >= 400
    assert b"the secret" not in refused.content and b"bad password" in refused.content


@pytest.fixture(scope="module")
def sshd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SshServer]:
    server = SshServer(tmp_path_factory.mktemp("sshd")).start()
    yield server
    server.stop()


class TestCryptOverSftpConformance(DriverConformance):
    """The suite again with an SFTP storage below: links that are range readers, renames
    and puts of a remote back end."""

    @pytest.fixture
    async def driver_factory(
        self, services: Services, sshd: SshServer, tmp_path: Path
    ) -> DriverFactory:
        (tmp_path / "served" / "vault").mkdir(parents=True)
        addition = {
            "address": sshd.address,
            "username": "root",
            "private_key": sshd.private_key,
            "root_folder_path": str(tmp_path / "served"),
            "host_key_fingerprint": sshd.host_fingerprint,
        }
        storage = Storage(0, "/sftp", "SFTP", addition=json.dumps(addition))
        await services.storages.create(storage)

        async def build() -> CryptDriver:
            return await crypt_of(services, "/sftp/vault", **MODES[0])

        return build


async def test_thumbnails_are_read_from_the_thumbnails_folder(
    services: Services, vault: Path
) -> None:
    crypt = await crypt_of(services, "/local/vault", thumbnail=True, **MODES[0])
    root = await crypt.root_obj()
    await put_bytes(crypt, root, "photo.jpg", b"the photo")
    thumbs = await crypt.make_dir(root, ".thumbnails")
    await put_bytes(crypt, thumbs, "photo.jpg.webp", b"the thumbnail")
    photo = find(await crypt.list(root), "photo.jpg")
    assert photo.thumb == THUMB_SELF
    link = await crypt.link(photo, LinkArgs(type="thumb"))
    assert await read_link(link) == b"the thumbnail"
    plain = await crypt_of(services, "/local/vault", **MODES[0])
    assert find(await plain.list(root), "photo.jpg").thumb == ""


async def test_a_big_folder_lists_whole(services: Services, vault: Path) -> None:
    crypt = await crypt_of(services, "/local/vault", filename_encryption="off")
    for i in range(1500):
        (vault / f"file-{i:04d}.bin").write_bytes(new_header())
    (vault / "foreign.txt").write_bytes(b"left out")
    listed = await crypt.list(await crypt.root_obj())
    assert sorted(o.name for o in listed) == [f"file-{i:04d}" for i in range(1500)]
    assert {o.size for o in listed} == {0}
