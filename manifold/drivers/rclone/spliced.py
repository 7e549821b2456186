"""A ranged GET to rclone's ``--rc-serve`` whose body is spliced into the client's socket.

The request goes on a connection of its own to rclone's loopback port (the one the
process found rclone listening on, ``Rclone.api_port``), outside the HTTP client, so
that nothing reads its body but the kernel: once the answer's head is read here, the
body (framed by Content-Length) is moved into the client's socket by
``manifold.splice``. Any answer this cannot frame so (an error status, a chunked or
unsized body) is given up before a byte is sent, and the caller reads the range
the ordinary way, where errors are reported as they always are.
"""

from __future__ import annotations

import asyncio
import base64
import socket
from collections.abc import AsyncIterator
from dataclasses import dataclass

from manifold.errors import TemporaryFailure
from manifold.splice import Sink, SourceFailed

# The longest answer head read before the body (rclone's are a few hundred bytes).
HEAD_MAX = 16 << 10


@dataclass(frozen=True, slots=True)
class Answer:
    sock: socket.socket
    early: bytes  # body bytes that came with the head
    length: int


async def open_body(port: int, target: str, login: tuple[str, str], ranged: str) -> Answer | None:
    """``target``'s answer from the server on 127.0.0.1:``port``, its head read; None
    when its body is not a plain run of Content-Length bytes (206 only)."""
    loop = asyncio.get_running_loop()
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setblocking(False)
    try:
        await loop.sock_connect(sock, ("127.0.0.1", port))
        await loop.sock_sendall(sock, _request(target, login, ranged))
        answer = await _head(loop, sock)
    except BaseException:
        sock.close()
        raise
    if answer is None:
        sock.close()
    return answer


def _request(target: str, login: tuple[str, str], ranged: str) -> bytes:
    auth = base64.b64encode(f"{login[0]}:{login[1]}".encode()).decode("ascii")
    lines = [f"GET {target} HTTP/1.1", "Host: rclone", f"Authorization: Basic {auth}"]
    lines += [f"Range: {ranged}", "Connection: close", "", ""]
    return "\r\n".join(lines).encode("latin-1")


async def _head(loop: asyncio.AbstractEventLoop, sock: socket.socket) -> Answer | None:
    received = b""
    while b"\r\n\r\n" not in received:
        more = await loop.sock_recv(sock, 4096)
        if not more or len(received) > HEAD_MAX:
            return None
        received += more
    head, _, early = received.partition(b"\r\n\r\n")
    length = _length(head)
    if length is None or len(early) > length:
        return None
    return Answer(sock, early, length)


def _length(head: bytes) -> int | None:
    """The body's length from an answer head: Content-Length, nothing else
    framing it (206 only: a 200 would be the whole file, not the range)."""
    status, *fields = head.decode("latin-1").split("\r\n")
    if status.split(" ")[1:2] != ["206"]:
        return None
    headers = {}
    for field in fields:
        name, _, value = field.partition(":")
        headers[name.strip().lower()] = value.strip()
    if "transfer-encoding" in headers or "content-encoding" in headers:
        return None
    value = headers.get("content-length", "")
    return int(value) if value.isascii() and value.isdigit() else None


async def relay(answer: Answer, sink: Sink) -> AsyncIterator[bytes]:
    """The answer's body: what came with the head, then the rest spliced into ``sink``
    a piece at a time (an empty piece each, or its bytes when the client's socket could
    not take it spliced). A body cut short fails as ``TemporaryFailure``; a stalled one
    is the storage's idle limit's, as on the ordinary path."""
    try:
        yield answer.early
        remaining = answer.length - len(answer.early)
        while remaining > 0:
            try:
                step = await sink.relay(answer.sock.fileno(), remaining)
            except SourceFailed as exc:
                raise TemporaryFailure(f"rclone stopped sending the file: {exc}") from exc
            if step.ended:
                raise TemporaryFailure("rclone stopped sending the file")
            remaining -= step.count
            yield step.data
    finally:
        answer.sock.close()
