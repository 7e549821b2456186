"""Downloads whose bytes the kernel splices from the back end's socket into the
client's (``manifold.splice``): FTP and Rclone storages through a real uvicorn server,
real back ends (pyftpdlib, rclone) and a client on a raw socket.

What a client must not notice: the answer is whole and exact, the connection serves
the next request, ranges work; what must hold when a side fails: a client gone
mid-way frees the back end for the next download, a back end that dies cuts the
answer short rather than hanging it. TLS to the client takes the ordinary path.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import os
import secrets
import signal
import socket
import ssl
import struct
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from urllib.parse import quote

import pytest

from manifold.container import Services
from manifold.drivers.rclone.process import rclone_of
from manifold.splice import spliced_bytes
from tests.api.live_server import STUCK, serving
from tests.conftest import Api, open_api, start_services
from tests.drivers import ftp_server
from tests.drivers.rclone_remotes import local
from tests.fixtures.certs import self_signed

MiB = 1 << 20
PAYLOAD = secrets.token_bytes(6 * MiB)
# Big enough that a transfer is still under way when a side fails mid-way (more than
# the socket buffers and the pipe between them hold).
BIG = 96 * MiB
CREATE = "/api/admin/storage/create"
# The FTP storage's idle limit in the stall tests, and how long a download may take to
# fail under it (generous: a loaded machine; the driver's own read timeout is 60 s).
IDLE_SECONDS = 2.0
FAIL_BOUND = 30.0


@pytest.fixture
def ftp(tmp_path: Path) -> Iterator[ftp_server.FtpServer]:
    server = ftp_server.pyftpdlib_server(tmp_path / "ftp")
    (server.root / "file.bin").write_bytes(PAYLOAD)
    yield server
    server.stop()


@pytest.fixture
async def admin(api: Api) -> Api:
    return await api.as_admin()


@pytest.fixture
async def live(services: Services) -> AsyncIterator[str]:
    async with serving(services) as url:
        yield url


async def mount(admin: Api, mount_path: str, driver: str, addition: dict[str, str]) -> None:
    body = {"mount_path": mount_path, "driver": driver, "addition": json.dumps(addition)}
    created = await admin.post(CREATE, body)
    assert created["code"] == 200, created


async def mount_ftp(admin: Api, ftp: ftp_server.FtpServer) -> None:
    await mount(admin, "/ftp", "FTP", {
        "address": ftp.address, "username": ftp.user, "password": ftp.password,
        "root_folder_path": "/", "encoding": "",
    })  # fmt: skip


def quick(services: Services, driver: str) -> None:
    """``driver``'s storages mounted from now on give up a read after ``IDLE_SECONDS``
    without a byte (the storage's idle limit, as the fault tests set it)."""
    info = services.registry.get(driver)
    assert info.driver_cls is not None, info.reason
    config = dataclasses.replace(info.config, idle_timeout=IDLE_SECONDS)
    services.registry.register(driver, info.driver_cls, info.options, config)


def target(admin: Api, path: str) -> str:
    return f"/p{quote(path)}?sign={admin.services.signer.sign(path)}"


class Client:
    """One kept-alive HTTP/1.1 connection on a raw socket."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer

    @classmethod
    async def open(cls, url: str, tls: ssl.SSLContext | None = None) -> Client:
        host, port = url.split("://")[1].split(":")
        reader, writer = await asyncio.open_connection(host, int(port), ssl=tls)
        return cls(reader, writer)

    async def ask(self, path: str, **headers: str) -> tuple[int, dict[str, str]]:
        """Send a GET; its status and headers once the head is in."""
        self.send(path, **headers)
        async with asyncio.timeout(STUCK):
            return await self._head()

    def send(self, path: str, **headers: str) -> None:
        """Send a GET without waiting for anything."""
        lines = [f"GET {path} HTTP/1.1", "Host: 127.0.0.1"]
        lines += [f"{name}: {value}" for name, value in headers.items()]
        self.writer.write(("\r\n".join(lines) + "\r\n\r\n").encode())

    async def answer(self) -> tuple[int, dict[str, str], bytes]:
        """The next answer on the connection: status, headers, body."""
        async with asyncio.timeout(STUCK):
            status, answer = await self._head()
            body = await self.reader.readexactly(int(answer["content-length"]))
        return status, answer, body

    async def _head(self) -> tuple[int, dict[str, str]]:
        head = (await self.reader.readuntil(b"\r\n\r\n")).decode("latin-1")
        status, *fields = head.strip().split("\r\n")
        answer = {k.lower(): v for k, v in (f.split(": ", 1) for f in fields)}
        return int(status.split(" ")[1]), answer

    async def get(self, path: str, **headers: str) -> tuple[int, dict[str, str], bytes]:
        status, answer = await self.ask(path, **headers)
        async with asyncio.timeout(STUCK):
            body = await self.reader.readexactly(int(answer["content-length"]))
        return status, answer, body

    async def settled(self) -> None:
        """Ask once more on this connection: its answer comes only once the server is
        done with the answers before (their last spliced piece counted)."""
        status, _, body = await self.get("/api/public/settings")
        assert status == 200 and body

    async def rest(self) -> bytes:
        """Whatever comes until the server closes the connection."""
        received = b""
        async with asyncio.timeout(STUCK):
            while chunk := await self.reader.read(1 << 16):
                received += chunk
        return received

    def reset(self) -> None:
        """Go away at once: a reset, not a goodbye."""
        sock = self.writer.get_extra_info("socket")
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.writer.transport.abort()

    def close(self) -> None:
        self.writer.close()


@contextlib.asynccontextmanager
async def connected(url: str, tls: ssl.SSLContext | None = None) -> AsyncIterator[Client]:
    """A ``Client`` on a connection of its own, closed when the block ends."""
    client = await Client.open(url, tls)
    try:
        yield client
    finally:
        client.close()


async def begun(client: Client, path: str) -> int:
    """Ask for a big file and take the first mebibyte of its answer; the bytes taken."""
    status, _ = await client.ask(path)
    assert status == 200
    return len(await client.reader.readexactly(MiB))


async def serves(live: str, path: str) -> None:
    """``path`` answers the whole payload, on a connection of its own."""
    async with connected(live) as client:
        status, _, body = await client.get(path)
    assert (status, body == PAYLOAD) == (200, True)


async def test_a_spliced_ftp_download_is_exact_and_the_connection_serves_the_next(
    admin: Api, ftp: ftp_server.FtpServer, live: str
) -> None:
    await mount_ftp(admin, ftp)
    before = spliced_bytes()
    async with connected(live) as client:
        for _ in range(2):
            status, _, body = await client.get(target(admin, "/ftp/file.bin"))
            assert (status, body == PAYLOAD) == (200, True)
        await client.settled()
    assert spliced_bytes() - before == 2 * len(PAYLOAD)  # no byte came through Python


async def test_spliced_bytes_are_counted_in_the_metrics(
    ftp: ftp_server.FtpServer, tmp_path: Path
) -> None:
    data = tmp_path / "metered"
    data.mkdir(mode=0o700)
    (data / "config.json").write_text(json.dumps({"metrics": "scrape-token"}))
    metered = await start_services(data)
    try:
        async with open_api(metered) as api, serving(metered) as url:
            admin = await api.as_admin()
            await mount_ftp(admin, ftp)
            before = spliced_bytes()
            async with connected(url) as client:
                status, _, body = await client.get(target(admin, "/ftp/file.bin"))
                await client.settled()
            assert (status, body == PAYLOAD, spliced_bytes() - before) == (200, True, len(PAYLOAD))
            scraped = await api.client.get(
                "/metrics", headers={"Authorization": "Bearer scrape-token"}
            )
    finally:
        await metered.stop()
    counted = 'manifold_http_response_bytes_total{route="/p/{path:path}"} '
    (line,) = [line for line in scraped.text.splitlines() if line.startswith(counted)]
    assert float(line.rsplit(" ", 1)[1]) == len(PAYLOAD)


async def test_a_range_is_spliced_exactly(admin: Api, ftp: ftp_server.FtpServer, live: str) -> None:
    await mount_ftp(admin, ftp)
    before = spliced_bytes()
    async with connected(live) as client:
        status, answer, body = await client.get(
            target(admin, "/ftp/file.bin"), Range="bytes=1000-4000999"
        )
        assert status == 206
        assert answer["content-range"] == f"bytes 1000-4000999/{len(PAYLOAD)}"
        assert body == PAYLOAD[1000:4001000]
        status, _, tail = await client.get(target(admin, "/ftp/file.bin"), Range="bytes=-10")
        assert (status, tail) == (206, PAYLOAD[-10:])
        await client.settled()
    assert spliced_bytes() - before == 4_000_000 + 10


async def test_a_client_gone_mid_way_frees_the_ftp_connection_for_the_next_download(
    admin: Api, ftp: ftp_server.FtpServer, live: str
) -> None:
    big = secrets.token_bytes(BIG)
    (ftp.root / "big.bin").write_bytes(big)
    await mount_ftp(admin, ftp)
    for _ in range(3):  # more than a pool's worth would hang if each kept its connection
        gone = await Client.open(live)
        status, answer = await gone.ask(target(admin, "/ftp/big.bin"))
        assert (status, answer["content-length"]) == (200, str(BIG))
        await gone.reader.readexactly(MiB)
        gone.reset()
    await serves(live, target(admin, "/ftp/file.bin"))


async def test_an_ftp_server_dying_mid_way_cuts_the_answer_short(
    admin: Api, ftp: ftp_server.FtpServer, live: str
) -> None:
    (ftp.root / "big.bin").write_bytes(secrets.token_bytes(BIG))
    await mount_ftp(admin, ftp)
    before = spliced_bytes()
    async with connected(live) as client:
        received = await begun(client, target(admin, "/ftp/big.bin"))
        ftp.crash()
        received += len(await client.rest())  # the server closes: no hang, no padding
    assert MiB <= received < BIG
    assert spliced_bytes() > before
    ftp.start()
    await serves(live, target(admin, "/ftp/file.bin"))


async def test_a_stalled_ftp_server_fails_the_spliced_download_within_its_idle_limit(
    admin: Api, ftp: ftp_server.FtpServer, services: Services, live: str
) -> None:
    (ftp.root / "big.bin").write_bytes(secrets.token_bytes(BIG))
    quick(services, "FTP")
    await mount_ftp(admin, ftp)
    before = spliced_bytes()
    async with connected(live) as client:
        received = await begun(client, target(admin, "/ftp/big.bin"))
        with ftp.frozen():
            started = time.monotonic()
            received += len(await client.rest())  # cut off, not held open
            took = time.monotonic() - started
    assert took < FAIL_BOUND, f"the stalled download took {took:.1f}s to fail"
    assert MiB <= received < BIG
    assert spliced_bytes() > before
    # The storage serves again once the server does.
    await serves(live, target(admin, "/ftp/file.bin"))


async def test_a_client_slower_than_the_idle_limit_still_gets_the_whole_file(
    admin: Api, ftp: ftp_server.FtpServer, services: Services, live: str
) -> None:
    big = secrets.token_bytes(BIG // 4)
    (ftp.root / "slow.bin").write_bytes(big)
    quick(services, "FTP")
    await mount_ftp(admin, ftp)
    before = spliced_bytes()
    async with connected(live) as client:
        status, answer = await client.ask(target(admin, "/ftp/slow.bin"))
        assert (status, answer["content-length"]) == (200, str(len(big)))
        body = await client.reader.readexactly(MiB)
        await asyncio.sleep(2.5 * IDLE_SECONDS)  # the client's wait, not the server's
        async with asyncio.timeout(STUCK):
            body += await client.reader.readexactly(len(big) - MiB)
        await client.settled()
    assert body == big
    assert spliced_bytes() - before == len(big)


async def test_requests_pipelined_behind_a_spliced_answer_are_answered_after_it_in_order(
    admin: Api, ftp: ftp_server.FtpServer, live: str
) -> None:
    big = secrets.token_bytes(BIG // 4)
    (ftp.root / "big.bin").write_bytes(big)
    await mount_ftp(admin, ftp)
    before = spliced_bytes()
    async with connected(live) as client:
        # Sent together with the spliced one...
        client.send(target(admin, "/ftp/big.bin"))
        client.send(target(admin, "/ftp/file.bin"), Range="bytes=10-19")
        async with asyncio.timeout(STUCK):
            head = await client.reader.readuntil(b"\r\n\r\n")
            first = await client.reader.readexactly(MiB)
        # ... and while its body goes out.
        client.send(target(admin, "/ftp/file.bin"))
        client.send("/api/public/settings")
        async with asyncio.timeout(STUCK):
            first += await client.reader.readexactly(len(big) - MiB)
        answers = [await client.answer() for _ in range(3)]
    assert head.startswith(b"HTTP/1.1 200 ") and first == big
    assert [(status, body) for status, _, body in answers[:2]] == [
        (206, PAYLOAD[10:20]),
        (200, PAYLOAD),
    ]
    assert answers[2][0] == 200 and json.loads(answers[2][2])["code"] == 200
    assert spliced_bytes() - before == len(big) + 10 + len(PAYLOAD)


async def test_a_bad_request_pipelined_behind_a_spliced_answer_is_the_last_thing_sent(
    admin: Api, ftp: ftp_server.FtpServer, live: str
) -> None:
    big = secrets.token_bytes(BIG // 4)
    (ftp.root / "big.bin").write_bytes(big)
    await mount_ftp(admin, ftp)
    async with connected(live) as client:
        status, _ = await client.ask(target(admin, "/ftp/big.bin"))
        assert status == 200
        received = await client.reader.readexactly(MiB)
        # The server answers this one itself (400) and closes the connection, in the
        # middle of the spliced body: no byte of that body may follow its answer.
        client.writer.write(b"NOT HTTP AT ALL\r\n\r\n")
        received += await client.rest()
    at = received.find(b"HTTP/1.1 400 ")
    assert MiB <= at < len(big)
    assert received[:at] == big[:at]
    head, _, body = received[at:].partition(b"\r\n\r\n")
    fields = dict(line.split(": ", 1) for line in head.decode("latin-1").split("\r\n")[1:])
    assert len(body) == int(fields["content-length"]), body[:200]


async def test_a_crypt_storage_over_ftp_is_never_spliced(
    admin: Api, ftp: ftp_server.FtpServer, live: str
) -> None:
    await mount_ftp(admin, ftp)
    await mount(admin, "/vault", "Crypt", {"remote_path": "/ftp/vault", "password": "pw"})
    plain = secrets.token_bytes(3 * MiB)
    response = await admin.client.put(
        "/api/fs/put",
        content=plain,
        headers={"File-Path": quote("/vault/secret.bin"), "Authorization": admin.token},
    )
    assert response.json()["code"] == 200, response.text
    before = spliced_bytes()
    async with connected(live) as client:
        status, _, body = await client.get(target(admin, "/vault/secret.bin"))
        assert (status, body == plain) == (200, True)
        status, _, part = await client.get(target(admin, "/vault/secret.bin"), Range="bytes=7-")
        assert (status, part == plain[7:]) == (206, True)
    assert spliced_bytes() == before  # the FTP file's bytes are ciphertext


async def test_tls_to_the_client_takes_the_ordinary_path(
    admin: Api, ftp: ftp_server.FtpServer, services: Services, tmp_path: Path
) -> None:
    await mount_ftp(admin, ftp)
    cert, key = self_signed(tmp_path)
    before = spliced_bytes()
    async with serving(services, ssl_certfile=str(cert), ssl_keyfile=str(key)) as url:
        tls = ssl.create_default_context(cafile=str(cert))
        async with connected(url.replace("http://", "https://"), tls) as client:
            for _ in range(2):
                status, _, body = await client.get(target(admin, "/ftp/file.bin"))
                assert (status, body == PAYLOAD) == (200, True)
    assert spliced_bytes() == before


async def test_an_rclone_download_is_spliced_with_ranges_and_keep_alive(
    admin: Api, live: str, tmp_path: Path
) -> None:
    remote = local(tmp_path / "remote")
    (tmp_path / "remote" / "file.bin").write_bytes(PAYLOAD)
    await mount(admin, "/rc", "Rclone", {"config": remote.config, "root_folder_path": remote.root})
    before = spliced_bytes()
    async with connected(live) as client:
        status, _, body = await client.get(target(admin, "/rc/file.bin"))
        assert (status, body == PAYLOAD) == (200, True)
        status, _, part = await client.get(target(admin, "/rc/file.bin"), Range="bytes=5-3000004")
        assert (status, part == PAYLOAD[5:3000005]) == (206, True)
        await client.settled()
    # What came with rclone's answer head goes the ordinary way; the rest is spliced.
    assert spliced_bytes() - before > len(PAYLOAD)


async def test_rclone_dying_mid_way_cuts_the_answer_short_and_it_serves_again(
    admin: Api, live: str, services: Services, tmp_path: Path
) -> None:
    remote = local(tmp_path / "remote")
    (tmp_path / "remote" / "big.bin").write_bytes(secrets.token_bytes(BIG))
    (tmp_path / "remote" / "file.bin").write_bytes(PAYLOAD)
    await mount(admin, "/rc", "Rclone", {"config": remote.config, "root_folder_path": remote.root})
    rclone = rclone_of(services.storages.resources)
    gone = await Client.open(live)
    status, _ = await gone.ask(target(admin, "/rc/big.bin"))
    assert status == 200
    await gone.reader.readexactly(MiB)
    gone.reset()  # a client gone mid-way first: rclone's read ends with it
    async with connected(live) as client:
        received = await begun(client, target(admin, "/rc/big.bin"))
        assert rclone.pid is not None
        os.kill(rclone.pid, signal.SIGKILL)
        received += len(await client.rest())
    assert MiB <= received < BIG
    await serves(live, target(admin, "/rc/file.bin"))  # rclone is started again


async def test_a_stalled_rclone_fails_the_spliced_download_within_the_idle_limit(
    admin: Api, live: str, services: Services, tmp_path: Path
) -> None:
    remote = local(tmp_path / "remote")
    (tmp_path / "remote" / "big.bin").write_bytes(secrets.token_bytes(BIG))
    (tmp_path / "remote" / "file.bin").write_bytes(PAYLOAD)
    quick(services, "Rclone")
    await mount(admin, "/rc", "Rclone", {"config": remote.config, "root_folder_path": remote.root})
    rclone = rclone_of(services.storages.resources)
    before = spliced_bytes()
    async with connected(live) as client:
        received = await begun(client, target(admin, "/rc/big.bin"))
        pid = rclone.pid
        assert pid is not None
        os.kill(pid, signal.SIGSTOP)  # alive, its connections open, sending nothing
        try:
            started = time.monotonic()
            received += len(await client.rest())
            took = time.monotonic() - started
        finally:
            os.kill(pid, signal.SIGCONT)
    assert took < FAIL_BOUND, f"the stalled download took {took:.1f}s to fail"
    assert MiB <= received < BIG
    assert spliced_bytes() > before
    await serves(live, target(admin, "/rc/file.bin"))
