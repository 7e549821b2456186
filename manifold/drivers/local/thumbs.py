"""Thumbnails for the Local driver: PNGs 144 pixels wide, as AList makes them.

Images are decoded with Pillow, videos are first cut to one frame by ffmpeg (only
when ``ffmpeg`` and ``ffprobe`` are on the PATH). Decoding and resizing run in a
worker thread, ffmpeg as a child process, so the event loop never waits on them.

Every thumbnail is written to a file named ``alist_thumb_<md5 of the host path>.png``
in the storage's ``thumb_cache_folder``, or in a private temporary folder removed
on ``close`` when none is set; a kept file is used while it is newer than its
source. A file that cannot be decoded raises ``ServerError``; it never escapes as
a library exception.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import io
import os
import secrets
import shutil
import tempfile
import threading
import warnings
from dataclasses import dataclass
from typing import IO

from PIL import Image, ImageOps, UnidentifiedImageError

from manifold.concurrency import DISK_POOL, MEDIA_POOL, SingleFlight, run_in
from manifold.errors import InvalidRequest, NotSupported, ServerError
from manifold.localfs import discard_tree

WIDTH = 144
THUMB_PREFIX = "alist_thumb_"
FFMPEG_TIMEOUT = 60.0

# AList's default ``image_types`` and ``video_types``: a driver cannot read settings.
IMAGE_EXTENSIONS = frozenset(
    ["jpg", "tiff", "jpeg", "png", "gif", "bmp", "svg", "ico", "swf", "webp"]
)
VIDEO_EXTENSIONS = frozenset(["mp4", "mkv", "avi", "mov", "rmvb", "webm", "flv", "m3u8"])


def extension(name: str) -> str:
    """AList's ``utils.Ext``: lower-cased text after the last dot, or ``""``."""
    dot = name.rfind(".")
    return name[dot + 1 :].lower() if dot >= 0 else ""


@dataclass(frozen=True, slots=True)
class VideoPosition:
    """Where a video's frame is taken: seconds, or a fraction of the duration."""

    value: float
    fraction: bool

    @classmethod
    def parse(cls, text: str) -> VideoPosition:
        text = text or "20%"
        fraction = text.endswith("%")
        try:
            value = float(text[:-1] if fraction else text)
        except ValueError:
            raise InvalidRequest(f"invalid video_thumb_pos value: {text}") from None
        if fraction and not 0 <= value <= 100:
            raise InvalidRequest(
                f"invalid video_thumb_pos value: {text}, "
                "the precentage must be a number between 0 and 100"
            )
        if value < 0:
            raise InvalidRequest(
                f"invalid video_thumb_pos value: {text}, the time must be a positive number"
            )
        return cls(value / 100 if fraction else value, fraction)

    def seconds(self, duration: float) -> float:
        return duration * self.value if self.fraction else min(self.value, duration)


def parse_concurrency(text: str) -> int:
    """``thumb_concurrency``: a count of parallel generations; 0 means no limit."""
    try:
        value = int(text or "0")
    except ValueError:
        raise InvalidRequest(f"invalid thumb_concurrency value: {text}") from None
    if value < 0:
        raise InvalidRequest(f"invalid thumb_concurrency value: {text}")
    return value


def ffmpeg_available() -> bool:
    return shutil.which("ffmpeg") is not None and shutil.which("ffprobe") is not None


