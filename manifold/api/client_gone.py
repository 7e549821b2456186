"""Work on a request's behalf that stops when its client hangs up.

A server that goes on walking a big tree for a client that has gone works for nobody,
and holds its CPU from everyone else. ``until_gone`` runs such work beside a watch on
the connection and cancels the work when the client disconnects. The request's body
has been read by then, so the next message the server hands on is the disconnect.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Coroutine
from typing import Any, TypeVar

from starlette.requests import Request
from starlette.types import Receive

from manifold.errors import ServerError

T = TypeVar("T")


class ClientGone(ServerError):
    default_message = "the client closed the request"


async def until_gone(request: Request, work: Coroutine[Any, Any, T]) -> T:
    """The result of ``work``, or ``ClientGone`` once ``work`` is cancelled because the
    client disconnected first."""
    task = asyncio.ensure_future(work)
    gone = asyncio.ensure_future(_disconnect(request.receive))
    try:
        await asyncio.wait((task, gone), return_when=asyncio.FIRST_COMPLETED)
    finally:
        for pending in (gone, task):
            pending.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await pending  # the work's own clean-up runs before this answers
    if task.cancelled():
        raise ClientGone()
    return task.result()


async def _disconnect(receive: Receive) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass
