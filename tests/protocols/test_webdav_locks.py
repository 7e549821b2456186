"""WebDAV locks through the in-process app: a lock is its holder's, taking one (and
setting properties) needs the write permission, and a lock never empties a file."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from manifold.container import Services
from manifold.models import Meta
from manifold.protocols.webdav.locks import Lock
from manifold.protocols.webdav.shared_locks import lock_store
from manifold.services.auth.service import Caller
from tests.protocols.dav_helpers import DAV_BITS, Dav, user

D = "{DAV:}"
LOCK_BODY = (
    '<?xml version="1.0"?><D:lockinfo xmlns:D="DAV:"><D:lockscope><D:exclusive/>'
    "</D:lockscope><D:locktype><D:write/></D:locktype><D:owner>dora</D:owner></D:lockinfo>"
)
DISCOVERY = (
    '<?xml version="1.0"?><D:propfind xmlns:D="DAV:"><D:prop><D:lockdiscovery/>'
    "</D:prop></D:propfind>"
)
PROPPATCH = (
    '<?xml version="1.0"?><D:propertyupdate xmlns:D="DAV:"><D:set><D:prop>'
    '<x:a xmlns:x="urn:x">1</x:a></D:prop></D:set></D:propertyupdate>'
)
# WebDAV read and manage, rename, move, copy, remove: all but the write bit (3).
NO_WRITE = DAV_BITS | 0xF0


def tokens_shown(body: bytes) -> list[str]:
    return [
        (href.text or "")
        for token in ET.fromstring(body).iter(D + "locktoken")
        for href in token.iter(D + "href")
    ]


def active_locks(body: bytes) -> int:
    return sum(1 for _ in ET.fromstring(body).iter(D + "activelock"))


@pytest.fixture
async def eve(dav: Dav, services: Services) -> Dav:
    await user(services, "eve")
    return dav.as_("eve")


async def locked(dav: Dav, path: str) -> str:
    answer = await dav("LOCK", path, LOCK_BODY, Timeout="Second-600")
    assert answer.status_code in (200, 201), answer.text
    return answer.headers["lock-token"]


async def test_another_user_cannot_write_through_a_lock(dav: Dav, eve: Dav, disk: Path) -> None:
    token = await locked(dav, "/local/docs/readme.txt")
    guarded = f"({token})"
    assert (await eve("PUT", "/local/docs/readme.txt", b"eve's", If=guarded)).status_code == 423
    file = "/local/docs/readme.txt"
    assert (await eve("DELETE", file, If=guarded)).status_code == 423
    moved = await eve("MOVE", file, If=guarded, Destination="/dav/local/elsewhere.txt")
    assert moved.status_code == 423
    assert (await eve("PROPPATCH", file, PROPPATCH, If=guarded)).status_code == 423
    tagged = f"</dav{file}> ({token})"  # the folder's DELETE ends the lock below it
    assert (await eve("DELETE", "/local/docs", If=tagged)).status_code == 423
    assert (disk / "docs" / "readme.txt").read_bytes() == b"hello world"
    assert (await dav("PUT", "/local/docs/readme.txt", b"dora's", If=guarded)).status_code == 204
    assert (disk / "docs" / "readme.txt").read_bytes() == b"dora's"


async def test_another_user_cannot_unlock_or_refresh_a_lock(dav: Dav, eve: Dav) -> None:
    token = await locked(dav, "/local/docs/readme.txt")
    assert (await eve("UNLOCK", "/local/docs/readme.txt", Lock_Token=token)).status_code == 403
    refreshed = await eve("LOCK", "/local/docs/readme.txt", If=f"({token})")
    assert refreshed.status_code == 412
    assert (await eve("PUT", "/local/docs/readme.txt", b"x", If=f"({token})")).status_code == 423
    assert (await dav("LOCK", "/local/docs/readme.txt", If=f"({token})")).status_code == 200
    assert (await dav("UNLOCK", "/local/docs/readme.txt", Lock_Token=token)).status_code == 204
    assert (await eve("PUT", "/local/docs/readme.txt", b"x")).status_code == 204


async def test_lockdiscovery_shows_the_token_to_its_holder_alone(dav: Dav, eve: Dav) -> None:
    token = await locked(dav, "/local/docs/readme.txt")
    for depth, path in (("0", "/local/docs/readme.txt"), ("1", "/local/docs")):
        theirs = await eve("PROPFIND", path, DISCOVERY, Depth=depth)
        assert active_locks(theirs.content) == 1
        assert tokens_shown(theirs.content) == []
        assert token.strip("<>") not in theirs.text
        mine = await dav("PROPFIND", path, DISCOVERY, Depth=depth)
        assert tokens_shown(mine.content) == [token.strip("<>")]


async def test_proppatch_and_lock_need_the_write_permission(
    dav: Dav, services: Services, disk: Path
) -> None:
    await user(services, "reader", permission=NO_WRITE)
    reader = dav.as_("reader")
    assert (await reader("PROPPATCH", "/local/docs/readme.txt", PROPPATCH)).status_code == 403
    assert (await reader("LOCK", "/local/docs/readme.txt", LOCK_BODY)).status_code == 403
    assert (await reader("LOCK", "/local/new.txt", LOCK_BODY)).status_code == 403
    assert not (disk / "new.txt").exists()
    # A meta that lets anyone write in the folder lets them, as it lets them PUT there.
    await services.metas.create(Meta(0, "/local/docs", password="", write=True))
    assert (await reader("PROPPATCH", "/local/docs/readme.txt", PROPPATCH)).status_code == 207
    assert (await reader("LOCK", "/local/docs/readme.txt", LOCK_BODY)).status_code == 200


@pytest.fixture
async def racing_store(
    services: Services, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[list[bytes]]:
    """The lock store's ``create`` made to let another client store a file at the
    locked path first, through the file services: a PUT that lands between the LOCK's
    look-up of the name and its placeholder. Yields the bytes that client stores."""
    stored: list[bytes] = []
    store_class = type(lock_store(services.state))
    create = store_class.create
    await user(services, "otto")
    otto = await services.users.by_name("otto")
    assert otto is not None
    caller = Caller(otto, "127.0.0.1", protocol="webdav")

    async def create_after_a_put(self: object, lock: Lock) -> None:
        await create(self, lock)  # type: ignore[arg-type]
        data = b"otto's report"
        await services.ops.put(caller, "/local/race.docx", _once(data), len(data))
        stored.append(data)

    monkeypatch.setattr(store_class, "create", create_after_a_put)
    yield stored


async def _once(data: bytes) -> AsyncIterator[bytes]:
    yield data


async def test_a_lock_on_a_name_taken_meanwhile_keeps_the_file(
    dav: Dav, disk: Path, racing_store: list[bytes]
) -> None:
    answer = await dav("LOCK", "/local/race.docx", LOCK_BODY, Timeout="Second-60")
    assert racing_store == [b"otto's report"]
    assert answer.status_code == 200  # the existing file is what is locked
    assert (disk / "race.docx").read_bytes() == b"otto's report"
    token = answer.headers["lock-token"]
    assert (await dav("PUT", "/local/race.docx", b"dora's", If=f"({token})")).status_code == 204