class Thumbnailer:
    def __init__(
        self, cache_folder: str, concurrency: int, position: VideoPosition, folder_mode: int
    ) -> None:
        self._cache_folder = cache_folder
        self._folder = ""
        self._closed = True
        self._lock = threading.Lock()
        self._position = position
        self._folder_mode = folder_mode
        self._limit = asyncio.Semaphore(concurrency) if concurrency > 0 else None
        # Concurrent requests for one thumbnail share a single generation.
        self._flight: SingleFlight[str] = SingleFlight()
        self.videos = ffmpeg_available()

    def start(self) -> None:
        """Create the cache folder, if one is set (blocking: run it in a worker thread)."""
        if self._cache_folder:
            os.makedirs(self._cache_folder, self._folder_mode, exist_ok=True)
            self._folder = self._cache_folder
        self._closed = False

    def close(self) -> None:
        """Remove the private folder, if one was made (blocking)."""
        with self._lock:
            if self._folder and not self._cache_folder:
                discard_tree(self._folder)
            self._folder = ""
            self._closed = True

    def _where(self) -> str:
        # The private folder is made on first use: most storages never show a thumbnail.
        with self._lock:
            if self._closed:
                raise ServerError("storage not init")
            if not self._folder:
                self._folder = tempfile.mkdtemp(prefix="manifold-thumbs-")
            return self._folder

    def offers(self, name: str) -> bool:
        """Whether a listing shows a thumbnail for a file of this name."""
        ext = extension(name)
        return ext in IMAGE_EXTENSIONS or (self.videos and ext in VIDEO_EXTENSIONS)

    async def thumbnail(self, source: str, name: str) -> str:
        """The path of the PNG thumbnail of the host file ``source``."""
        if self._cache_folder and name.startswith(THUMB_PREFIX):
            return source  # a kept thumbnail is its own thumbnail, as in AList
        digest = hashlib.md5(source.encode(), usedforsecurity=False).hexdigest()
        folder = await run_in(DISK_POOL, self._where)
        target = os.path.join(folder, f"{THUMB_PREFIX}{digest}.png")
        if await run_in(DISK_POOL, _fresh, target, source):
            return target
        return await self._flight.run(target, lambda: self._make(source, name, target))

    async def _make(self, source: str, name: str, target: str) -> str:
        async with self._limit if self._limit is not None else contextlib.nullcontext():
            if extension(name) in VIDEO_EXTENSIONS:
                try:
                    frame = await self._video_frame(source)
                except ServerError as exc:
                    # ffmpeg's messages start with the input's path on the host.
                    exc.message = exc.message.replace(source, name)
                    raise
                png = await run_in(MEDIA_POOL, render_png, io.BytesIO(frame))
            else:
                png = await run_in(MEDIA_POOL, _render_file, source)
            await run_in(DISK_POOL, _write_atomically, target, png)
        return target

    async def _video_frame(self, source: str) -> bytes:
        if not self.videos:
            raise NotSupported("video thumbnails need ffmpeg and ffprobe")
        probed = await _run(
            "ffprobe", "-v", "error", "-show_entries", "format=duration",
            "-of", "default=noprint_wrappers=1:nokey=1", source,
        )  # fmt: skip
        try:
            duration = float(probed.strip() or b"0")
        except ValueError:
            raise ServerError("failed get thumb: video duration unknown") from None
        seek = f"{self._position.seconds(duration):f}"
        return await _run(
            "ffmpeg", "-loglevel", "error", "-ss", seek, "-noaccurate_seek", "-i", source,
            "-vframes", "1", "-f", "image2", "-vcodec", "mjpeg", "pipe:1",
        )  # fmt: skip


async def _run(*argv: str) -> bytes:
    """Standard output of a child process; ``ServerError`` when it fails or hangs."""
    try:
        process = await asyncio.create_subprocess_exec(
            *argv,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
    except OSError as exc:
        raise ServerError(f"failed get thumb: {argv[0]}: {exc.strerror}") from exc
    try:
        out, err = await asyncio.wait_for(process.communicate(), FFMPEG_TIMEOUT)
    except BaseException:
        with contextlib.suppress(ProcessLookupError):
            process.kill()
        await process.wait()
        raise
    if process.returncode != 0 or not out:
        message = err.decode(errors="replace").strip().splitlines()[-1:] or ["no output"]
        raise ServerError(f"failed get thumb: {argv[0]}: {message[0]}")
    return out


def _fresh(target: str, source: str) -> bool:
    try:
        return os.stat(target).st_mtime_ns >= os.stat(source).st_mtime_ns
    except FileNotFoundError:
        return False


def _render_file(source: str) -> bytes:
    with open(source, "rb") as file:
        return render_png(file)


def render_png(data: IO[bytes]) -> bytes:
    """A PNG ``WIDTH`` pixels wide of the image in ``data``, upright per its EXIF tag."""
    try:
        with warnings.catch_warnings():
            # An image of absurd size is refused rather than decoded into memory.
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            with Image.open(data) as image:
                image.draft("RGB", (WIDTH, WIDTH))
                upright = ImageOps.exif_transpose(image)
                return _encode(_resized(upright))
    except UnidentifiedImageError:
        # Its text names the file object, and with it the path on the host.
        raise ServerError("failed get thumb: cannot identify image file") from None
    except OSError as exc:
        raise ServerError(f"failed get thumb: {exc.strerror or type(exc).__name__}") from exc
    except (Image.DecompressionBombError, Image.DecompressionBombWarning, ValueError,
            SyntaxError) as exc:  # fmt: skip
        raise ServerError(f"failed get thumb: {exc}") from exc


def _resized(image: Image.Image) -> Image.Image:
    width, height = image.size
    if width < 1 or height < 1:
        raise ValueError("image has no pixels")
    mode = "RGBA" if "A" in image.getbands() or "transparency" in image.info else "RGB"
    if image.mode not in ("RGB", "RGBA", "L", "LA"):
        image = image.convert(mode)
    size = (WIDTH, max(1, round(height * WIDTH / width)))
    return image.resize(size, Image.Resampling.LANCZOS)


def _encode(image: Image.Image) -> bytes:
    out = io.BytesIO()
    image.save(out, format="PNG")
    return out.getvalue()


def _write_atomically(target: str, data: bytes) -> None:
    # Readers of the old thumbnail keep their open file; a new one appears whole.
    temp = f"{target}.{secrets.token_hex(4)}.tmp"
    try:
        with open(temp, "wb") as file:
            file.write(data)
        os.replace(temp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp)
        raise
