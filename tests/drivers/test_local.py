"""The Local driver: the conformance suite on a temporary folder, plus confinement."""

from __future__ import annotations

import asyncio
import errno
import hashlib
import json
import os
import shutil
import stat
import subprocess
import time
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from PIL import Image

from manifold.drivers.base import FileSource, LinkArgs, Upload
from manifold.drivers.local.driver import TEMP_PREFIX, LocalDriver, os_errors
from manifold.drivers.local.meta import Addition
from manifold.drivers.local.seen import NOTHING, Scan, SeenFolders
from manifold.errors import (
    InvalidRequest,
    ManifoldError,
    NotAFile,
    NotAFolder,
    NotSupported,
    ObjectExists,
    ObjectNotFound,
    PermissionDenied,
    RelativePath,
    ServerError,
)
from manifold.models import THUMB_SELF, Obj, Storage, new_obj
from manifold.testing.conformance import (
    DriverConformance,
    DriverFactory,
    StreamAborted,
    aborted_stream,
    chunks,
    put_bytes,
    read_obj,
)
from tests.fixtures.holding import held_elsewhere

WHEN = datetime(2024, 5, 1, 10, 0, tzinfo=UTC)


async def local_driver(root: Path, **options: Any) -> LocalDriver:
    os.makedirs(root, exist_ok=True)
    addition = Addition(root_folder_path=str(root), **options)
    driver = LocalDriver(Storage(id=1, mount_path="/local", driver="Local"), addition)
    await driver.init()
    return driver


def forged(path: Path | str, is_dir: bool = False) -> Obj:
    """An object a caller made up, as a buggy or hostile upper layer might."""
    return Obj(name=os.path.basename(path), size=0, is_dir=is_dir, modified=WHEN, path=str(path))


class TestLocalConformance(DriverConformance):
    @pytest.fixture
    def driver_factory(self, tmp_path: Path) -> DriverFactory:
        async def build() -> LocalDriver:
            return await local_driver(tmp_path / "root")

        return build


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    secret = tmp_path / "outside"
    secret.mkdir()
    (secret / "secret.txt").write_text("top secret")
    return secret


@pytest.fixture
def root(tmp_path: Path, outside: Path) -> Path:
    root = tmp_path / "root"
    root.mkdir()
    (root / "file-link").symlink_to(outside / "secret.txt")
    (root / "dir-link").symlink_to(outside)
    (root / "relative-link").symlink_to(Path("..") / "outside")
    (root / "inner.txt").write_text("inner")
    (root / "inner-link").symlink_to(root / "inner.txt")
    return root


@pytest.fixture
async def driver(root: Path) -> LocalDriver:
    return await local_driver(root)


ESCAPES = ["file-link", "dir-link", "relative-link", "dir-link/secret.txt"]


async def test_escaping_links_are_not_listed(driver: LocalDriver) -> None:
    listed = await driver.list(await driver.root_obj())
    assert sorted(obj.name for obj in listed) == ["inner-link", "inner.txt"]


@pytest.mark.parametrize("name", ESCAPES)
async def test_escaping_paths_cannot_be_read(driver: LocalDriver, root: Path, name: str) -> None:
    with pytest.raises(PermissionDenied):
        await driver.get(f"/{name}")
    with pytest.raises(PermissionDenied):
        await driver.link(forged(root / name), LinkArgs())


@pytest.mark.parametrize("name", ["dir-link", "relative-link"])
async def test_escaping_folder_cannot_be_listed_or_written(
    driver: LocalDriver, root: Path, outside: Path, name: str
) -> None:
    folder = forged(root / name, is_dir=True)
    with pytest.raises(PermissionDenied):
        await driver.list(folder)
    with pytest.raises(PermissionDenied):
        await driver.make_dir(folder, "planted")
    with pytest.raises(PermissionDenied):
        await put_bytes(driver, folder, "planted.txt", b"x")
    assert sorted(os.listdir(outside)) == ["secret.txt"]


@pytest.mark.parametrize("name", ["file-link", "dir-link"])
async def test_escaping_link_cannot_be_copied_moved_or_removed(
    driver: LocalDriver, root: Path, outside: Path, name: str
) -> None:
    link = forged(root / name)
    root_obj = await driver.root_obj()
    inner = await driver.make_dir(root_obj, "inner")
    for attempt in (driver.copy(link, inner), driver.move(link, inner), driver.remove(link)):
        with pytest.raises(PermissionDenied):
            await attempt
    assert os.listdir(root / "inner") == []
    assert (outside / "secret.txt").read_text() == "top secret"


