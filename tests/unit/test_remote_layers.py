"""What remote back ends need of the layers and the storage operations: transfers that
hold their slot and fail when idle, links kept until they expire, a per-storage bound
on cached listings, and one winner among racing puts on a back end that cannot decide."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import UTC, datetime

import pytest
from pydantic import BaseModel

from manifold.drivers import progress
from manifold.drivers.base import EXCLUSIVE_CREATE, Upload, made_progress
from manifold.errors import ObjectExists, TemporaryFailure
from manifold.models import Link, LinkArgs, Obj, Storage
from manifold.vfs.layers import ConcurrencyLimitLayer, IdleLayer, TimeoutLayer
from manifold.vfs.storage_ops import MemoryListCache, StorageOps
from tests.drivers.inert import InertDriver

WHEN = datetime(2024, 1, 1, tzinfo=UTC)
ROOT = Obj("", 0, True, WHEN, path="/")


class Options(BaseModel):
    pass


async def chunks(*parts: bytes) -> AsyncIterator[bytes]:
    for part in parts:
        yield part


class Remote(InertDriver[Options]):
    """Files in memory; reads can be made to stall after their first block, puts to
    stall after their first chunk, and puts that must not replace race as a naive back
    end would (look, wait, write)."""

    PROMISES = frozenset()

    def __init__(self) -> None:
        super().__init__(Storage(1, "/remote", "Remote"), Options())
        self.files: dict[str, bytes] = {}
        self.stall_reads = False
        self.stall_puts = False
        self.links = 0
        self.put_cancelled = False

    async def list(self, dir: Obj) -> list[Obj]:
        return [Obj(n, len(b), False, WHEN, path=f"/{n}") for n, b in self.files.items()]

    async def link(self, file: Obj, args: LinkArgs) -> Link:
        self.links += 1
        data = self.files[file.name]

        async def reader(offset: int, length: int | None) -> AsyncIterator[bytes]:
            end = len(data) if length is None else offset + length
            yield data[offset : offset + 1]
            if self.stall_reads:
                await asyncio.Event().wait()
            yield data[offset + 1 : end]

        if file.name.endswith(".url"):
            return Link(url=f"https://example.test/{file.name}", expires_in=3600)
        return Link(reader=reader)

    async def put(self, dst_dir: Obj, upload: Upload) -> Obj:
        try:
            taken = upload.name in self.files
            body = b""
            async for data in upload.stream:
                body += data
                if self.stall_puts:
                    await asyncio.Event().wait()
            await asyncio.sleep(0)  # another racer runs between the look and the write
            if taken and not upload.overwrite:
                raise ObjectExists()
            self.files[upload.name] = body
            return Obj(upload.name, len(body), False, WHEN, path=f"/{upload.name}")
        except asyncio.CancelledError:
            self.put_cancelled = True
            raise


async def read(link: Link, offset: int = 0) -> bytes:
    assert link.reader is not None
    return b"".join([data async for data in link.reader(offset, None)])


async def test_a_reader_holds_its_slot_until_it_is_closed() -> None:
    driver = Remote()
    driver.files["a.bin"] = b"abc"
    limited = ConcurrencyLimitLayer(driver, limit=1)
    first = await limited.link(Obj("a.bin", 3, False, WHEN, path="/a.bin"), LinkArgs())
    assert first.reader is not None
    stream = first.reader(0, None)
    assert await anext(stream) == b"a"  # open: the one read slot is taken
    second = asyncio.ensure_future(read(first))
    done, _ = await asyncio.wait({second}, timeout=0.05)
    assert not done
    await stream.aclose()  # type: ignore[attr-defined]
    assert await second == b"abc"


async def test_a_copy_within_one_storage_never_waits_on_itself() -> None:
    driver = Remote()
    driver.files["a.bin"] = b"abc"
    limited = ConcurrencyLimitLayer(driver, limit=1)
    link = await limited.link(Obj("a.bin", 3, False, WHEN, path="/a.bin"), LinkArgs())
    assert link.reader is not None
    stored = await limited.put(ROOT, Upload("b.bin", link.reader(0, None), 3, None))
    assert (stored.size, driver.files["b.bin"]) == (3, b"abc")


async def test_a_stalled_read_fails_as_temporary() -> None:
    driver = Remote()
    driver.files["a.bin"] = b"abc"
    driver.stall_reads = True
    link = await IdleLayer(driver, 0.05).link(Obj("a.bin", 3, False, WHEN), LinkArgs())
    with pytest.raises(TemporaryFailure, match="read stalled"):
        await read(link)


async def test_a_stalled_upload_fails_as_temporary_and_is_stopped() -> None:
    driver = Remote()
    driver.stall_puts = True
    with pytest.raises(TemporaryFailure, match="upload stalled"):
        await IdleLayer(driver, 0.05).put(ROOT, Upload("b.bin", chunks(b"x", b"y"), 2, None))
    assert driver.put_cancelled
    assert "b.bin" not in driver.files


class PartSender(Remote):
    """Reads an upload a "part" at a time, then sends each part in small pieces, slowly
    but steadily, telling ``Upload.progress`` of each (as S3's multipart upload does):
    between two parts it asks nothing of the stream for much longer than the idle time."""

    def __init__(self, pieces: int, pause: float) -> None:
        super().__init__()
        self.pieces = pieces
        self.pause = pause
        self.sent = b""

    async def put(self, dst_dir: Obj, upload: Upload) -> Obj:
        async for part in upload.stream:
            step = -(-len(part) // self.pieces)
            for start in range(0, len(part), step):
                await asyncio.sleep(self.pause)
                piece = part[start : start + step]
                self.sent += piece
                if upload.progress is not None:
                    upload.progress(len(piece))
        return Obj(upload.name, len(self.sent), False, WHEN, path=f"/{upload.name}")


async def test_an_upload_sending_slowly_but_steadily_is_not_stalled() -> None:
    # Each part takes 8 pauses of a fifth of the idle time to go out: far longer than
    # the idle time with no chunk asked of the stream, never that long without a byte.
    driver = PartSender(pieces=8, pause=0.02)
    stored = await IdleLayer(driver, 0.1).put(
        ROOT, Upload("slow.bin", chunks(b"a" * 800, b"b" * 800), 1600, None)
    )
    assert (stored.size, driver.sent) == (1600, b"a" * 800 + b"b" * 800)


async def test_an_upload_whose_sender_sends_nothing_is_stalled_however_busy_the_driver() -> None:
    async def silent() -> AsyncIterator[bytes]:
        yield b"x"
        await asyncio.Event().wait()
        yield b"never"

    driver = PartSender(pieces=1, pause=0.0)
    with pytest.raises(TemporaryFailure, match="upload stalled"):
        await IdleLayer(driver, 0.05).put(ROOT, Upload("b.bin", silent(), 6, None))


async def test_a_reader_yielding_slowly_but_steadily_is_not_stalled() -> None:
    class Trickle(Remote):
        async def link(self, file: Obj, args: LinkArgs) -> Link:
            async def reader(offset: int, length: int | None) -> AsyncIterator[bytes]:
                for _ in range(10):
                    await asyncio.sleep(0.01)
                    yield b"t"

            return Link(reader=reader)

    link = await IdleLayer(Trickle(), 0.05).link(Obj("t.bin", 10, False, WHEN), LinkArgs())
    assert await read(link) == b"t" * 10


class TreeRemover(Remote):
    """Removes a folder an entry at a time, ``pause`` seconds an entry, saying each
    step it made (``made_progress``) unless ``silent``: a back end without a call to
    remove a whole tree."""

    def __init__(self, entries: int, pause: float, silent: bool = False) -> None:
        super().__init__()
        self.files = {f"big/{n}": b"x" for n in range(entries)}
        self.pause = pause
        self.silent = silent

    async def remove(self, obj: Obj) -> None:
        for name in list(self.files):
            await asyncio.sleep(self.pause)
            del self.files[name]
            if not self.silent:
                made_progress()


async def test_a_folder_removal_longer_than_the_call_timeout_completes_step_by_step() -> None:
    # Ten steps of a fifth of the time limit each: twice the limit in all, never
    # near it between two steps.
    driver = TreeRemover(entries=10, pause=0.1)
    await TimeoutLayer(driver, 0.5).remove(Obj("big", 0, True, WHEN, path="/big"))
    assert driver.files == {}


async def test_a_removal_without_a_step_for_the_call_timeout_fails_as_temporary() -> None:
    driver = TreeRemover(entries=10, pause=0.1, silent=True)
    with pytest.raises(TemporaryFailure, match="remove timed out"):
        await TimeoutLayer(driver, 0.3).remove(Obj("big", 0, True, WHEN, path="/big"))
    assert driver.files  # stopped half-way


async def test_racing_puts_on_a_back_end_without_the_promise_have_one_winner() -> None:
    driver = Remote()
    assert EXCLUSIVE_CREATE not in driver.promises()
    ops = StorageOps(driver.storage, driver, MemoryListCache())
    results = await asyncio.gather(
        *(
            ops.put("/", Upload("race.bin", chunks(bytes([i])), 1, None, overwrite=False))
            for i in range(8)
        ),
        return_exceptions=True,
    )
    assert sum(isinstance(r, Obj) for r in results) == 1
    assert sum(isinstance(r, ObjectExists) for r in results) == 7


async def test_links_with_an_expiry_are_kept_until_a_write_drops_them() -> None:
    driver = Remote()
    driver.files["a.url"] = b"abc"
    ops = StorageOps(driver.storage, driver, MemoryListCache())
    first = (await ops.link("/a.url", LinkArgs()))[1]
    assert (await ops.link("/a.url", LinkArgs()))[1] is first
    assert driver.links == 1
    await ops.put("/", Upload("a.url", chunks(b"new"), 3, None))
    await ops.link("/a.url", LinkArgs())
    assert driver.links == 2


async def test_reader_links_are_never_kept() -> None:
    driver = Remote()
    driver.files["a.bin"] = b"abc"
    ops = StorageOps(driver.storage, driver, MemoryListCache())
    await ops.link("/a.bin", LinkArgs())
    await ops.link("/a.bin", LinkArgs())
    assert driver.links == 2


def test_one_storage_cannot_take_the_whole_listing_cache() -> None:
    cache = MemoryListCache(max_objects=100, per_scope=10)
    objs = [Obj(f"{i}", 0, False, WHEN) for i in range(4)]
    cache.put("other", "/kept", objs, 60)
    for index in range(20):
        cache.put("crawled", f"/{index}", objs, 60)
    assert cache.scope_objects("crawled") <= 10
    assert cache.get("crawled", "/19") is objs  # the newest stay
    assert cache.get("crawled", "/0") is None
    assert cache.get("other", "/kept") is objs


async def test_a_long_request_past_its_ceiling_fails_as_temporary_and_stops() -> None:
    stopped = asyncio.Event()

    async def request() -> None:
        try:
            await asyncio.sleep(60)
        finally:
            stopped.set()

    with pytest.raises(TemporaryFailure, match="the removal did not finish"):
        await progress.waited(request(), "the removal", ceiling=0.3)
    assert stopped.is_set()


async def test_a_long_request_answers_what_it_answered() -> None:
    async def request() -> str:
        await asyncio.sleep(0.05)
        return "done"

    assert await progress.waited(request(), "the removal") == "done"
