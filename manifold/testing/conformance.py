"""The conformance suite every driver runs, unchanged.

A driver's test module subclasses ``DriverConformance`` and provides one fixture,
``driver_factory``: an async callable returning a new, initialised driver. Each
test works in a fresh, randomly named folder under the driver's root. A test
needing an optional method the driver lacks is skipped, never failed. A read-only
driver (no ``make_dir``) runs the checks of what its root already holds: its
factory builds it over a tree with files and folders in it.

Bytes are read back through ``Driver.link`` and ``streams.open_range``, the one
range reader the server uses for every link (a local file, a URL, or a driver's
own reader), so the range table checks what ``/d``, ``/p`` and copies will read.
"""

from __future__ import annotations

import asyncio
import os
import secrets
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from typing import Any

import pytest

from manifold.concurrency import DISK_POOL, run_in
from manifold.drivers import progress
from manifold.drivers.base import (
    EXCLUSIVE_CREATE,
    FOLDER_MOVE,
    FOLDER_TIMES,
    Driver,
    LinkArgs,
    Upload,
)
from manifold.errors import (
    ManifoldError,
    NotAFile,
    NotAFolder,
    NotSupported,
    ObjectExists,
    ObjectNotFound,
)
from manifold.models import Link, Obj
from manifold.services.fs.streams import open_range
from manifold.vfs.layers import MeasureLayer, TimeoutLayer
from manifold.vfs.storage_ops import MemoryListCache, StorageOps

DriverFactory = Callable[[], Awaitable[Driver[Any]]]

AWKWARD_NAMES = [
    " leading space",
    "trailing space ",
    "#?%&+",
    "%46",
    "文件 ü",
    ".leading-dot",
]

LARGE_SIZE = 5 * 1024 * 1024 + 123
CHUNK = 64 * 1024

RANGE_PAYLOAD = bytes(range(256)) * 40
RANGES = [
    (0, 1),
    (0, len(RANGE_PAYLOAD)),
    (1, 10),
    (5000, 100),
    (len(RANGE_PAYLOAD) - 1, 1),
    (9000, None),
]


RACERS = 8

# Entries of the root the read-only checks look at, and bytes they read of each file.
SAMPLED = 20
SAMPLE_BYTES = 64 * 1024

# A back end whose every step (an entry removed, an object copied) takes ``SLOW_STEP``
# seconds, behind a call timeout shorter than two of them: a folder removed or renamed
# in steps outlasts the timeout, and completes only if it is timed step by step.
SLOW_STEP = 0.9
STEP_LIMIT = 1.5


@contextmanager
def slow_steps() -> Iterator[None]:
    """Every step a driver reports in the block takes ``SLOW_STEP`` seconds more (it
    holds the thread that reports it: the loop, or a driver's thread)."""
    with progress.watching(lambda: time.sleep(SLOW_STEP)):
        yield


def _outcomes(results: list[Any]) -> tuple[int, int]:
    """How many calls succeeded, and how many failed with ``ObjectExists``; nothing else."""
    won = sum(isinstance(r, Obj) for r in results)
    lost = sum(isinstance(r, ObjectExists) for r in results)
    assert won + lost == len(results), results
    return won, lost


@contextmanager
def _skipped_when_not_supported() -> Iterator[None]:
    """Skip the test when the back end turns out unable to replace in one step (the
    services then fall back to setting the old file aside)."""
    try:
        yield
    except NotSupported:
        pytest.skip("the back end cannot replace in one step")


class StreamAborted(Exception):
    """Raised by a test stream midway, as a dropped client connection would."""


@dataclass(slots=True)
class Place:
    """A folder under test: the driver's object and its path inside the storage."""

    obj: Obj
    path: str

    def child(self, name: str) -> str:
        return f"{self.path.rstrip('/')}/{name}"


def require(driver: Driver[Any], *capabilities: str) -> None:
    """Skip the calling test unless ``driver`` implements every named optional method.

    Asked of the instance, so a driver wrapped in its layers (as it is mounted) answers
    for the driver it wraps."""
    missing = set(capabilities) - driver.capabilities()
    if missing:
        pytest.skip(f"{type(driver).__name__} lacks {', '.join(sorted(missing))}")


def promised(driver: Driver[Any], promise: str) -> bool:
    """Whether ``driver`` makes ``promise`` (``EXCLUSIVE_CREATE``, ``FOLDER_MOVE``, ...)."""
    return promise in driver.promises()