async def test_move_over_stays_inside_the_root(
    driver: LocalDriver, root: Path, outside: Path
) -> None:
    """Neither an escaping link as the source, nor a folder through an escaping link or
    a forged path as the destination; a link at the name is replaced, not followed."""
    root_obj, inner = await driver.root_obj(), await driver.get("/inner.txt")
    for src, folder in (
        (forged(root / "file-link"), root_obj),
        (inner, forged(root / "dir-link", is_dir=True)),
        (inner, forged(outside, is_dir=True)),
    ):
        with pytest.raises(PermissionDenied):
            await driver.move_over(src, folder, "secret.txt", inner)
    moved = await driver.move_over(inner, root_obj, "file-link", inner)
    assert (moved.name, (root / "file-link").is_symlink()) == ("file-link", False)
    assert (root / "file-link").read_text() == "inner"
    assert sorted(os.listdir(outside)) == ["secret.txt"]
    assert (outside / "secret.txt").read_text() == "top secret"


async def test_move_over_keeps_the_replaced_file_in_the_recycle_bin(tmp_path: Path) -> None:
    bin_path = tmp_path / "recycle"
    driver = await local_driver(tmp_path / "data", recycle_bin_path=str(bin_path))
    root_obj = await driver.root_obj()
    old = await put_bytes(driver, root_obj, "a.txt", b"old")
    new = await put_bytes(driver, root_obj, "b.txt", b"new")
    await driver.move_over(new, root_obj, "a.txt", old)
    assert [o.name for o in await driver.list(root_obj)] == ["a.txt"]
    assert (tmp_path / "data" / "a.txt").read_bytes() == b"new"
    assert (bin_path / "a.txt").read_bytes() == b"old"


async def test_forged_paths_outside_root_are_refused(
    driver: LocalDriver, root: Path, outside: Path
) -> None:
    for path in (outside, root / ".." / "outside", Path("/")):
        with pytest.raises(PermissionDenied):
            await driver.list(forged(path, is_dir=True))
    with pytest.raises(PermissionDenied):
        await driver.link(forged(root / ".." / "outside" / "secret.txt"), LinkArgs())


async def test_root_itself_cannot_be_removed_or_renamed(driver: LocalDriver, root: Path) -> None:
    root_obj = await driver.root_obj()
    with pytest.raises(PermissionDenied):
        await driver.remove(root_obj)
    with pytest.raises(PermissionDenied):
        await driver.rename(root_obj, "elsewhere")
    assert (root / "inner.txt").read_text() == "inner"


async def test_link_inside_root_is_followed(driver: LocalDriver) -> None:
    assert await read_obj(driver, await driver.get("/inner-link")) == b"inner"


@pytest.mark.parametrize(
    ("name", "error"),
    [
        ("..", RelativePath),
        (".", RelativePath),
        ("", InvalidRequest),
        ("a/b", InvalidRequest),
        ("a\\b", InvalidRequest),
        ("nul\x00byte", InvalidRequest),
    ],
)
async def test_bad_names_are_refused(
    driver: LocalDriver, root: Path, name: str, error: type[ManifoldError]
) -> None:
    root_obj = await driver.root_obj()
    inner = await driver.get("/inner.txt")
    with pytest.raises(error):
        await driver.make_dir(root_obj, name)
    with pytest.raises(error):
        await driver.rename(inner, name)
    with pytest.raises(error):
        await put_bytes(driver, root_obj, name, b"x")
    assert (root / "inner.txt").read_text() == "inner"


@pytest.mark.parametrize("path", ["/../outside/secret.txt", "/a/../../outside", "/./inner.txt"])
async def test_relative_get_paths_are_refused(driver: LocalDriver, path: str) -> None:
    with pytest.raises(RelativePath):
        await driver.get(path)


async def test_show_hidden_false_hides_dotfiles(tmp_path: Path) -> None:
    root = tmp_path / "hidden"
    root.mkdir()
    (root / ".dotfile").write_text("x")
    (root / ".dotdir").mkdir()
    (root / "visible").write_text("x")
    shown = await local_driver(root)
    hidden = await local_driver(root, show_hidden=False)
    assert len(await shown.list(await shown.root_obj())) == 3
    assert [o.name for o in await hidden.list(await hidden.root_obj())] == ["visible"]


