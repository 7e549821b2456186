"""Who may do what over FTP: guests and folder passwords, read-only users, base paths,
hidden entries, the FTP bits, paths that try to climb out, and aborted uploads."""

from __future__ import annotations

import ftplib
import io
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from manifold.container import Services
from manifold.models import Meta, Perm
from tests.api.fs_helpers import make_tree
from tests.protocols.ftp_helpers import (
    FILE_BITS,
    blocking,
    enable_guest,
    live_ftp,
    mount,
    plain,
    read,
    user,
)


@pytest.fixture
async def disk(services: Services, tmp_path: Path) -> Path:
    root = make_tree(
        tmp_path / "disk",
        {"docs/readme.txt": "hello world", "docs/.secret": "hush", "open/a.txt": "a"},
    )
    (tmp_path / "outside.txt").write_text("outside")
    await mount(services, "/local", root)
    return root


@pytest.fixture
async def port(services: Services, disk: Path) -> AsyncIterator[int]:
    async with live_ftp(services) as port:
        yield port


def login_reply(port: int, name: str, password: str) -> str:
    with ftplib.FTP(timeout=60) as ftp:
        ftp.connect("127.0.0.1", port)
        try:
            return ftp.login(name, password)
        except ftplib.error_perm as exc:
            return str(exc)


def attempt(port: int, name: str, password: str, *commands: str) -> list[str]:
    """Each command's reply (its first line), an error's included."""
    replies = []
    with plain(port, name, password) as ftp:
        for command in commands:
            try:
                if command.startswith(("RETR ", "NLST")):
                    replies.append(_transfer(ftp, command))
                elif command.startswith("STOR "):
                    ftp.storbinary(command, io.BytesIO(b"data"))
                    replies.append("226")
                else:
                    replies.append(ftp.sendcmd(command))
            except ftplib.error_perm as exc:
                replies.append(str(exc))
    return replies


def _transfer(ftp: ftplib.FTP, command: str) -> str:
    if command.startswith("NLST"):
        return " ".join(sorted(ftp.nlst(*command.split(" ")[1:])))
    return read(ftp, command.removeprefix("RETR ")).decode()


async def test_a_disabled_guest_cannot_log_in(port: int) -> None:
    reply = await blocking(login_reply, port, "anonymous", "me@example.com")
    assert reply == "530 Guest user is disabled, login please"


async def test_the_guest_password_is_the_folder_password(services: Services, port: int) -> None:
    await enable_guest(services, int(Perm.FTP_READ))
    await services.metas.create(Meta(0, "/local/docs", "sesame", p_sub=True))
    read_open = await blocking(attempt, port, "anonymous", "x", "RETR /local/open/a.txt")
    assert read_open == ["a"]
    locked = await blocking(attempt, port, "guest", "wrong", "RETR /local/docs/readme.txt")
    assert locked[0].startswith("550 password is incorrect")
    unlocked = await blocking(attempt, port, "guest", "sesame", "RETR /local/docs/readme.txt")
    assert unlocked == ["hello world"]
    write = await blocking(attempt, port, "anonymous", "x", "STOR /local/open/b.txt")
    assert write[0].startswith("550 permission denied")


async def test_a_read_only_user_cannot_write(services: Services, port: int, disk: Path) -> None:
    await user(services, "reader", permission=int(Perm.FTP_READ) | FILE_BITS)
    replies = await blocking(
        attempt,
        port,
        "reader",
        "reader-pw",
        "RETR /local/open/a.txt",
        "STOR /local/open/b.txt",
        "MKD /local/new",
        "DELE /local/open/a.txt",
        "RNFR /local/open/a.txt",
        "RNTO /local/open/c.txt",
    )
    assert replies[0] == "a"
    assert all(r.startswith("550 permission denied") for r in replies[1:4]), replies
    assert replies[5].startswith("550 permission denied")
    assert sorted(p.name for p in (disk / "open").iterdir()) == ["a.txt"]


async def test_users_without_the_ftp_bit_are_refused(services: Services, port: int) -> None:
    await user(services, "webonly", permission=FILE_BITS | int(Perm.WEBDAV_READ))
    reply = await blocking(login_reply, port, "webonly", "webonly-pw")
    assert reply == "530 user is not allowed to access via FTP"
    assert (await blocking(login_reply, port, "nobody", "x")).startswith("530 username or")


async def test_a_base_path_is_the_root_no_spelling_climbs_out(
    services: Services, port: int
) -> None:
    await user(services, "based", base_path="/local/docs")
    replies = await blocking(
        attempt,
        port,
        "based",
        "based-pw",
        "PWD",
        "NLST",
        "CWD ../..",
        "PWD",
        "RETR ../../open/a.txt",
        "RETR /../../../outside.txt",
        "SIZE %2e%2e/open/a.txt",
        "SIZE ..\\open\\a.txt",
        "CDUP",
        "PWD",
    )
    assert replies[0].startswith('257 "/"')
    assert replies[1] == ".secret readme.txt"
    assert replies[2].startswith("250")
    assert replies[3].startswith('257 "/"')
    assert replies[4].startswith("550")  # /open/a.txt under the base: not there
    assert replies[5].startswith("550")
    assert replies[6].startswith("550")  # a literal name, not a way up
    assert replies[7].startswith(("550", "553"))
    assert replies[8].startswith("250")
    assert replies[9].startswith('257 "/"')


async def test_hidden_entries_are_left_out(services: Services, port: int) -> None:
    await services.metas.create(Meta(0, "/local", "", hide="^open$", h_sub=True))
    await user(services, "plain")
    await user(services, "seer", permission=FILE_BITS | int(Perm.FTP_READ | Perm.SEE_HIDDEN))
    shown = await blocking(attempt, port, "plain", "plain-pw", "NLST /local")
    assert shown == ["docs"]
    everything = await blocking(attempt, port, "seer", "seer-pw", "NLST /local")
    assert everything == ["docs open"]


def aborted_upload(port: int) -> list[str]:
    with plain(port, "writer", "writer-pw") as ftp:
        ftp.voidcmd("TYPE I")
        with ftp.transfercmd("STOR /local/open/partial.bin") as conn:
            conn.sendall(b"x" * 100_000)
            ftp.putcmd("ABOR")
            replies = [ftp.getline(), ftp.getline()]
        return [*replies, ftp.sendcmd("NOOP")]


async def test_an_aborted_upload_leaves_nothing(services: Services, port: int, disk: Path) -> None:
    await user(services, "writer")
    replies = await blocking(aborted_upload, port)
    assert replies[0].startswith("426") and replies[1].startswith("226"), replies
    assert sorted(p.name for p in (disk / "open").iterdir()) == ["a.txt"]


async def test_failed_logins_count_toward_the_api_lock_out(services: Services, port: int) -> None:
    await user(services, "victim")
    for _ in range(services.config.max_login_failures):
        assert (await blocking(login_reply, port, "victim", "wrong")).startswith("530")
    assert (await blocking(login_reply, port, "victim", "victim-pw")).startswith("530 Too many")


async def test_rnto_replaces_only_a_file_and_only_with_the_remove_bit(
    services: Services, port: int, disk: Path
) -> None:
    make_tree(disk, {"t/f.txt": "f", "t/g.txt": "g", "t/full/in.txt": "in", "t/e.txt": ""})
    keeper = int(Perm.FTP_READ | Perm.FTP_MANAGE) | (FILE_BITS & ~int(Perm.REMOVE))
    await user(services, "keeper", permission=keeper)
    await user(services, "owner")
    kept = await blocking(
        attempt, port, "keeper", "keeper-pw", "RNFR /local/t/f.txt", "RNTO /local/t/g.txt"
    )
    assert kept[1].startswith("550")
    onto_folder = await blocking(
        attempt, port, "owner", "owner-pw", "RNFR /local/t/f.txt", "RNTO /local/t/full"
    )
    assert onto_folder[1].startswith("550")
    onto_parent = await blocking(
        attempt, port, "owner", "owner-pw", "RNFR /local/t/full/in.txt", "RNTO /local/t/full"
    )
    assert onto_parent[1].startswith("550")
    assert (disk / "t" / "g.txt").read_text() == "g"
    assert (disk / "t" / "full" / "in.txt").read_text() == "in"
    emptied = await blocking(
        attempt, port, "keeper", "keeper-pw", "RNFR /local/t/f.txt", "RNTO /local/t/e.txt"
    )
    assert emptied[1].startswith("250")
    assert (disk / "t" / "e.txt").read_text() == "f"
