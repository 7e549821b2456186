"""How one object is shown: signs, thumbnails, names and types."""

from __future__ import annotations

import asyncio
import tracemalloc
from datetime import UTC, datetime

import orjson

from manifold.api.fs_render import FolderStyle, ListingRenderer
from manifold.api.fs_time import ORJSON_TIME
from manifold.container import Services
from manifold.models import THUMB_SELF, Obj
from manifold.services.fs.read import Listing

WHEN = datetime(2024, 5, 1, 10, 0, 0, 250000, tzinfo=UTC)


def obj(name: str, is_dir: bool = False, thumb: str = "") -> Obj:
    return Obj(name=name, size=0 if is_dir else 3, is_dir=is_dir, modified=WHEN, thumb=thumb)


async def test_a_thumb_served_here_is_signed_whatever_sign_all_says(services: Services) -> None:
    await services.settings.save([("sign_all", "false")])
    style = FolderStyle(services, "/l/pics", signed=False)
    entry = style.entry(obj("a b.png", thumb=THUMB_SELF))
    sign = services.signer.sign("/l/pics/a b.png")
    assert entry["thumb"] == f"/d/l/pics/a%20b.png?type=thumb&sign={sign}"
    assert entry["sign"] == ""


async def test_a_foreign_thumb_is_shown_as_it_is(services: Services) -> None:
    style = FolderStyle(services, "/l", signed=True)
    url = "https://cdn.example/t/1.png?x=1"
    assert style.entry(obj("a.png", thumb=url))["thumb"] == url
    assert style.entry(obj("a.png"))["thumb"] == ""


async def test_an_entry_encodes_as_alist_shows_it(services: Services) -> None:
    style = FolderStyle(services, "/l/", signed=False)
    shown = orjson.loads(style.encode(obj("song.MP3")))
    assert shown == {
        "id": "",
        "path": "",
        "name": "song.MP3",
        "size": 3,
        "is_dir": False,
        "modified": "2024-05-01T10:00:00.250000Z",
        "created": "2024-05-01T10:00:00.250000Z",
        "sign": services.signer.sign("/l/song.MP3"),
        "thumb": "",
        "type": 3,
        "hashinfo": "null",
        "hash_info": None,
    }
    folder = orjson.loads(style.encode(obj("x.mp3", is_dir=True)))
    assert (folder["type"], folder["sign"], folder["size"]) == (1, "", 0)


async def test_names_are_mapped_but_typed_and_signed_as_stored(services: Services) -> None:
    await services.settings.save([("filename_char_mapping", '{"/": "|", "?": "_"}')])
    style = FolderStyle(services, "/l", signed=True)
    entry = orjson.loads(orjson.dumps(style.entry(obj("a/b?.txt")), option=ORJSON_TIME))
    assert entry["name"] == "a|b_.txt"
    assert entry["type"] == 4
    assert entry["sign"] == services.signer.sign("/l/a/b?.txt")
    assert style.entry(obj("plain.txt"))["name"] == "plain.txt"


async def test_the_key_changes_with_whatever_shapes_an_entry(services: Services) -> None:
    before = FolderStyle(services, "/l", signed=False).key
    assert FolderStyle(services, "/l", signed=False).key == before
    await services.settings.save([("video_types", "mp4")])
    after_types = FolderStyle(services, "/l", signed=False).key
    assert after_types != before
    await services.settings.reset_token()
    assert FolderStyle(services, "/l", signed=False).key != after_types


async def test_a_kept_encoded_entry_holds_only_its_own_bytes(services: Services) -> None:
    """A listing keeps every encoded entry; each must cost its length in memory, not
    the few kilobytes orjson's result buffer is allocated with."""
    style = FolderStyle(services, "/l", signed=True)
    entries = [obj(f"holiday_2001-02-03_{n:07d}_final.jpg") for n in range(2000)]
    tracemalloc.start()
    try:
        kept = [style.encode(entry) for entry in entries]
        held, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    average = sum(len(fragment) for fragment in kept) / len(kept)
    assert held / len(kept) < average + 200


def big_listing(count: int, start: int = 0, stop: int | None = None) -> Listing:
    entries = [obj(f"f{n:06}.txt") for n in range(count)]
    stop = count if stop is None else stop
    return Listing(entries, start, stop, "", "", False, "Local", "/big", signed=False)


async def test_other_requests_run_while_a_big_listing_renders(services: Services) -> None:
    renderer = ListingRenderer(services)
    listing = big_listing(20_000)
    rendering = asyncio.create_task(renderer.body(listing))

    async def other_request() -> bool:
        return rendering.done()

    # Started after the rendering, answered before it ends: the encoding gives way.
    assert await asyncio.create_task(other_request()) is False
    body = orjson.loads(b"".join(await rendering))
    assert [e["name"] for e in body["content"]] == [o.name for o in listing.entries]
    assert body["total"] == 20_000


async def test_a_page_past_the_end_is_an_empty_array_and_an_empty_folder_null(
    services: Services,
) -> None:
    renderer = ListingRenderer(services)
    past = orjson.loads(b"".join(await renderer.body(big_listing(5, start=5, stop=5))))
    assert (past["content"], past["total"]) == ([], 5)
    empty = orjson.loads(b"".join(await renderer.body(big_listing(0))))
    assert (empty["content"], empty["total"]) == (None, 0)