async def test_recycle_bin_moves_instead_of_deleting(tmp_path: Path) -> None:
    bin_path = tmp_path / "recycle"
    driver = await local_driver(tmp_path / "data", recycle_bin_path=str(bin_path))
    root_obj = await driver.root_obj()
    await driver.remove(await put_bytes(driver, root_obj, "a.txt", b"first"))
    folder = await driver.make_dir(root_obj, "folder")
    await put_bytes(driver, folder, "b.txt", b"b")
    await driver.remove(folder)
    await driver.remove(await put_bytes(driver, root_obj, "a.txt", b"second"))
    assert await driver.list(root_obj) == []
    assert (bin_path / "a.txt").read_bytes() == b"first"
    assert (bin_path / "folder" / "b.txt").read_bytes() == b"b"
    renamed = [p for p in os.listdir(bin_path) if p.startswith("a.txt_")]
    assert len(renamed) == 1 and (bin_path / renamed[0]).read_bytes() == b"second"


@pytest.mark.parametrize("recycle", ["", "delete permanently"])
async def test_default_recycle_setting_deletes(tmp_path: Path, recycle: str) -> None:
    driver = await local_driver(tmp_path / "data", recycle_bin_path=recycle)
    await driver.remove(await put_bytes(driver, await driver.root_obj(), "a.txt", b"x"))
    assert os.listdir(tmp_path) == ["data"]
    assert os.listdir(tmp_path / "data") == []


async def test_failed_uploads_leave_no_temp_file_on_disk(driver: LocalDriver, root: Path) -> None:
    before = sorted(os.listdir(root))
    root_obj = await driver.root_obj()
    with pytest.raises(StreamAborted):
        await driver.put(root_obj, Upload("aborted", aborted_stream(b"x" * 100), None, None))
    with pytest.raises(InvalidRequest):
        await driver.put(root_obj, Upload("short", chunks(b"x" * 10), 20, None))
    assert sorted(os.listdir(root)) == before


async def test_large_upload_flushed_while_receiving_is_exact(
    driver: LocalDriver, root: Path
) -> None:
    # Past the background-flush threshold several times, and aborted past it too.
    data = os.urandom(1 << 20) * 80
    root_obj = await driver.root_obj()
    await driver.put(root_obj, Upload("big", chunks(data, 256 << 10), len(data), None))
    assert (root / "big").read_bytes() == data
    with pytest.raises(StreamAborted):
        await driver.put(root_obj, Upload("cut", aborted_stream(data[: 70 << 20]), None, None))
    assert not (root / "cut").exists()
    assert not [n for n in os.listdir(root) if n.startswith(TEMP_PREFIX)]


MIB = 1 << 20  # what an upload may hold in memory before it writes a temporary


@pytest.mark.parametrize("length", [0, 1, MIB - 1, MIB, MIB + 1, 3 * MIB + 5])
async def test_uploads_either_side_of_the_held_amount_are_exact(
    driver: LocalDriver, root: Path, length: int
) -> None:
    """Small uploads are stored in one trip, larger ones streamed: both whole and
    exact, dated as asked, refused on a size mismatch or a taken name, and neither
    leaves a temporary behind."""
    data = os.urandom(length)
    before = sorted(os.listdir(root))
    root_obj = await driver.root_obj()
    obj = await driver.put(root_obj, Upload("f.bin", chunks(data, 300_000), length, WHEN))
    assert (root / "f.bin").read_bytes() == data
    assert (obj.name, obj.size, obj.is_dir, obj.modified) == ("f.bin", length, False, WHEN)
    with pytest.raises(InvalidRequest):
        await driver.put(root_obj, Upload("g.bin", chunks(data, 300_000), length + 1, None))
    with pytest.raises(ObjectExists):
        await driver.put(root_obj, Upload("f.bin", chunks(b"new"), 3, None, overwrite=False))
    assert (root / "f.bin").read_bytes() == data
    assert sorted(os.listdir(root)) == sorted([*before, "f.bin"])


async def test_a_small_upload_into_a_folder_gone_meanwhile_is_refused(
    driver: LocalDriver, root: Path
) -> None:
    folder = await driver.make_dir(await driver.root_obj(), "gone")
    before = sorted(os.listdir(root))
    (root / "gone").rmdir()
    with pytest.raises(ObjectNotFound):
        await driver.put(folder, Upload("f.txt", chunks(b"x"), 1, None))
    assert sorted(os.listdir(root)) == [n for n in before if n != "gone"]


async def test_upload_temp_files_are_not_listed(driver: LocalDriver, root: Path) -> None:
    (root / f"{TEMP_PREFIX}0123").write_text("half written")
    names = [obj.name for obj in await driver.list(await driver.root_obj())]
    assert not [n for n in names if n.startswith(TEMP_PREFIX)]