async def chunks(data: bytes, size: int = CHUNK) -> AsyncIterator[bytes]:
    for start in range(0, len(data), size):
        yield data[start : start + size]


async def aborted_stream(prefix: bytes) -> AsyncIterator[bytes]:
    yield prefix
    raise StreamAborted()


async def put_bytes(driver: Driver[Any], folder: Obj, name: str, data: bytes) -> Obj:
    return await driver.put(folder, Upload(name, chunks(data), len(data), None))


async def read_link(link: Link, start: int = 0, length: int | None = None) -> bytes:
    """The bytes of ``link`` from ``start``, ``length`` of them (None: to the end),
    read the way the server reads every link (``streams.open_range``)."""
    return b"".join([data async for data in open_range(link, start, length)])


async def read_obj(
    driver: Driver[Any], obj: Obj, start: int = 0, length: int | None = None
) -> bytes:
    return await read_link(await driver.link(obj, LinkArgs()), start, length)


async def overwrite(driver: Driver[Any], obj: Obj, folder: Obj, data: bytes) -> None:
    """Change ``obj``'s content: in place for a local file (so a shared inode shows), else put."""
    link = await driver.link(obj, LinkArgs())
    if link.file_path:
        await run_in(DISK_POOL, _write_in_place, link.file_path, data)
    else:
        await put_bytes(driver, folder, obj.name, data)


def _write_in_place(path: str, data: bytes) -> None:
    with open(path, "r+b") as file:
        file.write(data)
        file.truncate()


async def names(driver: Driver[Any], folder: Obj) -> list[str]:
    return sorted(obj.name for obj in await driver.list(folder))


def find(objs: list[Obj], name: str) -> Obj:
    matches = [obj for obj in objs if obj.name == name]
    assert len(matches) == 1, (name, [obj.name for obj in objs])
    return matches[0]


