"""Layers around a driver: time limits, retries, a cap on calls at once, and none at all
for a driver that asks for none."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

import pytest
from pydantic import BaseModel

from manifold.drivers.base import DriverConfig, NativeParts, Upload
from manifold.errors import ObjectNotFound, TemporaryFailure
from manifold.models import Link, LinkArgs, Obj, Storage
from manifold.vfs import layers
from manifold.vfs.layers import (
    ConcurrencyLimitLayer,
    LoggingLayer,
    RetryLayer,
    TimeoutLayer,
    wrap,
)
from tests.drivers.inert import InertDriver

WHEN = datetime(2024, 1, 1, tzinfo=UTC)
FOLDER = Obj("f", 0, True, WHEN, path="/f")


class Options(BaseModel):
    secret: str = "hunter2"


class Flaky(InertDriver[Options]):
    """Fails ``failures`` times as temporary, then answers; can be made slow."""

    def __init__(self, failures: int = 0, delay: float = 0.0) -> None:
        super().__init__(Storage(1, "/flaky", "Flaky"), Options())
        self.failures = failures
        self.delay = delay
        self.calls = 0
        self.running = 0
        self.most_at_once = 0

    async def _work(self) -> list[Obj]:
        self.calls += 1
        self.running += 1
        self.most_at_once = max(self.most_at_once, self.running)
        try:
            await asyncio.sleep(self.delay)
            if self.calls <= self.failures:
                raise TemporaryFailure("back end busy")
            return [FOLDER]
        finally:
            self.running -= 1

    async def list(self, dir: Obj) -> list[Obj]:
        return await self._work()

    async def link(self, file: Obj, args: LinkArgs) -> Link:
        return Link(url="https://example.test/x")

    async def remove(self, obj: Obj) -> None:
        await self._work()


@pytest.fixture(autouse=True)
def no_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(layers.random, "uniform", lambda low, high: 0.0)


async def test_a_temporary_failure_of_an_idempotent_call_is_retried() -> None:
    driver = Flaky(failures=2)
    assert await RetryLayer(driver, attempts=3).list(FOLDER) == [FOLDER]
    assert driver.calls == 3


async def test_retries_end_with_the_last_failure() -> None:
    driver = Flaky(failures=5)
    with pytest.raises(TemporaryFailure):
        await RetryLayer(driver, attempts=3).list(FOLDER)
    assert driver.calls == 3


async def test_a_change_is_never_repeated() -> None:
    driver = Flaky(failures=1)
    with pytest.raises(TemporaryFailure):
        await RetryLayer(driver, attempts=3).remove(FOLDER)
    assert driver.calls == 1


async def test_other_errors_are_not_retried() -> None:
    class Missing(Flaky):
        async def list(self, dir: Obj) -> list[Obj]:
            self.calls += 1
            raise ObjectNotFound()

    driver = Missing()
    with pytest.raises(ObjectNotFound):
        await RetryLayer(driver, attempts=3).list(FOLDER)
    assert driver.calls == 1


async def test_a_slow_call_fails_as_temporary() -> None:
    with pytest.raises(TemporaryFailure, match=r"list timed out after 0\.01s"):
        await TimeoutLayer(Flaky(delay=5), seconds=0.01).list(FOLDER)


async def test_the_limit_caps_calls_under_way() -> None:
    driver = Flaky(delay=0.01)
    limited = ConcurrencyLimitLayer(driver, limit=2)
    await asyncio.gather(*(limited.list(FOLDER) for _ in range(8)))
    assert (driver.calls, driver.most_at_once) == (8, 2)


def test_a_driver_asking_for_nothing_is_used_bare() -> None:
    driver = Flaky()
    assert wrap(driver, DriverConfig(name="Flaky")) is driver


async def test_the_stack_keeps_the_drivers_face() -> None:
    driver = Flaky(failures=1)
    config = DriverConfig(name="Flaky", call_timeout=5, retries=3, max_concurrency=4)
    wrapped = wrap(driver, config)
    assert isinstance(wrapped, RetryLayer)
    assert wrapped.capabilities() == Flaky.capabilities() == {"remove"}
    assert wrapped.storage is driver.storage and wrapped.options is driver.options
    assert await wrapped.list(FOLDER) == [FOLDER]
    assert isinstance(wrapped.inner, ConcurrencyLimitLayer)


async def test_logging_names_the_call_never_the_options(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="manifold.drivers")
    logged: Any = LoggingLayer(Flaky())
    await logged.list(FOLDER)
    await logged.link(FOLDER, LinkArgs(headers={"Authorization": "Bearer abc"}))
    text = caplog.text
    assert "/flaky list: ok" in text and "/flaky link: ok" in text
    assert "hunter2" not in text and "Bearer" not in text and "example.test" not in text


class Keeper(Flaky):
    """Keeps the upload each ``put`` receives."""

    def __init__(self) -> None:
        super().__init__()
        self.received: list[Upload] = []

    async def put(self, dst_dir: Obj, upload: Upload) -> Obj:
        self.received.append(upload)
        return Obj(upload.name, upload.size or 0, False, WHEN, path=f"/f/{upload.name}")


async def test_an_upload_reaches_the_driver_through_every_layer_as_one_value(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """What an upload carries grows in ``Upload`` alone: no layer unpacks it."""
    caplog.set_level(logging.DEBUG, logger="manifold.drivers")  # the logging layer too
    driver = Keeper()
    config = DriverConfig("Keeper", call_timeout=5, retries=3, max_concurrency=2)
    upload = Upload("a.bin", _body(), 3, WHEN, overwrite=False)
    obj = await wrap(driver, config).put(FOLDER, upload)
    assert obj.name == "a.bin"
    assert len(driver.received) == 1 and driver.received[0] is upload


async def _body() -> AsyncIterator[bytes]:
    yield b"abc"


class Native(Keeper):
    """Takes multipart chunks itself, each part and each finishing ``delay`` long."""

    MULTIPART_MIN_PART = 7

    def __init__(self, delay: float) -> None:
        super().__init__()
        self.delay = delay
        self.parts: list[int] = []

    async def multipart_begin(self, dst_dir: Obj, name: str, hidden: bool) -> str:
        await asyncio.sleep(self.delay)
        return f"token-{name}"

    async def multipart_part(
        self, token: str, index: int, length: int, stream: AsyncIterator[bytes]
    ) -> None:
        self.running += 1
        self.most_at_once = max(self.most_at_once, self.running)
        await asyncio.sleep(self.delay)
        self.running -= 1
        self.parts.append(index)

    async def put(self, dst_dir: Obj, upload: Upload) -> Obj:
        await asyncio.sleep(self.delay)  # the store joining the parts: no byte moves here
        return await super().put(dst_dir, upload)


async def _nothing() -> AsyncIterator[bytes]:
    return
    yield b""


async def test_native_multipart_calls_go_through_the_layers() -> None:
    """Parts hold an upload slot and are not time-limited (their length is the data's);
    beginning is limited like any call; finishing moves no byte, so it is not idle."""
    driver = Native(delay=0.3)
    config = DriverConfig("Native", call_timeout=0.1, idle_timeout=0.1, max_concurrency=1)
    wrapped = wrap(driver, config)
    assert "multipart_begin" in wrapped.capabilities()
    assert wrapped.multipart_limits() == (7, 10_000)
    with pytest.raises(TemporaryFailure, match="multipart_begin timed out"):
        await wrapped.multipart_begin(FOLDER, "a.bin", False)
    await asyncio.gather(*(wrapped.multipart_part("t", i, 1, _body()) for i in range(3)))
    assert (sorted(driver.parts), driver.most_at_once) == ([0, 1, 2], 1)
    native = NativeParts("t", 3)
    obj = await wrapped.put(FOLDER, Upload("a.bin", _nothing(), 3, None, native=native))
    assert obj.name == "a.bin" and driver.received[0].native is native