class TestStaleTemporaries:
    @pytest.mark.parametrize("folder", ["", "sub", "sub/deeper"])
    async def test_stale_ones_go_at_start_or_when_listed(self, tmp_path: Path, folder: str) -> None:
        """A temporary nobody holds goes, however young (a kill a moment ago left it);
        one another process holds stays, however old."""
        root = tmp_path / "root"
        (root / folder).mkdir(parents=True, exist_ok=True)
        stale = root / folder / f"{TEMP_PREFIX}stale"
        stale.write_bytes(b"left by a kill")
        writing = root / folder / f"{TEMP_PREFIX}writing"
        writing.write_bytes(b"another process writing")
        then = time.time() - 86_400
        os.utime(writing, (then, then))
        with held_elsewhere(writing):
            driver = await local_driver(root)
            await driver.list(await driver.get("/" + folder))
            assert not stale.exists()
            assert writing.exists()
        await driver.list(await driver.get("/" + folder))  # its writer died: it goes
        assert not writing.exists()

    async def test_a_stale_copy_folder_goes_with_its_content(self, tmp_path: Path) -> None:
        root = tmp_path / "root"
        stale = root / f"{TEMP_PREFIX}copy"
        (stale / "inner").mkdir(parents=True)
        (stale / "inner" / "f").write_bytes(b"x")
        await local_driver(root)
        assert os.listdir(root) == []

    async def test_a_slow_upload_of_this_process_is_never_swept(
        self, driver: LocalDriver, root: Path
    ) -> None:
        arrived, release = asyncio.Event(), asyncio.Event()
        first = b"f" * (1 << 20) + b" "  # past what is held in memory: a temporary exists

        async def slow() -> AsyncIterator[bytes]:
            yield first
            arrived.set()
            await release.wait()
            yield b"second half"

        upload = asyncio.create_task(
            driver.put(await driver.root_obj(), Upload("slow.txt", slow(), None, None))
        )
        await arrived.wait()
        [temp] = [root / n for n in os.listdir(root) if n.startswith(TEMP_PREFIX)]
        await driver.list(await driver.root_obj())
        await local_driver(root)  # the storage restarted by an edit, while the upload runs
        assert temp.exists()
        release.set()
        await upload
        assert (root / "slow.txt").read_bytes() == first + b"second half"


async def test_put_over_folder_is_refused(driver: LocalDriver, root: Path) -> None:
    root_obj = await driver.root_obj()
    await driver.make_dir(root_obj, "folder")
    with pytest.raises(ObjectExists):
        await put_bytes(driver, root_obj, "folder", b"x")
    assert (root / "folder").is_dir()
    assert not [n for n in os.listdir(root) if n.startswith(TEMP_PREFIX)]


async def test_put_sets_modification_time(driver: LocalDriver, root: Path) -> None:
    obj = await driver.put(await driver.root_obj(), Upload("dated", chunks(b"x"), 1, WHEN))
    assert obj.modified == WHEN
    assert os.stat(root / "dated").st_mtime == WHEN.timestamp()


async def test_a_file_source_is_linked_into_place_without_a_copy(
    driver: LocalDriver, root: Path, tmp_path: Path
) -> None:
    source = tmp_path / "downloaded.bin"
    source.write_bytes(b"d" * 5000)
    heard: list[int] = []
    file = FileSource(str(source), heard.append)
    obj = await driver.put(await driver.root_obj(), Upload("linked.bin", file, 5000, WHEN))
    assert (obj.size, obj.modified) == (5000, WHEN)
    assert os.stat(root / "linked.bin").st_ino == os.stat(source).st_ino
    assert heard == [5000]
    assert not [n for n in os.listdir(root) if n.startswith(TEMP_PREFIX)]


@pytest.mark.skipif(
    not os.path.isdir("/dev/shm") or os.stat("/dev/shm").st_dev == os.stat("/tmp").st_dev,
    reason="needs a second file system",
)
async def test_a_file_source_on_another_file_system_is_copied(
    driver: LocalDriver, root: Path
) -> None:
    source = Path("/dev/shm") / f"manifold-test-{os.getpid()}.bin"
    source.write_bytes(os.urandom(3 << 20))
    try:
        upload = Upload("copied.bin", FileSource(str(source)), None, None)
        obj = await driver.put(await driver.root_obj(), upload)
        assert obj.size == 3 << 20
        assert (root / "copied.bin").read_bytes() == source.read_bytes()
        assert os.stat(root / "copied.bin").st_ino != os.stat(source).st_ino
    finally:
        source.unlink()


