"""Strm over a Local storage: the read-only conformance checks, what the ``.strm`` files
hold (the ``/d`` link, signed as ``/d`` asks, encoded or not), what is passed through or
left out, and a real video played by ffprobe from the link a ``.strm`` file holds,
served by a running server."""

from __future__ import annotations

import asyncio
import json
import subprocess
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import pytest

from manifold.container import Services
from manifold.drivers.strm.driver import StrmDriver
from manifold.drivers.strm.meta import Addition
from manifold.errors import InvalidRequest, ObjectNotFound
from manifold.models import Storage
from manifold.testing.conformance import DriverConformance, DriverFactory, read_obj
from tests.api.live_server import serving

SITE = "http://media.example:5244"


async def mount_local(services: Services, mount_path: str, root: Path, **extra: Any) -> None:
    addition = json.dumps({"root_folder_path": str(root)})
    await services.storages.create(Storage(0, mount_path, "Local", addition=addition, **extra))


async def strm_of(services: Services, paths: str, **options: Any) -> StrmDriver:
    options.setdefault("siteUrl", SITE)
    driver = StrmDriver(Storage(9997, "/strm", "Strm"), Addition(paths=paths, **options))
    driver.tree = services.tree
    driver.resources = services.storages.resources
    await driver.init()
    return driver


@pytest.fixture
async def media(services: Services, tmp_path: Path) -> Path:
    """/media (Local) holding movies/ with a video, its subtitles, a note and a folder."""
    movies = tmp_path / "media" / "movies"
    (movies / "sub").mkdir(parents=True)
    (movies / "Film one.mp4").write_bytes(b"v" * 3000)
    (movies / "Film one.srt").write_bytes(b"1\n00:00:01,000 --> 00:00:02,000\nhi\n")
    (movies / "notes.txt").write_bytes(b"left out")
    (movies / "sub" / "b.MKV").write_bytes(b"k" * 10)
    await mount_local(services, "/media", tmp_path / "media")
    return movies


class TestStrmConformance(DriverConformance):
    @pytest.fixture
    async def driver_factory(self, services: Services, media: Path) -> DriverFactory:
        async def build() -> StrmDriver:
            return await strm_of(services, "/media/movies")

        return build


def signed_link(services: Services, path: str, site: str = SITE) -> str:
    return f"{site}/d{quote(path)}?sign={services.signer.sign(path)}"


async def test_videos_show_as_strm_files_holding_their_signed_link(
    services: Services, media: Path
) -> None:
    strm = await strm_of(services, "/media/movies")
    listed = {o.name: o for o in await strm.list(await strm.root_obj())}
    assert sorted(listed) == ["Film one.srt", "Film one.strm", "sub"]
    content = await read_obj(strm, listed["Film one.strm"])
    assert content.decode() == signed_link(services, "/media/movies/Film one.mp4")
    assert listed["Film one.strm"].size == len(content)
    assert await read_obj(strm, listed["Film one.srt"]) == (media / "Film one.srt").read_bytes()
    (inner,) = await strm.list(listed["sub"])
    assert inner.name == "b.strm"  # extensions match in any letter case
    found = await strm.get("/sub/b.strm")
    assert await read_obj(strm, found) == signed_link(services, "/media/movies/sub/b.MKV").encode()


async def test_links_follow_the_options(services: Services, media: Path) -> None:
    await services.settings.save([("sign_all", "false")])
    plain = await strm_of(services, "/media/movies", encodePath=False, withoutUrl=True)
    content = await read_obj(plain, await plain.get("/Film one.strm"))
    assert content == b"/d/media/movies/Film one.mp4"  # no sign is asked: none is given
    signed = await strm_of(services, "/media/movies", withSign=True, PathPrefix="/p/")
    content = await read_obj(signed, await signed.get("/Film one.strm"))
    sign = services.signer.sign("/media/movies/Film one.mp4")
    assert content.decode() == f"{SITE}/p/media/movies/Film%20one.mp4?sign={sign}"


async def test_types_sizes_and_names(services: Services, media: Path, tmp_path: Path) -> None:
    strm = await strm_of(
        services,
        "films:/media/movies\nother:/media/movies/sub",
        filterFileTypes="mkv",
        downloadFileTypes="txt",
        minFileSize=0,
    )
    root = await strm.root_obj()
    assert [o.name for o in await strm.list(root)] == ["films", "other"]
    films = await strm.get("/films")
    assert sorted(o.name for o in await strm.list(films)) == ["notes.txt", "sub"]
    assert [o.name for o in await strm.list(await strm.get("/other"))] == ["b.strm"]
    with pytest.raises(ObjectNotFound):
        await strm.get("/films/Film one.strm")
    big_only = await strm_of(services, "/media/movies", minFileSize=1)
    assert sorted(o.name for o in await big_only.list(await big_only.root_obj())) == [
        "Film one.srt",
        "sub",
    ]


@pytest.mark.parametrize(
    ("paths", "options", "message"),
    [
        ("", {}, "paths is required"),
        ("/strm/x", {}, "inside the strm storage"),
        ("/", {}, "holds the strm storage"),
        ("/media/movies", {"siteUrl": ""}, "siteUrl is required"),
        ("/media/movies", {"siteUrl": "media.example"}, "must start with http"),
    ],
)
async def test_bad_options_are_refused(
    services: Services, media: Path, paths: str, options: dict[str, Any], message: str
) -> None:
    with pytest.raises(InvalidRequest, match=message):
        await strm_of(services, paths, **options)


def make_video(path: Path) -> None:
    subprocess.run(
        ["ffmpeg", "-v", "error", "-f", "lavfi", "-i", "testsrc=duration=2:size=64x48:rate=5",
         "-c:v", "mpeg4", "-y", str(path)],
        check=True, timeout=120,
    )  # fmt: skip


async def probe(url: str) -> dict[str, Any]:
    process = await asyncio.create_subprocess_exec(
        "ffprobe", "-v", "error", "-show_entries", "format=duration:stream=codec_name",
        "-of", "json", url, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    out, err = await asyncio.wait_for(process.communicate(), 120)
    assert process.returncode == 0, err.decode()
    found: dict[str, Any] = json.loads(out)
    return found


async def test_a_media_player_plays_the_link_a_strm_file_holds(
    services: Services, tmp_path: Path
) -> None:
    (tmp_path / "videos").mkdir()
    await asyncio.to_thread(make_video, tmp_path / "videos" / "clip one.mp4")
    await mount_local(services, "/videos", tmp_path / "videos", enable_sign=True)
    async with serving(services) as base:
        addition = json.dumps({"paths": "/videos", "siteUrl": base})
        await services.storages.create(Storage(0, "/shows", "Strm", addition=addition))
        strm_path = "/shows/clip one.strm"
        async with httpx.AsyncClient(base_url=base) as client:
            url = f"/d{quote(strm_path)}?sign={services.signer.sign(strm_path)}"
            answer = await client.get(url)
            assert answer.status_code == 200, answer.text
            link = answer.text
            assert link.startswith(f"{base}/d/videos/clip%20one.mp4?sign=")
            unsigned = await client.get(link.split("?")[0].removeprefix(base))
            assert unsigned.status_code == 401  # the storage signs: the link needs its sign
        probed = await probe(link)
    assert probed["streams"][0]["codec_name"] == "mpeg4"
    assert float(probed["format"]["duration"]) == pytest.approx(2.0, abs=0.5)
