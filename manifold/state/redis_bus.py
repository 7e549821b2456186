"""The change bus on Redis: one pub/sub channel every process subscribes to.

Pub/sub keeps nothing for a subscriber that is away, so the subscription runs on a
connection that never reconnects by itself: when it drops, the bus subscribes again
and then resyncs (its handlers reload from the database), whatever it missed.
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
from typing import Any

import orjson
import redis.asyncio as aioredis
from redis.exceptions import RedisError

from manifold.logs import error_text
from manifold.state.bus import Handler, Handlers, Outbox, log

CHANNEL = "manifold:changes"
# A process's own marker, which ``sync`` waits to hear back.
_MARK = "\0sync"
START_SECONDS = 10.0
_RETRY_FIRST = 0.2
_RETRY_LONGEST = 5.0


class RedisBus:
    def __init__(self, client: aioredis.Redis, listener: aioredis.Redis, origin: str) -> None:
        """``client`` publishes; ``listener`` (which must not retry by itself) subscribes."""
        self._client = client
        self._listener = listener
        self._origin = origin
        self.handlers = Handlers()
        self._outbox = Outbox(self._send)
        self._marks: dict[str, asyncio.Future[None]] = {}
        self._subscribed = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        self._task = asyncio.create_task(self._run())
        try:
            await asyncio.wait_for(self._subscribed.wait(), START_SECONDS)
        except TimeoutError:
            # Serving goes on; the subscription keeps being tried, and resyncs when made.
            log.warning("no answer from Redis within %gs; changes wait for it", START_SECONDS)

    async def stop(self) -> None:
        await self._outbox.flush()
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def publish(self, topic: str, data: dict[str, Any]) -> None:
        await self._outbox.flush()
        await self._send([(topic, data)])

    def post(self, topic: str, data: dict[str, Any]) -> None:
        self._outbox.post(topic, data)

    def subscribe(self, topic: str, handler: Handler) -> None:
        self.handlers.subscribe(topic, handler)

    async def flush(self) -> None:
        await self._outbox.flush()

    async def sync(self) -> None:
        """Our own marker comes back after every message published before it (Redis
        delivers a channel's messages in the order it took them)."""
        await self._outbox.flush()
        nonce = secrets.token_hex(8)
        heard = self._marks[nonce] = asyncio.get_running_loop().create_future()
        try:
            await self._send([(_MARK, {"n": nonce})])
            await heard
        finally:
            self._marks.pop(nonce, None)

    async def _send(self, batch: list[tuple[str, dict[str, Any]]]) -> None:
        async with self._client.pipeline(transaction=False) as pipe:
            for topic, data in batch:
                pipe.publish(CHANNEL, orjson.dumps({"o": self._origin, "t": topic, "d": data}))
            await pipe.execute()

    async def _run(self) -> None:
        wait, dropped = _RETRY_FIRST, False
        while True:
            pubsub = self._listener.pubsub(ignore_subscribe_messages=True)
            try:
                await pubsub.subscribe(CHANNEL)
                self._subscribed.set()
                if dropped:
                    await self.handlers.resync()
                wait, dropped = _RETRY_FIRST, False
                while True:
                    message = await pubsub.get_message(timeout=1.0)
                    if message is not None and message.get("type") == "message":
                        await self._apply(message["data"])
            except (RedisError, OSError) as exc:
                if not dropped:
                    log.warning("the change channel dropped: %s", error_text(exc))
                dropped = True
            finally:
                with contextlib.suppress(Exception):
                    await pubsub.aclose()  # type: ignore[no-untyped-call]
            await asyncio.sleep(wait)
            wait = min(wait * 2, _RETRY_LONGEST)

    async def _apply(self, raw: bytes) -> None:
        try:
            message = orjson.loads(raw)
            origin, topic, data = message["o"], message["t"], message["d"]
        except (orjson.JSONDecodeError, KeyError, TypeError):
            return
        if origin == self._origin:
            if topic == _MARK and isinstance(data, dict):
                heard = self._marks.get(str(data.get("n")))
                if heard is not None and not heard.done():
                    heard.set_result(None)
            return
        if isinstance(data, dict) and isinstance(topic, str):
            await self.handlers.deliver(topic, data)