async def test_a_file_source_must_be_a_regular_file_of_its_size(
    driver: LocalDriver, root: Path, tmp_path: Path
) -> None:
    secret = tmp_path / "secret"
    secret.write_text("s")
    (tmp_path / "link").symlink_to(secret)
    with pytest.raises(InvalidRequest):
        await driver.put(
            await driver.root_obj(), Upload("a", FileSource(str(tmp_path / "link")), 1, None)
        )
    with pytest.raises(InvalidRequest, match="size mismatch"):
        await driver.put(await driver.root_obj(), Upload("b", FileSource(str(secret)), 9, None))
    assert not (root / "a").exists() and not (root / "b").exists()
    assert not [n for n in os.listdir(root) if n.startswith(TEMP_PREFIX)]


async def test_a_file_source_reads_as_a_stream(tmp_path: Path) -> None:
    source = tmp_path / "s.bin"
    body = os.urandom((1 << 20) + 7)
    source.write_bytes(body)
    heard: list[int] = []
    assert b"".join([c async for c in FileSource(str(source), heard.append)]) == body
    assert sum(heard) == len(body)


async def test_mkdir_perm_is_octal(tmp_path: Path) -> None:
    driver = await local_driver(tmp_path / "data", mkdir_perm="700")
    await driver.make_dir(await driver.root_obj(), "private")
    assert stat.S_IMODE(os.stat(tmp_path / "data" / "private").st_mode) == 0o700


async def test_bad_mkdir_perm_fails_init(tmp_path: Path) -> None:
    with pytest.raises(InvalidRequest):
        await local_driver(tmp_path / "data", mkdir_perm="rwx")


async def test_missing_root_fails_init(tmp_path: Path) -> None:
    addition = Addition(root_folder_path=str(tmp_path / "absent"))
    driver = LocalDriver(Storage(id=1, mount_path="/x", driver="Local"), addition)
    with pytest.raises(ObjectNotFound, match=r"root folder .* not exists"):
        await driver.init()


async def test_relative_root_is_saved_back_absolute(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "rel").mkdir()
    monkeypatch.chdir(tmp_path)
    driver = LocalDriver(
        Storage(id=1, mount_path="/x", driver="Local"), Addition(root_folder_path="rel")
    )
    await driver.init()
    saved = json.loads(driver.addition())
    assert saved["root_folder_path"] == str(tmp_path / "rel")
    assert list(saved) == list(Addition.model_fields)


async def test_link_of_folder_is_not_a_file(driver: LocalDriver) -> None:
    with pytest.raises(NotAFile):
        await driver.link(await driver.root_obj(), LinkArgs())


async def test_list_of_file_is_not_a_folder(driver: LocalDriver) -> None:
    with pytest.raises(NotAFolder):
        await driver.list(await driver.get("/inner.txt"))


@pytest.mark.parametrize(
    ("code", "error"),
    [
        (errno.ENOENT, ObjectNotFound),
        (errno.ENOTDIR, NotAFolder),
        (errno.EEXIST, ObjectExists),
        (errno.EACCES, PermissionDenied),
        (errno.EPERM, PermissionDenied),
        (errno.ENOSPC, ServerError),
    ],
)
def test_os_errors_are_translated_with_cause(code: int, error: type[ManifoldError]) -> None:
    cause = OSError(code, os.strerror(code))
    with pytest.raises(error) as caught, os_errors():
        raise cause
    assert type(caught.value) is error
    assert caught.value.__cause__ is cause


# --- thumbnails ------------------------------------------------------------------

needs_ffmpeg = pytest.mark.skipif(
    shutil.which("ffmpeg") is None or shutil.which("ffprobe") is None,
    reason="ffmpeg and ffprobe are not installed",
)


def write_image(path: Path, size: tuple[int, int], orientation: int = 1) -> None:
    image = Image.new("RGB", size, (200, 30, 30))
    exif = Image.Exif()
    exif[0x0112] = orientation
    image.save(path, format="JPEG", exif=exif.tobytes())


def png_size(path: str) -> tuple[int, int]:
    with Image.open(path) as image:
        assert image.format == "PNG"
        return image.size


@pytest.fixture
async def thumbed(tmp_path: Path) -> AsyncIterator[LocalDriver]:
    root = tmp_path / "pics"
    (root / "sub dir").mkdir(parents=True)
    write_image(root / "wide.jpg", (600, 300))
    write_image(root / "sub dir" / "a b#.JPG", (100, 50))
    (root / "notes.txt").write_text("text")
    (root / "vector.svg").write_text("<svg xmlns='http://www.w3.org/2000/svg'/>")
    (root / "broken.png").write_bytes(b"\x89PNG\r\n\x1a\nnot really")
    cache = tmp_path / "thumb-cache"
    driver = await local_driver(root, thumbnail=True, thumb_cache_folder=str(cache))
    driver.storage.mount_path = "/my pics"
    yield driver
    await driver.drop()


