"""Clients that give transfers up or vanish: resets of the data and control connections,
ABOR, downloads closed early, a TLS handshake that fails. Each aborted transfer answers
426 (where the control connection is still there), leaves nothing of an upload, and is
one line in the log; nothing is logged with a traceback."""

from __future__ import annotations

import ftplib
import logging
import os
import socket
from collections.abc import Callable
from pathlib import Path

import pytest

from manifold.container import Services
from tests.api.fs_helpers import make_tree
from tests.fixtures.certs import self_signed
from tests.protocols.ftp_helpers import blocking, drop_control, live_ftp, mount, plain, reset, user

# Larger than what the system buffers between the two ends, so a download is still
# being sent when the client gives it up.
BIG = os.urandom(1 << 20) * 32
UPLOAD = os.urandom(1 << 20)


@pytest.fixture
async def disk(services: Services, tmp_path: Path) -> Path:
    root = make_tree(tmp_path / "disk", {"big.bin": BIG})
    await mount(services, "/local", root)
    await user(services, "fred")
    cert, key = self_signed(tmp_path)
    await services.settings.save(
        [("ftp_tls_public_cert_path", str(cert)), ("ftp_tls_private_key_path", str(key))]
    )
    return root


def watch(caplog: pytest.LogCaptureFixture) -> Callable[[], list[logging.LogRecord]]:
    """Every record logged from now on (the server's included), read once it closed."""
    caplog.set_level(logging.INFO)
    return lambda: list(caplog.records)


def tracebacks(records: list[logging.LogRecord]) -> list[str]:
    return [f"{r.name}: {r.getMessage()}" for r in records if r.exc_info or r.exc_text]


def aborts(records: list[logging.LogRecord]) -> list[str]:
    return [r.getMessage() for r in records if r.name == "manifold.ftp" and "aborted" in r.msg]


def reply(ftp: ftplib.FTP) -> str:
    try:
        return ftp.getresp()
    except ftplib.Error as exc:
        return str(exc)


def wait_closed(conn: socket.socket) -> None:
    """Read (and drop) what ``conn`` receives until the server has closed it."""
    conn.settimeout(60)
    try:
        while conn.recv(1 << 16):
            pass
    except ConnectionResetError:
        pass


# --- control connections ---------------------------------------------------------------


def idle_clients(port: int) -> int:
    for _ in range(10):
        plain(port, "fred").close()  # an end without QUIT
    for _ in range(10):
        drop_control(plain(port, "fred"))
    with plain(port, "fred") as ftp:
        return len(ftp.nlst("/local"))  # the server still serves


async def test_clients_that_reset_their_connections_leave_no_traceback(
    services: Services, disk: Path, caplog: pytest.LogCaptureFixture
) -> None:
    records = watch(caplog)
    async with live_ftp(services) as port:
        assert await blocking(idle_clients, port) == 1
    assert tracebacks(records()) == []
    assert [r for r in records() if r.levelno >= logging.WARNING] == []


def failed_handshake(port: int) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=60) as sock:
        sock.recv(1024)  # the greeting
        sock.sendall(b"AUTH TLS\r\n")
        sock.recv(1024)  # 234
        sock.sendall(b"this is no TLS handshake\r\n" * 4)
        wait_closed(sock)
    with plain(port, "fred") as ftp:
        return ftp.voidcmd("NOOP").encode()


async def test_a_failed_tls_handshake_ends_its_connection_quietly(
    services: Services, disk: Path, caplog: pytest.LogCaptureFixture
) -> None:
    records = watch(caplog)
    async with live_ftp(services) as port:
        assert (await blocking(failed_handshake, port)).startswith(b"200")
    assert tracebacks(records()) == []


# --- transfers --------------------------------------------------------------------------


def reset_upload(ftp: ftplib.FTP) -> str:
    conn = ftp.transfercmd("STOR /local/reset.bin")
    conn.sendall(UPLOAD)
    reset(conn)
    return reply(ftp)


def reset_download(ftp: ftplib.FTP) -> str:
    conn = ftp.transfercmd("RETR /local/big.bin")
    conn.recv(1000)
    reset(conn)
    return reply(ftp)


def early_close(ftp: ftplib.FTP) -> str:
    """A ranged read as rclone's streams make it: the bytes wanted, then the data
    connection closed with the rest unread."""
    conn = ftp.transfercmd("RETR /local/big.bin", rest=1 << 20)
    got = b""
    while len(got) < 1 << 16:
        got += conn.recv(1 << 16)
    conn.close()
    return reply(ftp)


def abor_upload(ftp: ftplib.FTP) -> str:
    with ftp.transfercmd("STOR /local/abor.bin") as conn:
        conn.sendall(UPLOAD)
        ftp.putcmd("ABOR")
        return reply(ftp) + " / " + reply(ftp)


def abor_download(ftp: ftplib.FTP) -> str:
    with ftp.transfercmd("RETR /local/big.bin") as conn:
        conn.recv(1000)
        ftp.putcmd("ABOR")
        return reply(ftp) + " / " + reply(ftp)


def aborted_transfers(port: int) -> list[str]:
    replies = []
    with plain(port, "fred") as ftp:
        ftp.voidcmd("TYPE I")
        for transfer in (reset_upload, reset_download, early_close, abor_upload, abor_download):
            replies.append(transfer(ftp))
        replies.append(ftp.voidcmd("NOOP"))  # the control connection goes on
    return replies


async def test_aborted_transfers_answer_426_and_log_one_line_each(
    services: Services, disk: Path, caplog: pytest.LogCaptureFixture
) -> None:
    records = watch(caplog)
    async with live_ftp(services) as port:
        replies = await blocking(aborted_transfers, port)
    codes = [[part[:3] for part in r.split(" / ")] for r in replies]
    assert codes == [["426"]] * 3 + [["426", "226"]] * 2 + [["200"]], replies
    assert not (disk / "reset.bin").exists()
    assert not (disk / "abor.bin").exists()
    assert (disk / "big.bin").read_bytes() == BIG
    assert tracebacks(records()) == []
    logged = aborts(records())
    assert len(logged) == 5, logged
    assert all("\n" not in line for line in logged)


def control_lost_mid_upload(port: int) -> None:
    ftp = plain(port, "fred")
    ftp.voidcmd("TYPE I")
    with ftp.transfercmd("STOR /local/orphan.bin") as conn:
        conn.sendall(UPLOAD)
        drop_control(ftp)
        wait_closed(conn)  # the server gave the upload up and cut its data connection


async def test_a_control_connection_lost_mid_upload_leaves_nothing(
    services: Services, disk: Path, caplog: pytest.LogCaptureFixture
) -> None:
    records = watch(caplog)
    async with live_ftp(services) as port:
        await blocking(control_lost_mid_upload, port)
    assert not (disk / "orphan.bin").exists()
    assert tracebacks(records()) == []
    assert len(aborts(records())) == 1
