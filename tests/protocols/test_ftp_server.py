"""The FTP server with Python's ftplib, in clear text: listings, transfers, changes, errors."""

from __future__ import annotations

import ftplib
import io
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from manifold.container import Services
from tests.api.fs_helpers import make_tree
from tests.protocols.ftp_helpers import blocking, live_ftp, mount, plain, read, user


@pytest.fixture
async def disk(services: Services, tmp_path: Path) -> Path:
    root = make_tree(
        tmp_path / "disk",
        {"docs/readme.txt": "hello world", "docs/big.bin": bytes(range(256)) * 400, "empty/": ""},
    )
    await mount(services, "/local", root)
    await user(services, "fred")
    return root


@pytest.fixture
async def port(services: Services, disk: Path) -> AsyncIterator[int]:
    async with live_ftp(services) as port:
        yield port


def session(port: int) -> dict[str, object]:
    ftp = plain(port, "fred")
    seen: dict[str, object] = {"welcome": ftp.getwelcome(), "pwd": ftp.pwd()}
    seen["root"] = sorted(ftp.nlst())
    ftp.cwd("/local/docs")
    seen["cwd"] = ftp.pwd()
    seen["names"] = sorted(name for name, _ in ftp.mlsd())
    lines: list[str] = []
    ftp.retrlines("LIST", lines.append)
    seen["list"] = lines
    seen["size"] = ftp.size("big.bin")
    seen["whole"] = read(ftp, "readme.txt")
    seen["tail"] = read(ftp, "big.bin", rest=1000)
    ftp.quit()
    return seen


async def test_listing_and_reading(port: int, disk: Path) -> None:
    seen = await blocking(session, port)
    assert seen["welcome"] == "220 AList FTP Endpoint"
    assert seen["pwd"] == "/"
    assert seen["root"] == ["local"]
    assert seen["cwd"] == "/local/docs"
    assert seen["names"] == ["big.bin", "readme.txt"]
    assert any(line.endswith(" readme.txt") and line.startswith("-") for line in seen["list"])
    assert seen["size"] == 256 * 400
    assert seen["whole"] == b"hello world"
    assert seen["tail"] == (bytes(range(256)) * 400)[1000:]


def changes(port: int) -> None:
    ftp = plain(port, "fred")
    ftp.cwd("/local")
    ftp.storbinary("STOR new.txt", io.BytesIO(b"first "))
    ftp.storbinary("APPE new.txt", io.BytesIO(b"second"))
    ftp.mkd("made")
    ftp.rename("new.txt", "made/moved.txt")
    ftp.rename("docs/readme.txt", "docs/renamed.txt")
    ftp.delete("docs/big.bin")
    ftp.rmd("empty")
    ftp.quit()


async def test_upload_append_rename_move_delete(port: int, disk: Path) -> None:
    await blocking(changes, port)
    assert (disk / "made" / "moved.txt").read_bytes() == b"first second"
    assert (disk / "docs" / "renamed.txt").read_bytes() == b"hello world"
    assert not (disk / "docs" / "big.bin").exists()
    assert not (disk / "empty").exists()


def errors(port: int) -> list[str]:
    ftp = plain(port, "fred")
    replies = []
    for command in (
        "SIZE /local/nope",
        "CWD /local/docs/readme.txt",
        "MKD /local/docs",
        "RMD /local/nope/x",
    ):
        try:
            replies.append(ftp.sendcmd(command))
        except ftplib.error_perm as exc:
            replies.append(str(exc)[:3])
    ftp.quit()
    return replies


async def test_errors_answer_550(port: int) -> None:
    assert await blocking(errors, port) == ["550", "550", "550", "550"]


def rename_across(port: int) -> str:
    ftp = plain(port, "fred")
    reply = ftp.rename("/local/docs/readme.txt", "/other/readme.txt")
    ftp.quit()
    return reply


async def test_a_rename_into_another_storage_moves_the_file(
    services: Services, port: int, disk: Path, tmp_path: Path
) -> None:
    other = tmp_path / "other"
    other.mkdir()
    await mount(services, "/other", other)
    reply = await blocking(rename_across, port)
    assert reply.startswith("250")
    assert (other / "readme.txt").read_bytes() == b"hello world"
    assert not (disk / "docs" / "readme.txt").exists()