class DriverConformance:
    """Inherit in a ``Test...`` class and define the ``driver_factory`` fixture."""

    @pytest.fixture
    async def driver(self, driver_factory: DriverFactory) -> AsyncIterator[Driver[Any]]:
        built = await driver_factory()
        yield built
        await built.drop()

    @pytest.fixture
    async def place(self, driver: Driver[Any]) -> AsyncIterator[Place]:
        require(driver, "make_dir")
        name = f"conformance-{secrets.token_hex(6)}"
        made = Place(await driver.make_dir(await driver.root_obj(), name), f"/{name}")
        yield made
        if "remove" in driver.capabilities():
            with suppress(ManifoldError):  # a test may have removed or moved it already
                await driver.remove(made.obj)

    async def gone_file(self, driver: Driver[Any], place: Place) -> Obj:
        require(driver, "put", "remove")
        obj = await put_bytes(driver, place.obj, "gone.txt", b"x")
        await driver.remove(obj)
        return obj

    async def gone_folder(self, driver: Driver[Any], place: Place) -> Obj:
        require(driver, "remove")
        obj = await driver.make_dir(place.obj, "gone")
        await driver.remove(obj)
        return obj

    # --- listing -----------------------------------------------------------------

    async def test_root_lists(self, driver: Driver[Any]) -> None:
        assert isinstance(await driver.list(await driver.root_obj()), list)

    async def test_empty_folder_lists_nothing(self, driver: Driver[Any], place: Place) -> None:
        assert await driver.list(place.obj) == []

    async def test_new_folder_is_listed_in_parent(self, driver: Driver[Any], place: Place) -> None:
        listed = find(await driver.list(await driver.root_obj()), place.obj.name)
        assert listed.is_dir

    async def test_missing_folder_lists_not_found(self, driver: Driver[Any], place: Place) -> None:
        gone = await self.gone_folder(driver, place)
        with pytest.raises(ObjectNotFound):
            await driver.list(gone)

    async def test_get_finds_folder_and_file(self, driver: Driver[Any], place: Place) -> None:
        require(driver, "get", "put")
        await put_bytes(driver, place.obj, "f.txt", b"abc")
        folder = await driver.get(place.path)
        file = await driver.get(place.child("f.txt"))
        assert (folder.name, folder.is_dir) == (place.obj.name, True)
        assert (file.name, file.is_dir, file.size) == ("f.txt", False, 3)

    async def test_get_missing_is_not_found(self, driver: Driver[Any], place: Place) -> None:
        require(driver, "get")
        with pytest.raises(ObjectNotFound):
            await driver.get(place.child("no-such-thing"))

    # --- make_dir ----------------------------------------------------------------

    async def test_make_dir_nested_and_idempotent(self, driver: Driver[Any], place: Place) -> None:
        outer = await driver.make_dir(place.obj, "a")
        inner = await driver.make_dir(outer, "b")
        again_outer = await driver.make_dir(place.obj, "a")
        again_inner = await driver.make_dir(again_outer, "b")
        assert (inner.name, inner.is_dir, again_inner.name, again_inner.is_dir) == (
            "b",
            True,
            "b",
            True,
        )
        assert await names(driver, place.obj) == ["a"]
        assert await names(driver, outer) == ["b"]
        assert await driver.list(inner) == []

    async def test_make_dir_over_file_fails(self, driver: Driver[Any], place: Place) -> None:
        require(driver, "put")
        await put_bytes(driver, place.obj, "taken", b"x")
        with pytest.raises(ManifoldError):
            await driver.make_dir(place.obj, "taken")

    # --- put and read back -------------------------------------------------------

    async def test_put_zero_length(self, driver: Driver[Any], place: Place) -> None:
        require(driver, "put")
        obj = await put_bytes(driver, place.obj, "empty.bin", b"")
        listed = find(await driver.list(place.obj), "empty.bin")
        assert (obj.size, listed.size, listed.is_dir) == (0, 0, False)
        assert await read_obj(driver, listed) == b""

    async def test_put_large_in_chunks(self, driver: Driver[Any], place: Place) -> None:
        require(driver, "put")
        data = os.urandom(LARGE_SIZE)
        await put_bytes(driver, place.obj, "large.bin", data)
        listed = find(await driver.list(place.obj), "large.bin")
        assert listed.size == LARGE_SIZE
        assert await read_obj(driver, listed) == data

    async def test_put_without_size(self, driver: Driver[Any], place: Place) -> None:
        require(driver, "put")
        await driver.put(place.obj, Upload("unsized.bin", chunks(b"hello"), None, None))
        assert await read_obj(driver, find(await driver.list(place.obj), "unsized.bin")) == b"hello"

    async def test_put_replaces_file(self, driver: Driver[Any], place: Place) -> None:
        require(driver, "put")
        await put_bytes(driver, place.obj, "same.txt", b"first version")
        await put_bytes(driver, place.obj, "same.txt", b"second")
        listed = find(await driver.list(place.obj), "same.txt")
        assert (listed.size, await read_obj(driver, listed)) == (6, b"second")

    async def test_put_without_replace_keeps_a_taken_name(
        self, driver: Driver[Any], place: Place
    ) -> None:
        require(driver, "put")
        await put_bytes(driver, place.obj, "kept.txt", b"the first")
        with pytest.raises(ObjectExists):
            await driver.put(
                place.obj, Upload("kept.txt", chunks(b"second"), 6, None, overwrite=False)
            )
        assert await names(driver, place.obj) == ["kept.txt"]
        assert (
            await read_obj(driver, find(await driver.list(place.obj), "kept.txt")) == b"the first"
        )

    async def test_put_without_replace_stores_a_free_name(
        self, driver: Driver[Any], place: Place
    ) -> None:
        require(driver, "put")
        await driver.put(place.obj, Upload("free.txt", chunks(b"data"), 4, None, overwrite=False))
        assert await read_obj(driver, find(await driver.list(place.obj), "free.txt")) == b"data"

    async def test_concurrent_puts_without_replace_have_one_winner(
        self, driver: Driver[Any], place: Place
    ) -> None:
        require(driver, "put")
        bodies = [bytes([i]) * 1000 for i in range(RACERS)]
        results = await asyncio.gather(
            *(
                driver.put(
                    place.obj, Upload("race.bin", chunks(b, 100), 1000, None, overwrite=False)
                )
                for b in bodies
            ),
            return_exceptions=True,
        )
        won, lost = _outcomes(results)
        assert await names(driver, place.obj) == ["race.bin"]
        stored = await read_obj(driver, find(await driver.list(place.obj), "race.bin"))
        if promised(driver, EXCLUSIVE_CREATE):
            assert (won, lost) == (1, RACERS - 1)
            winner = bodies[next(i for i, r in enumerate(results) if isinstance(r, Obj))]
            assert stored == winner
        else:
            # No promise: racers may each replace the last, but what is stored is one
            # racer's whole file, never a mix or a part (the services serialise such
            # puts on one server).
            assert won >= 1
            assert stored in bodies

    @pytest.mark.parametrize(("start", "length"), RANGES)
    async def test_range_read(
        self, driver: Driver[Any], place: Place, start: int, length: int | None
    ) -> None:
        require(driver, "put")
        obj = await put_bytes(driver, place.obj, "ranges.bin", RANGE_PAYLOAD)
        end = None if length is None else start + length
        assert await read_obj(driver, obj, start, length) == RANGE_PAYLOAD[start:end]

    async def test_link_of_missing_file_is_not_found(
        self, driver: Driver[Any], place: Place
    ) -> None:
        gone = await self.gone_file(driver, place)
        with pytest.raises(ObjectNotFound):
            await read_obj(driver, gone)

    async def test_aborted_upload_leaves_nothing(self, driver: Driver[Any], place: Place) -> None:
        require(driver, "put")
        with pytest.raises(StreamAborted):
            await driver.put(
                place.obj, Upload("aborted.bin", aborted_stream(b"x" * 1000), 2000, None)
            )
        assert await driver.list(place.obj) == []

    @pytest.mark.parametrize("sent", [500, 1500], ids=["short", "long"])
    async def test_wrong_length_upload_leaves_nothing(
        self, driver: Driver[Any], place: Place, sent: int
    ) -> None:
        require(driver, "put")
        with pytest.raises(ManifoldError):
            await driver.put(place.obj, Upload("wrong.bin", chunks(b"y" * sent), 1000, None))
        assert await driver.list(place.obj) == []

    # --- rename, move, copy, remove ---------------------------------------------

    async def test_rename_file(self, driver: Driver[Any], place: Place) -> None:
        require(driver, "put", "rename")
        obj = await put_bytes(driver, place.obj, "old.txt", b"content")
        renamed = await driver.rename(obj, "new.txt")
        assert renamed.name == "new.txt"
        assert await names(driver, place.obj) == ["new.txt"]
        assert await read_obj(driver, renamed) == b"content"

    async def test_rename_non_empty_folder(self, driver: Driver[Any], place: Place) -> None:
        require(driver, "put", "rename")
        folder = await self._filled_folder(driver, place.obj, "before")
        renamed = await driver.rename(folder, "after")
        assert await names(driver, place.obj) == ["after"]
        await self._check_filled(driver, renamed)

    async def test_rename_onto_taken_name_fails(self, driver: Driver[Any], place: Place) -> None:
        require(driver, "put", "rename")
        first = await put_bytes(driver, place.obj, "one", b"1")
        await put_bytes(driver, place.obj, "two", b"2")
        with pytest.raises(ObjectExists):
            await driver.rename(first, "two")
        assert await read_obj(driver, find(await driver.list(place.obj), "two")) == b"2"

    async def test_rename_missing_is_not_found(self, driver: Driver[Any], place: Place) -> None:
        require(driver, "rename")
        gone = await self.gone_file(driver, place)
        with pytest.raises(ObjectNotFound):
            await driver.rename(gone, "other")

    async def test_move_file(self, driver: Driver[Any], place: Place) -> None:
        require(driver, "put", "move")
        target = await driver.make_dir(place.obj, "target")
        obj = await put_bytes(driver, place.obj, "moving.txt", b"moved bytes")
        moved = await driver.move(obj, target)
        assert await names(driver, place.obj) == ["target"]
        assert await names(driver, target) == ["moving.txt"]
        assert await read_obj(driver, moved) == b"moved bytes"

    async def test_move_non_empty_folder(self, driver: Driver[Any], place: Place) -> None:
        require(driver, "put", "move")
        target = await driver.make_dir(place.obj, "target")
        folder = await self._filled_folder(driver, place.obj, "moving")
        moved = await driver.move(folder, target)
        assert await names(driver, place.obj) == ["target"]
        await self._check_filled(driver, moved)

    async def test_folder_move_promise_matches_the_methods(self, driver: Driver[Any]) -> None:
        """``FOLDER_MOVE`` both ways: a driver that makes it moves and renames folders
        itself; one that does not is moved a file at a time by the services (a folder
        made, each file moved, the emptied folders removed), so it must do those."""
        require(driver, "move")  # a read-only driver moves nothing either way
        if promised(driver, FOLDER_MOVE):
            assert {"move", "rename"} <= driver.capabilities()
        else:
            assert {"make_dir", "move", "remove"} <= driver.capabilities()

    async def test_move_into_itself_fails(self, driver: Driver[Any], place: Place) -> None:
        require(driver, "move")
        outer = await driver.make_dir(place.obj, "outer")
        inner = await driver.make_dir(outer, "inner")
        with pytest.raises(ManifoldError):
            await driver.move(outer, inner)
        assert await names(driver, place.obj) == ["outer"]

    async def test_copy_file(self, driver: Driver[Any], place: Place) -> None:
        require(driver, "put", "copy")
        target = await driver.make_dir(place.obj, "target")
        obj = await put_bytes(driver, place.obj, "copied.txt", b"copy me")
        copied = await driver.copy(obj, target)
        assert await names(driver, place.obj) == ["copied.txt", "target"]
        assert await read_obj(driver, copied) == b"copy me"
        assert await read_obj(driver, obj) == b"copy me"

    async def test_copy_non_empty_folder(self, driver: Driver[Any], place: Place) -> None:
        require(driver, "put", "copy")
        target = await driver.make_dir(place.obj, "target")
        folder = await self._filled_folder(driver, place.obj, "tree")
        copied = await driver.copy(folder, target)
        await self._check_filled(driver, copied)
        await self._check_filled(driver, folder)

    async def test_copy_does_not_alias_source(self, driver: Driver[Any], place: Place) -> None:
        require(driver, "put", "copy")
        target = await driver.make_dir(place.obj, "target")
        obj = await put_bytes(driver, place.obj, "original.txt", b"original")
        copied = await driver.copy(obj, target)
        await overwrite(driver, copied, target, b"changed copy")
        assert await read_obj(driver, obj) == b"original"
        assert await read_obj(driver, find(await driver.list(target), "original.txt")) == (
            b"changed copy"
        )

    async def test_copied_folder_does_not_alias_source(
        self, driver: Driver[Any], place: Place
    ) -> None:
        require(driver, "put", "copy")
        target = await driver.make_dir(place.obj, "target")
        folder = await self._filled_folder(driver, place.obj, "tree")
        copied = await driver.copy(folder, target)
        await overwrite(driver, find(await driver.list(copied), "a.txt"), copied, b"changed")
        await self._check_filled(driver, folder)

    async def test_copy_onto_taken_name_fails(self, driver: Driver[Any], place: Place) -> None:
        require(driver, "put", "copy")
        obj = await put_bytes(driver, place.obj, "dup.txt", b"x")
        with pytest.raises(ObjectExists):
            await driver.copy(obj, place.obj)

    @pytest.mark.parametrize("kind", ["file", "empty folder", "folder"])
    async def test_concurrent_copies_to_one_name_have_one_winner(
        self, driver: Driver[Any], place: Place, kind: str
    ) -> None:
        require(driver, "put", "copy")
        target = await driver.make_dir(place.obj, "target")
        if kind == "file":
            source = await put_bytes(driver, place.obj, "src", b"copied once")
        elif kind == "empty folder":
            source = await driver.make_dir(place.obj, "src")
        else:
            source = await self._filled_folder(driver, place.obj, "src")
        results = await asyncio.gather(
            *(driver.copy(source, target) for _ in range(RACERS)), return_exceptions=True
        )
        won, lost = _outcomes(results)
        if promised(driver, EXCLUSIVE_CREATE):
            assert (won, lost) == (1, RACERS - 1)
        else:
            assert won >= 1
        assert await names(driver, target) == ["src"]

    async def test_remove_file(self, driver: Driver[Any], place: Place) -> None:
        require(driver, "put", "remove")
        obj = await put_bytes(driver, place.obj, "doomed.txt", b"x")
        await driver.remove(obj)
        assert await driver.list(place.obj) == []

    async def test_remove_non_empty_folder(self, driver: Driver[Any], place: Place) -> None:
        require(driver, "put", "remove")
        folder = await self._filled_folder(driver, place.obj, "doomed")
        await driver.remove(folder)
        assert await driver.list(place.obj) == []

    async def test_a_folder_removal_longer_than_the_call_timeout_completes(
        self, driver: Driver[Any], place: Place
    ) -> None:
        require(driver, "put", "remove")
        folder = await self._filled_folder(driver, place.obj, "doomed")
        with slow_steps():
            await TimeoutLayer(driver, STEP_LIMIT).remove(folder)
        assert await driver.list(place.obj) == []

    async def test_a_folder_rename_longer_than_the_call_timeout_completes(
        self, driver: Driver[Any], place: Place
    ) -> None:
        require(driver, "put", "rename")
        folder = await self._filled_folder(driver, place.obj, "before")
        with slow_steps():
            renamed = await TimeoutLayer(driver, STEP_LIMIT).rename(folder, "after")
        assert await names(driver, place.obj) == ["after"]
        await self._check_filled(driver, renamed)

    async def test_remove_missing_is_not_found(self, driver: Driver[Any], place: Place) -> None:
        gone = await self.gone_file(driver, place)
        with pytest.raises(ObjectNotFound):
            await driver.remove(gone)

    async def test_move_into_current_folder_keeps_it(
        self, driver: Driver[Any], place: Place
    ) -> None:
        require(driver, "put", "move")
        obj = await put_bytes(driver, place.obj, "stay.txt", b"stay")
        moved = await driver.move(obj, place.obj)
        assert moved.name == "stay.txt"
        assert await names(driver, place.obj) == ["stay.txt"]
        assert await read_obj(driver, moved) == b"stay"

    # --- a move or rename over a file in one step (``move_over``) -----------------

    @pytest.mark.parametrize("across", [False, True], ids=["rename", "move"])
    async def test_move_over_replaces_a_file_in_one_step(
        self, driver: Driver[Any], place: Place, across: bool
    ) -> None:
        require(driver, "put", "move_over")
        ops = StorageOps(driver.storage, driver, MemoryListCache())
        folder, folder_path = place.obj, place.path
        if across:
            folder, folder_path = await driver.make_dir(place.obj, "into"), place.child("into")
        await put_bytes(driver, place.obj, "new.txt", b"the new bytes")
        await put_bytes(driver, folder, "old.txt", b"old")
        await ops.list(place.path)  # both listings cached, to be patched
        await ops.list(folder_path)
        with _skipped_when_not_supported():
            moved = await ops.move_over(place.child("new.txt"), f"{folder_path}/old.txt")
        assert (moved.name, moved.size, moved.is_dir) == ("old.txt", 13, False)
        cached = [o for o in await ops.list(folder_path) if o.name == "old.txt"]
        assert [o.size for o in cached] == [13]
        assert "new.txt" not in [o.name for o in await ops.list(place.path)]
        assert await names(driver, place.obj) == (["into"] if across else ["old.txt"])
        assert await names(driver, folder) == ["old.txt"]
        assert await read_obj(driver, find(await driver.list(folder), "old.txt")) == (
            b"the new bytes"
        )

    async def test_move_over_never_replaces_a_folder(
        self, driver: Driver[Any], place: Place
    ) -> None:
        require(driver, "put", "move_over")
        file = await put_bytes(driver, place.obj, "file.txt", b"file")
        folder = await self._filled_folder(driver, place.obj, "taken")
        with _skipped_when_not_supported(), pytest.raises(ObjectExists):
            await driver.move_over(file, place.obj, "taken", folder)
        with pytest.raises(NotAFile):
            await driver.move_over(folder, place.obj, "file.txt", file)
        assert await names(driver, place.obj) == ["file.txt", "taken"]
        await self._check_filled(driver, find(await driver.list(place.obj), "taken"))
        assert await read_obj(driver, find(await driver.list(place.obj), "file.txt")) == b"file"

    async def test_move_over_of_a_missing_file_is_not_found(
        self, driver: Driver[Any], place: Place
    ) -> None:
        require(driver, "move_over")
        gone = await self.gone_file(driver, place)
        kept = await put_bytes(driver, place.obj, "kept.txt", b"kept")
        with _skipped_when_not_supported(), pytest.raises(ObjectNotFound):
            await driver.move_over(gone, place.obj, "kept.txt", kept)
        assert await read_obj(driver, find(await driver.list(place.obj), "kept.txt")) == b"kept"

    async def test_removed_name_can_be_used_again(self, driver: Driver[Any], place: Place) -> None:
        require(driver, "put", "remove")
        await driver.remove(await put_bytes(driver, place.obj, "again.txt", b"first"))
        await driver.remove(await driver.make_dir(place.obj, "again-dir"))
        await put_bytes(driver, place.obj, "again.txt", b"second")
        await driver.make_dir(place.obj, "again-dir")
        listed = await driver.list(place.obj)
        assert await read_obj(driver, find(listed, "again.txt")) == b"second"
        assert find(listed, "again-dir").is_dir

    # --- what listings report ----------------------------------------------------

    async def test_listing_reports_sizes_kinds_and_times(
        self, driver: Driver[Any], place: Place
    ) -> None:
        require(driver, "put")
        await put_bytes(driver, place.obj, "sized.bin", b"x" * 1234)
        await driver.make_dir(place.obj, "folder")
        listed = await driver.list(place.obj)
        file, folder = find(listed, "sized.bin"), find(listed, "folder")
        assert (file.size, file.is_dir, folder.is_dir) == (1234, False, True)
        for obj in (file, folder):
            assert obj.modified.tzinfo is not None, obj
        assert file.modified.year >= 2000, file
        if promised(driver, FOLDER_TIMES):
            assert folder.modified.year >= 2000, folder

    async def test_many_entries_are_listed_once(self, driver: Driver[Any], place: Place) -> None:
        require(driver, "put")
        expected = [f"entry-{i:03d}.txt" for i in range(60)] + [f"dir-{i:02d}" for i in range(5)]
        for name in expected[:60]:
            await put_bytes(driver, place.obj, name, name.encode())
        for name in expected[60:]:
            await driver.make_dir(place.obj, name)
        assert await names(driver, place.obj) == sorted(expected)

    async def test_refreshed_listing_is_the_listing(
        self, driver: Driver[Any], place: Place
    ) -> None:
        require(driver, "list_refreshed", "put")
        await put_bytes(driver, place.obj, "seen.txt", b"seen")
        await driver.make_dir(place.obj, "seen-dir")
        plain = sorted((o.name, o.size, o.is_dir) for o in await driver.list(place.obj))
        fresh = sorted((o.name, o.size, o.is_dir) for o in await driver.list_refreshed(place.obj))
        assert fresh == plain == [("seen-dir", 0, True), ("seen.txt", 4, False)]
        gone = await self.gone_folder(driver, place)
        with pytest.raises(ObjectNotFound):
            await driver.list_refreshed(gone)

    async def test_link_of_folder_is_not_a_file(self, driver: Driver[Any], place: Place) -> None:
        folder = await driver.make_dir(place.obj, "not-a-file")
        with pytest.raises(NotAFile):
            await read_obj(driver, folder)

    async def test_list_of_file_is_not_a_folder(self, driver: Driver[Any], place: Place) -> None:
        require(driver, "put")
        file = await put_bytes(driver, place.obj, "not-a-folder.txt", b"x")
        with pytest.raises(NotAFolder):
            await driver.list(file)

    # --- listings by path, as the services ask for them (``StorageOps.list``) -------

    async def test_a_path_lists_as_a_folder_a_file_or_nothing(
        self, driver: Driver[Any], place: Place
    ) -> None:
        """A listing by path tells a folder (empty or not), a file and nothing apart,
        whether the services look the folder up first or the driver makes it from its
        path (``folder_at``)."""
        require(driver, "put")
        ops = StorageOps(driver.storage, driver, MemoryListCache())
        await put_bytes(driver, place.obj, "file.txt", b"x")
        await driver.make_dir(place.obj, "empty")
        assert sorted(o.name for o in await ops.list(place.path, refresh=True)) == [
            "empty",
            "file.txt",
        ]
        assert await ops.list(place.child("empty"), refresh=True) == []
        with pytest.raises(NotAFolder):
            await ops.list(place.child("file.txt"), refresh=True)
        with pytest.raises(ObjectNotFound):
            await ops.list(place.child("nothing"), refresh=True)
        with pytest.raises(ObjectNotFound):
            await ops.list(place.child("nothing/below"), refresh=True)

    async def test_a_folder_made_from_its_path_is_listed_without_a_lookup(
        self, driver: Driver[Any], place: Place
    ) -> None:
        """A driver that makes folders from their paths (``folder_at``) is asked for a
        folder's listing alone: one round trip, no lookup before it."""
        require(driver, "put")
        if driver.folder_at(place.path) is None:
            pytest.skip(f"{type(driver).__name__} has every folder looked up first")
        await put_bytes(driver, place.obj, "file.txt", b"x")
        calls: list[str] = []
        measured = MeasureLayer(driver, lambda _storage, call, _took, _error: calls.append(call))
        ops = StorageOps(driver.storage, measured, MemoryListCache())
        assert [o.name for o in await ops.list(place.path, refresh=True)] == ["file.txt"]
        assert calls and set(calls) <= {"list", "list_page"}, calls

    # --- what the storage already holds (all a read-only driver runs) -------------

    async def test_listed_files_read_to_their_size(self, driver: Driver[Any]) -> None:
        """Each file the root lists reads as many bytes as it lists, from the start and
        from its last byte, and its bytes are the same read whole or in two ranges."""
        files = [o for o in await driver.list(await driver.root_obj()) if not o.is_dir]
        if not files:
            pytest.skip("the root holds no file")
        for file in files[:SAMPLED]:
            head = await read_obj(driver, file, 0, SAMPLE_BYTES)
            assert len(head) == min(SAMPLE_BYTES, file.size), file
            if file.size:
                assert len(await read_obj(driver, file, file.size - 1)) == 1, file
            if 0 < file.size <= SAMPLE_BYTES:
                half = file.size // 2
                split = await read_obj(driver, file, 0, half) + await read_obj(driver, file, half)
                assert split == head, file

    async def test_listed_entries_are_found_and_of_their_kind(self, driver: Driver[Any]) -> None:
        """What the root lists is found by its path, as listed; a listed folder lists and
        has no bytes, a listed file is no folder."""
        listed = await driver.list(await driver.root_obj())
        if not listed:
            pytest.skip("the root holds nothing")
        for obj in listed[:SAMPLED]:
            if "get" in driver.capabilities():
                found = await driver.get(f"/{obj.name}")
                assert (found.name, found.is_dir) == (obj.name, obj.is_dir), obj
                assert found.is_dir or found.size == obj.size, obj
            if obj.is_dir:
                assert isinstance(await driver.list(obj), list)
                with pytest.raises(NotAFile):
                    await read_obj(driver, obj)
            else:
                with pytest.raises(NotAFolder):
                    await driver.list(obj)

    # --- awkward names -----------------------------------------------------------

    @pytest.mark.parametrize("name", AWKWARD_NAMES)
    async def test_awkward_file_name(self, driver: Driver[Any], place: Place, name: str) -> None:
        require(driver, "put")
        data = name.encode() * 3
        await put_bytes(driver, place.obj, name, data)
        listed = find(await driver.list(place.obj), name)
        assert await read_obj(driver, listed) == data
        if "get" in driver.capabilities():
            assert (await driver.get(place.child(name))).name == name

    @pytest.mark.parametrize("name", AWKWARD_NAMES)
    async def test_awkward_folder_name(self, driver: Driver[Any], place: Place, name: str) -> None:
        require(driver, "put")
        folder = await driver.make_dir(place.obj, name)
        await put_bytes(driver, folder, "inside.txt", b"inside")
        assert await names(driver, place.obj) == [name]
        relisted = find(await driver.list(place.obj), name)
        assert await read_obj(driver, find(await driver.list(relisted), "inside.txt")) == b"inside"

    @pytest.mark.parametrize("name", AWKWARD_NAMES)
    async def test_rename_to_awkward_name(
        self, driver: Driver[Any], place: Place, name: str
    ) -> None:
        require(driver, "put", "rename")
        obj = await put_bytes(driver, place.obj, "plain.txt", b"plain")
        renamed = await driver.rename(obj, name)
        assert (renamed.name, await names(driver, place.obj)) == (name, [name])
        assert await read_obj(driver, renamed) == b"plain"

    # --- helpers -----------------------------------------------------------------

    async def _filled_folder(self, driver: Driver[Any], parent: Obj, name: str) -> Obj:
        folder = await driver.make_dir(parent, name)
        await put_bytes(driver, folder, "a.txt", b"alpha")
        sub = await driver.make_dir(folder, "sub")
        await put_bytes(driver, sub, "b.txt", b"beta")
        return folder

    async def _check_filled(self, driver: Driver[Any], folder: Obj) -> None:
        listed = await driver.list(folder)
        assert sorted(obj.name for obj in listed) == ["a.txt", "sub"]
        assert await read_obj(driver, find(listed, "a.txt")) == b"alpha"
        sub = await driver.list(find(listed, "sub"))
        assert [obj.name for obj in sub] == ["b.txt"]
        assert await read_obj(driver, sub[0]) == b"beta"
