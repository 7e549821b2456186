"""The change bus on Redis: one pub/sub channel every process subscribes to.

Pub/sub keeps nothing for a subscriber that is away, so the subscription runs on a
connection that never reconnects by itself: when it drops, the bus subscribes again
and then resyncs (its handlers reload from the database), whatever it missed.

A Redis that hangs drops nothing: its connections stay open and answer nothing. So
the subscription pings when the channel is quiet, and counts as dropped when Redis
has said nothing for ``SILENT_SECONDS``. A message is sent within ``SEND_SECONDS``
or kept and sent again later (``Outbox``), and the change it tells of answers
success all the same: it is committed, and every other process either hears of it
or, its own subscription down too, is not ``live`` and reads from the database.

The bus is ``live`` from the moment a subscription is confirmed (Redis answered a
ping sent after it) and whatever may have been missed before was reloaded, until the
subscription drops or a message cannot be sent.
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
from typing import Any

import orjson
import redis.asyncio as aioredis
from redis.asyncio.client import PubSub
from redis.exceptions import RedisError
from redis.exceptions import TimeoutError as RedisTimeoutError

from manifold.logs import error_text
from manifold.state.bus import Handler, Handlers, Outbox, log

CHANNEL = "manifold:changes"
# A process's own marker, which ``sync`` waits to hear back.
_MARK = "\0sync"
START_SECONDS = 10.0
# A message not sent within this is kept to be sent again, and the bus is not live.
SEND_SECONDS = 2.0
# A quiet channel is pinged this often; one that says nothing this long is dropped.
PING_EVERY = 1.0
SILENT_SECONDS = 3.0
# How long the subscription waits for a message before it looks at the time.
_TICK = 0.25
_RETRY_FIRST = 0.2
_RETRY_LONGEST = 5.0


class RedisBus:
    def __init__(self, client: aioredis.Redis, listener: aioredis.Redis, origin: str) -> None:
        """``client`` publishes; ``listener`` (which must not retry by itself) subscribes."""
        self._client = client
        self._listener = listener
        self._origin = origin
        self.handlers = Handlers()
        self._outbox = Outbox(self._send_soon, retry=_RETRY_FIRST)
        self._marks: dict[str, asyncio.Future[None]] = {}
        self._subscribed = asyncio.Event()
        self._listening = False  # subscribed, and nothing missed is left unloaded
        self._missed = False  # a resync is owed once subscribed again
        self._task: asyncio.Task[None] | None = None

    @property
    def live(self) -> bool:
        return self._listening and not self._outbox.failing

    async def start(self) -> None:
        self._task = asyncio.create_task(self._run())
        try:
            await asyncio.wait_for(self._subscribed.wait(), START_SECONDS)
        except TimeoutError:
            # Serving goes on; the subscription keeps being tried, and resyncs when made
            # (the caches load meanwhile, and may miss what is published before).
            self._missed = True
            log.warning("no answer from Redis within %gs; changes wait for it", START_SECONDS)

    async def stop(self) -> None:
        await self._outbox.flush()
        await self._outbox.close()
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def publish(self, topic: str, data: dict[str, Any]) -> None:
        self._outbox.post(topic, data)
        await self._outbox.flush()

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

    async def _send_soon(self, batch: list[tuple[str, dict[str, Any]]]) -> None:
        async with asyncio.timeout(SEND_SECONDS):
            await self._send(batch)

    async def _send(self, batch: list[tuple[str, dict[str, Any]]]) -> None:
        async with self._client.pipeline(transaction=False) as pipe:
            for topic, data in batch:
                pipe.publish(CHANNEL, orjson.dumps({"o": self._origin, "t": topic, "d": data}))
            await pipe.execute()

    async def _run(self) -> None:
        wait = _RETRY_FIRST
        while True:
            pubsub = self._listener.pubsub(ignore_subscribe_messages=True)
            try:
                await self._subscribe(pubsub)
                wait = _RETRY_FIRST
                await self._listen(pubsub)
            except (RedisError, OSError, TimeoutError) as exc:
                self._dropped(exc)
            finally:
                with contextlib.suppress(Exception):
                    async with asyncio.timeout(SILENT_SECONDS):
                        await pubsub.aclose()  # type: ignore[no-untyped-call]
            await asyncio.sleep(wait)
            wait = min(wait * 2, _RETRY_LONGEST)

    async def _subscribe(self, pubsub: PubSub) -> None:
        """Subscribe, and wait for Redis to answer a ping sent after: the subscription
        is then in place. Messages heard before the answer are passed over: whatever
        they changed is read from the database afterwards, by the caches that load
        after ``start`` or by the resync owed."""
        async with asyncio.timeout(SILENT_SECONDS):
            await pubsub.subscribe(CHANNEL)
            await pubsub.ping()
            while True:
                message = await pubsub.get_message(timeout=_TICK)
                if message is not None and message.get("type") == "pong":
                    break
        self._subscribed.set()
        if self._missed:
            await self.handlers.resync()
            self._missed = False
        self._listening = True

    async def _listen(self, pubsub: PubSub) -> None:
        """Apply messages; ping when quiet; give up when Redis stays silent."""
        clock = asyncio.get_running_loop().time
        heard = pinged = clock()
        while True:
            message = await pubsub.get_message(timeout=_TICK)
            if message is not None:
                if message.get("type") == "message":
                    await self._apply(message["data"])
                heard = clock()
                continue
            now = clock()
            if now - heard > SILENT_SECONDS:
                raise RedisTimeoutError(f"Redis said nothing for {SILENT_SECONDS:g}s")
            if now - max(heard, pinged) >= PING_EVERY:
                await pubsub.ping()
                pinged = now

    def _dropped(self, exc: BaseException) -> None:
        if self._listening or not self._missed:
            log.warning("the change channel dropped: %s", error_text(exc))
        self._listening = False
        # Before the first subscription the caches are not loaded yet: nothing to redo.
        self._missed = self._missed or self._subscribed.is_set()

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
