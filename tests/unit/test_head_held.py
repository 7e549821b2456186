"""A response's head goes out with its body in one write (``manifold.http_writes.HeadHeld``)."""

from __future__ import annotations

import asyncio

from manifold.http_writes import HeadHeld


class Recorder(asyncio.Transport):
    """A transport that keeps each write as one entry, as the socket would send it."""

    def __init__(self) -> None:
        super().__init__()
        self.writes: list[bytes] = []
        self.closed = False

    def write(self, data: bytes | bytearray | memoryview) -> None:
        self.writes.append(bytes(data))

    def writelines(self, list_of_data: object) -> None:
        self.writes.append(b"".join(list_of_data))  # type: ignore[arg-type]

    def is_closing(self) -> bool:
        return self.closed

    def close(self) -> None:
        self.closed = True


async def test_head_and_body_of_one_turn_are_one_write() -> None:
    sent = Recorder()
    held = HeadHeld(sent, asyncio.get_running_loop())
    held.write(b"HTTP/1.1 200 OK\r\n\r\n")
    held.write(b'{"code":200}')
    held.write(b"more")
    assert sent.writes == [b'HTTP/1.1 200 OK\r\n\r\n{"code":200}', b"more"]


async def test_a_late_body_does_not_hold_the_head_past_the_turn() -> None:
    sent = Recorder()
    held = HeadHeld(sent, asyncio.get_running_loop())
    held.write(b"HTTP/1.1 200 OK\r\n\r\n")
    await asyncio.sleep(0)
    assert sent.writes == [b"HTTP/1.1 200 OK\r\n\r\n"]
    held.write(b"chunk")
    assert sent.writes == [b"HTTP/1.1 200 OK\r\n\r\n", b"chunk"]


async def test_closing_writes_what_is_held_first() -> None:
    sent = Recorder()
    held = HeadHeld(sent, asyncio.get_running_loop())
    held.write(b"HTTP/1.1 204 No Content\r\n\r\n")
    held.close()
    assert sent.writes == [b"HTTP/1.1 204 No Content\r\n\r\n"]
    assert sent.closed