async def test_listing_offers_thumbnails_for_images_only(thumbed: LocalDriver) -> None:
    listed = {o.name: o for o in await thumbed.list(await thumbed.root_obj())}
    # The driver only says it makes these thumbnails; the API builds their URLs.
    assert listed["wide.jpg"].thumb == THUMB_SELF
    assert listed["vector.svg"].thumb == THUMB_SELF
    assert (listed["notes.txt"].thumb, listed["sub dir"].thumb) == ("", "")
    inner = await thumbed.list(listed["sub dir"])
    assert inner[0].thumb == THUMB_SELF


async def test_thumbnails_off_by_default(tmp_path: Path) -> None:
    write_image(tmp_path / "a.jpg", (20, 20))
    driver = await local_driver(tmp_path)
    assert [o.thumb for o in await driver.list(await driver.root_obj())] == [""]


async def test_thumb_link_is_a_png_144_wide_kept_in_the_cache_folder(
    thumbed: LocalDriver, tmp_path: Path
) -> None:
    wide = await thumbed.get("/wide.jpg")
    link = await thumbed.link(wide, LinkArgs(type="thumb"))
    assert link.headers == {"Content-Type": "image/png"}
    assert png_size(link.file_path) == (144, 72)
    digest = hashlib.md5(wide.path.encode()).hexdigest()
    assert link.file_path == str(tmp_path / "thumb-cache" / f"alist_thumb_{digest}.png")
    kept = os.stat(link.file_path).st_mtime_ns
    again = await thumbed.link(wide, LinkArgs(type="thumb"))
    assert (again.file_path, os.stat(again.file_path).st_mtime_ns) == (link.file_path, kept)
    plain = await thumbed.link(wide, LinkArgs())
    assert (plain.file_path, plain.headers) == (wide.path, {})


async def test_changed_image_gets_a_new_thumbnail(thumbed: LocalDriver, tmp_path: Path) -> None:
    wide = await thumbed.get("/wide.jpg")
    first = await thumbed.link(wide, LinkArgs(type="thumb"))
    write_image(Path(wide.path), (144, 288))
    later = os.stat(first.file_path).st_mtime + 10
    os.utime(wide.path, (later, later))
    assert png_size((await thumbed.link(wide, LinkArgs(type="thumb"))).file_path) == (144, 288)


async def test_thumbnail_follows_exif_orientation(tmp_path: Path) -> None:
    write_image(tmp_path / "turned.jpg", (300, 100), orientation=6)
    driver = await local_driver(tmp_path)
    link = await driver.link(await driver.get("/turned.jpg"), LinkArgs(type="thumb"))
    assert png_size(link.file_path) == (144, 432)
    await driver.drop()


async def test_concurrent_requests_share_one_thumbnail(thumbed: LocalDriver) -> None:
    wide = await thumbed.get("/wide.jpg")
    links = await asyncio.gather(*(thumbed.link(wide, LinkArgs(type="thumb")) for _ in range(8)))
    assert len({link.file_path for link in links}) == 1
    assert png_size(links[0].file_path) == (144, 72)


async def test_svg_thumb_is_the_file_itself(thumbed: LocalDriver) -> None:
    svg = await thumbed.get("/vector.svg")
    assert (await thumbed.link(svg, LinkArgs(type="thumb"))).file_path == svg.path


@pytest.mark.parametrize("name", ["/broken.png", "/notes.txt"])
async def test_undecodable_file_has_no_thumbnail(thumbed: LocalDriver, name: str) -> None:
    with pytest.raises(ServerError, match="failed get thumb"):
        await thumbed.link(await thumbed.get(name), LinkArgs(type="thumb"))


