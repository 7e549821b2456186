"""Crypt against the real rclone (the binary beside this Python), both ways, for each
name mode and spelling: what Manifold writes through Crypt, ``rclone cat`` and
``rclone cryptcheck`` read with the same password; what ``rclone copy`` and
``rclone rcat`` write, Manifold lists, reads in ranges and renames."""

from __future__ import annotations

import asyncio
import os
import subprocess
from pathlib import Path

import pytest

from manifold.container import Services
from manifold.drivers.crypt.driver import CryptDriver
from manifold.drivers.rclone.process import RCLONE
from manifold.testing.conformance import find, put_bytes, read_obj
from tests.drivers.test_crypt import PASSWORD, SALT, crypt_of, mount_local

# (filename_encryption, filename_encoding, directory_name_encryption)
CONFIGS = [
    ("standard", "base32", "true"),
    ("standard", "base64", "true"),
    ("standard", "base32768", "true"),
    ("standard", "base32", "false"),
    ("obfuscate", "base64", "true"),
    ("off", "base64", "false"),
]

pytestmark = pytest.mark.skipif(not os.access(RCLONE, os.X_OK), reason="no rclone beside Python")


def rclone(config: Path, *args: str, data: bytes = b"") -> bytes:
    """``rclone args`` with the crypt remote ``vault:`` of ``config``; its output."""
    done = subprocess.run(
        [RCLONE, "--config", str(config), *args],
        input=data,
        capture_output=True,
        check=False,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr.decode()
    return done.stdout


def obscured(value: str) -> str:
    return subprocess.run(
        [RCLONE, "obscure", value], capture_output=True, check=True, text=True
    ).stdout.strip()


class Setup:
    """A Local storage at /local, its folder ``vault`` seen by Manifold's Crypt and by an
    rclone crypt remote ``vault:`` with the same settings."""

    def __init__(self, tmp_path: Path, settings: tuple[str, str, str]) -> None:
        mode, encoding, dirs = settings
        self.settings = {
            "filename_encryption": mode,
            "filename_encoding": encoding,
            "directory_name_encryption": dirs,
        }
        self.folder = tmp_path / "local" / "vault"
        self.config = tmp_path / "rclone.conf"
        lines = [
            "[vault]",
            "type = crypt",
            f"remote = {self.folder}",
            f"password = {obscured(PASSWORD)}",
            f"password2 = {obscured(SALT)}",
            *(f"{key} = {value}" for key, value in self.settings.items()),
        ]
        self.config.write_text("\n".join(lines) + "\n")

    def run(self, *args: str, data: bytes = b"") -> bytes:
        return rclone(self.config, *args, data=data)

    async def crypt(self, services: Services) -> CryptDriver:
        await mount_local(services, "/local", self.folder.parent)
        self.folder.mkdir(exist_ok=True)
        return await crypt_of(services, "/local/vault", **self.settings)


@pytest.fixture(params=CONFIGS, ids=lambda c: "-".join(c))
def setup(tmp_path: Path, request: pytest.FixtureRequest) -> Setup:
    return Setup(tmp_path, request.param)


async def test_rclone_reads_what_manifold_writes(
    services: Services, setup: Setup, tmp_path: Path
) -> None:
    crypt = await setup.crypt(services)
    files = {
        "hello.txt": b"hello, world\n",
        "docs/report 1.txt": os.urandom(200_000),
        "docs/文件 ü.bin": b"",
        "docs/deeper/.dot": os.urandom(65_536),
    }
    plain = tmp_path / "plain"
    for path, data in files.items():
        folder = await crypt.root_obj()
        for part in path.split("/")[:-1]:
            folder = await crypt.make_dir(folder, part)
        await put_bytes(crypt, folder, path.rsplit("/", 1)[-1], data)
        (plain / path).parent.mkdir(parents=True, exist_ok=True)
        (plain / path).write_bytes(data)
    for path, data in files.items():
        assert await asyncio.to_thread(setup.run, "cat", f"vault:{path}") == data
    listed = await asyncio.to_thread(setup.run, "lsf", "-R", "--files-only", "vault:")
    assert sorted(listed.decode().splitlines()) == sorted(files)
    await asyncio.to_thread(setup.run, "cryptcheck", str(plain), "vault:")


async def test_manifold_reads_and_renames_what_rclone_writes(
    services: Services, setup: Setup, tmp_path: Path
) -> None:
    crypt = await setup.crypt(services)
    plain = tmp_path / "plain"
    (plain / "sub dir").mkdir(parents=True)
    big = os.urandom(3 * 65_536 + 999)
    (plain / "big.bin").write_bytes(big)
    (plain / "sub dir" / "b ü.txt").write_bytes(b"beta")
    (plain / "empty").write_bytes(b"")
    await asyncio.to_thread(setup.run, "copy", str(plain), "vault:")
    await asyncio.to_thread(setup.run, "rcat", "vault:sub dir/piped.bin", data=b"piped" * 1000)

    root = await crypt.list(await crypt.root_obj())
    shown = sorted((o.name, o.size, o.is_dir) for o in root)
    assert shown == [("big.bin", len(big), False), ("empty", 0, False), ("sub dir", 0, True)]
    big_obj = find(root, "big.bin")
    for start, length in ((0, 10), (65_000, 70_000), (3 * 65_536, None), (len(big) - 1, 1)):
        end = None if length is None else start + length
        assert await read_obj(crypt, big_obj, start, length) == big[start:end]
    sub = await crypt.list(find(root, "sub dir"))
    assert sorted((o.name, o.size) for o in sub) == [("b ü.txt", 4), ("piped.bin", 5000)]
    assert await read_obj(crypt, find(sub, "piped.bin")) == b"piped" * 1000

    await crypt.rename(big_obj, "renamed big.bin")
    await crypt.rename(find(root, "sub dir"), "moved dir")
    listed = await asyncio.to_thread(setup.run, "lsf", "-R", "vault:")
    assert sorted(listed.decode().splitlines()) == [
        "empty",
        "moved dir/",
        "moved dir/b ü.txt",
        "moved dir/piped.bin",
        "renamed big.bin",
    ]
    assert await asyncio.to_thread(setup.run, "cat", "vault:renamed big.bin") == big
