"""How the HTTP server writes answers: a response's head held back to go out with its
body (``HeadHeld``), and the quick answers written out whole once (``Answers``).
"""

from __future__ import annotations

import asyncio
from typing import Any

from uvicorn.protocols.http.httptools_impl import STATUS_LINE

from manifold.api.asgi import Headers, fast_headers


def _response(defaults: Headers, body: bytes) -> bytes:
    """A whole 200 JSON answer, head as uvicorn would write it (its own headers first)."""
    head = [STATUS_LINE[200]]
    for name, value in [*defaults, *fast_headers(body)]:
        head += (name, b": ", value, b"\r\n")
    return b"".join((*head, b"\r\n", body))


# Whole answers kept at once; past this the kept answers start again from none.
ANSWERS_KEPT = 1024


class Answers:
    """Quick answers already written out whole, by body, for one list of uvicorn's own
    headers: the same few bodies are answered again and again, and writing the head
    cost as much as the rest of the answer. uvicorn makes a new list each second (it
    holds the date), and the answers kept for the one before are dropped with it.
    """

    def __init__(self) -> None:
        self._defaults: Headers | None = None
        self._made: dict[bytes, bytes] = {}

    def of(self, defaults: Headers, body: bytes) -> bytes:
        """The whole answer with ``body`` under ``defaults``."""
        if defaults is not self._defaults or len(self._made) >= ANSWERS_KEPT:
            self._defaults, self._made = defaults, {}
        answer = self._made.get(body)
        if answer is None:
            answer = self._made[body] = _response(defaults, body)
        return answer


ANSWERS = Answers()


# A response head longer than this is written at once rather than held for the body.
HELD_HEAD_MAX = 4096


class HeadHeld(asyncio.Transport):
    """The transport as one response sees it: its head is held back and written with the
    first piece of its body, in one system call and one TCP segment rather than two
    (uvicorn writes each ASGI message on its own, and the socket sends at once).

    Nearly every answer sends its head and body in the same turn of the loop; if the
    body is late (a stream), the head goes out at the end of the turn all the same.
    A HEAD request has no body to wait for, so it never gets one of these.
    """

    __slots__ = ("_held", "_loop", "_transport")

    def __init__(self, transport: asyncio.Transport, loop: asyncio.AbstractEventLoop) -> None:
        super().__init__()
        self._transport = transport
        self._loop: asyncio.AbstractEventLoop | None = loop
        self._held: bytes | None = None

    def write(self, data: bytes | bytearray | memoryview) -> None:
        held = self._held
        if held is not None:
            self._held = None
            self._transport.writelines((held, data))
        elif len(data) <= HELD_HEAD_MAX and self._loop is not None:
            self._held = bytes(data)
            self._loop.call_soon(self.flush)
            self._loop = None  # only the first write, the head, is held
        else:
            self._transport.write(data)

    def flush(self) -> None:
        """Write what is held (the end of the turn, or before the transport closes)."""
        held, self._held = self._held, None
        if held is not None and not self._transport.is_closing():
            self._transport.write(held)

    def is_closing(self) -> bool:
        return self._transport.is_closing()

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return self._transport.get_extra_info(name, default)

    def close(self) -> None:
        self.flush()
        self._transport.close()