async def test_private_thumbnail_folder_is_removed_on_drop(tmp_path: Path) -> None:
    write_image(tmp_path / "a.jpg", (50, 50))
    driver = await local_driver(tmp_path)
    link = await driver.link(await driver.get("/a.jpg"), LinkArgs(type="thumb"))
    folder = os.path.dirname(link.file_path)
    assert not folder.startswith(str(tmp_path)) and os.path.isfile(link.file_path)
    await driver.drop()
    assert not os.path.exists(folder)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"video_thumb_pos": "abc"}, "invalid video_thumb_pos value: abc"),
        ({"video_thumb_pos": "120%"}, "between 0 and 100"),
        ({"video_thumb_pos": "-3"}, "must be a positive number"),
        ({"thumb_concurrency": "many"}, "invalid thumb_concurrency"),
    ],
)
async def test_bad_thumbnail_options_fail_init(
    tmp_path: Path, options: dict[str, str], message: str
) -> None:
    with pytest.raises(InvalidRequest, match=message):
        await local_driver(tmp_path, **options)


@needs_ffmpeg
async def test_video_thumbnail_with_ffmpeg(tmp_path: Path) -> None:
    video = tmp_path / "clip.mp4"
    argv = ["ffmpeg", "-loglevel", "error", "-f", "lavfi", "-i", "testsrc=size=320x240:rate=5"]
    command = [*argv, "-t", "2", "-pix_fmt", "yuv420p", str(video)]
    await asyncio.to_thread(subprocess.run, command, check=True)
    driver = await local_driver(tmp_path, thumbnail=True, video_thumb_pos="1")
    listed = await driver.list(await driver.root_obj())
    assert listed[0].thumb == THUMB_SELF
    link = await driver.link(listed[0], LinkArgs(type="thumb"))
    assert png_size(link.file_path) == (144, 108)
    await driver.drop()


async def test_videos_get_no_thumbnail_without_ffmpeg(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "clip.mp4").write_bytes(b"\x00" * 64)
    monkeypatch.setenv("PATH", str(tmp_path / "empty-bin"))
    driver = await local_driver(tmp_path, thumbnail=True)
    assert (await driver.list(await driver.root_obj()))[0].thumb == ""
    with pytest.raises(NotSupported):
        await driver.link(await driver.get("/clip.mp4"), LinkArgs(type="thumb"))


async def test_real_paths_are_reused_for_a_second_then_resolved_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "root"
    (root / "alice").mkdir(parents=True)
    (root / "bob").mkdir()
    driver = await local_driver(root)
    (root / "door").symlink_to(root / "alice")
    assert await driver.real_paths(["/door"]) == ["/alice"]
    (root / "door").unlink()
    (root / "door").symlink_to(root / "bob")
    assert await driver.real_paths(["/door"]) == ["/alice"]  # within the second
    monkeypatch.setattr("manifold.drivers.local.driver.REAL_PATH_SECONDS", 0.0)
    assert await driver.real_paths(["/door"]) == ["/bob"]


# --- rescans reuse what did not change ---------------------------------------------


async def scanned(driver: LocalDriver) -> list[Obj]:
    return await driver.list(await driver.root_obj())


async def test_a_rescan_of_an_unchanged_folder_hands_back_the_same_list(
    tmp_path: Path,
) -> None:
    root = tmp_path / "root"
    root.mkdir()
    for n in range(5):
        (root / f"f{n}.txt").write_text("x" * n)
    (root / "sub").mkdir()
    driver = await local_driver(root)
    first = await scanned(driver)
    again = await scanned(driver)
    assert again is first
    assert {o.name: o.size for o in again} == {**{f"f{n}.txt": n for n in range(5)}, "sub": 0}
    await driver.drop()


async def test_a_rescan_makes_new_objects_for_exactly_what_changed(tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    for n in range(6):
        (root / f"f{n}.txt").write_text("x")
    driver = await local_driver(root)
    first = {o.name: o for o in await scanned(driver)}
    (root / "f1.txt").write_text("grown")  # size
    os.utime(root / "f2.txt", (0, 0))  # time only, to the epoch itself
    (root / "f3.txt").unlink()
    (root / "f3.txt").mkdir()  # same name, now a folder
    (root / "f4.txt").unlink()
    (root / "new.txt").write_text("")
    second = {o.name: o for o in await scanned(driver)}
    assert set(second) == {"f0.txt", "f1.txt", "f2.txt", "f3.txt", "f5.txt", "new.txt"}
    assert second["f0.txt"] is first["f0.txt"]
    assert second["f5.txt"] is first["f5.txt"]
    assert second["f1.txt"].size == 5
    assert second["f2.txt"].modified == datetime(1970, 1, 1, tzinfo=UTC)
    assert (second["f3.txt"].is_dir, second["f3.txt"].size) == (True, 0)
    # Every object, reused or not, is what a scan by a fresh driver makes.
    fresh = await local_driver(root)
    assert {o.name: o for o in await scanned(fresh)} == second
    third = {o.name: o for o in await scanned(driver)}
    assert all(third[name] is second[name] for name in second)
    await driver.drop()
    await fresh.drop()


# Names whose directory order differs from their name order on common file systems,
# with upper case, digits, punctuation and characters past ASCII (bytewise order).
ORDER_NAMES = ["b", "B", "a10", "a9", "a", "_x", "Zeta", "é", "e", "\u4e2d", "~", "0", "a.b"]


async def test_a_listing_comes_in_name_order(tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    for n, name in enumerate(ORDER_NAMES):
        if n % 3:
            (root / name).write_text("x")
        else:
            (root / name).mkdir()
    for n in range(300):
        (root / f"f{(n * 7919) % 300:03}").write_text("")
    expected = sorted([*ORDER_NAMES, *(f"f{n:03}" for n in range(300))], key=str.encode)
    driver = await local_driver(root)
    assert [o.name for o in await scanned(driver)] == expected
    (root / "f150").unlink()
    (root / "f1500").write_text("")
    (root / "a10").write_text("grown")
    again = [o.name for o in await scanned(driver)]
    assert again == sorted([*(set(expected) - {"f150"}), "f1500"], key=str.encode)
    await driver.drop()


async def test_a_rescan_of_the_same_names_remakes_what_changed(tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    for n in range(8):
        (root / f"f{(n * 5) % 8}.txt").write_text("x")
    (root / "sub").mkdir()
    (root / "later").symlink_to(root / "sub" / "target")  # dangling: left out
    driver = await local_driver(root)
    first = await scanned(driver)
    assert [o.name for o in first] == [*(f"f{n}.txt" for n in range(8)), "sub"]
    (root / "f3.txt").write_text("grown")
    os.utime(root / "f6.txt", (0, 0))
    second = {o.name: o for o in await scanned(driver)}
    assert [o.name for o in await scanned(driver)] == [o.name for o in first]
    before = {o.name: o for o in first}
    assert all(second[n] is before[n] for n in second if n not in ("f3.txt", "f6.txt"))
    assert second["f3.txt"].size == 5
    assert second["f6.txt"].modified == datetime(1970, 1, 1, tzinfo=UTC)
    # The same names: an entry left out that now counts, and one that no longer does.
    (root / "sub" / "target").mkdir()
    (root / "f1.txt").unlink()
    os.mkfifo(root / "f1.txt")
    names = [o.name for o in await scanned(driver)]
    assert names == ["f0.txt", *(f"f{n}.txt" for n in range(2, 8)), "later", "sub"]
    fresh = await local_driver(root)
    assert await scanned(fresh) == await scanned(driver)
    await driver.drop()
    await fresh.drop()


async def test_an_edited_storage_never_reuses_the_old_ones_objects(tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    Image.new("RGB", (4, 4)).save(root / "pic.png")
    plain = await local_driver(root)
    assert (await scanned(plain))[0].thumb == ""
    with_thumbs = await local_driver(root, thumbnail=True)
    assert (await scanned(with_thumbs))[0].thumb == THUMB_SELF
    await plain.drop()
    await with_thumbs.drop()


def test_seen_folders_keep_to_their_budget() -> None:
    seen = SeenFolders(budget=10)
    owner = object()
    objs = [Obj(name=f"f{n}", size=0, is_dir=False, modified=WHEN) for n in range(4)]
    names = [o.name for o in objs]

    def scan(count: int) -> Scan:
        return Scan(names * count, names * count, names * count, [], objs * count, [0] * 4 * count)

    for folder in ("/a", "/b", "/c"):
        seen.put(owner, folder, scan(1))
    assert len(seen) == 8
    assert seen.get(owner, "/a") == NOTHING  # the least recently listed went first
    assert seen.get(owner, "/b").objs is objs or seen.get(owner, "/b").objs == objs
    seen.put(owner, "/d", scan(3))  # bigger than the whole budget: not kept
    assert seen.get(owner, "/d") == NOTHING
    assert len(seen) == 8
    seen.forget(owner)
    assert len(seen) == 0
    assert seen.get(owner, "/b") == NOTHING


def test_new_obj_builds_what_the_constructor_does() -> None:
    made = new_obj("a.png", 3, False, WHEN, None, "/x/a.png", THUMB_SELF)
    assert made == Obj("a.png", 3, False, WHEN, None, "/x/a.png", thumb=THUMB_SELF)
    assert hash(made) == hash(Obj("a.png", 3, False, WHEN, None, "/x/a.png", thumb=THUMB_SELF))
    with pytest.raises(AttributeError):
        made.size = 4  # type: ignore[misc]
