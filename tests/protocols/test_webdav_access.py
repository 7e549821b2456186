"""Who may do what over WebDAV: credentials, permission bits, base paths, folder
passwords and hide rules, all decided by the same services as the API."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

from manifold.container import Services
from manifold.models import Meta, Perm
from manifold.services.auth.users import UserInput
from tests.protocols.dav_helpers import DAV_BITS, FILE_BITS, Dav, user

D = "{DAV:}"
READ_ONLY = int(Perm.WEBDAV_READ)


def names(body: bytes) -> set[str]:
    return {
        (h.text or "").rstrip("/").rsplit("/", 1)[-1] for h in ET.fromstring(body).iter(D + "href")
    }


async def test_no_credentials_ask_for_basic_auth_but_options_proceeds(dav: Dav) -> None:
    nobody = dav.as_("")
    nobody.auth = {}
    answer = await nobody("PROPFIND", "/local", Depth="0")
    assert answer.status_code == 401
    assert answer.headers["www-authenticate"] == 'Basic realm="alist"'
    assert (await nobody("OPTIONS", "/local")).status_code == 200


async def test_wrong_password_is_401_and_locked_out_is_429(dav: Dav, services: Services) -> None:
    wrong = dav.as_("dora", "nope")
    for _ in range(services.config.max_login_failures):
        assert (await wrong("PROPFIND", "/", Depth="0")).status_code == 401
    assert (await dav("PROPFIND", "/", Depth="0")).status_code == 429


async def test_without_the_webdav_bits_is_403(dav: Dav, services: Services) -> None:
    await user(services, "apionly", permission=FILE_BITS)
    await user(services, "off", disabled=True)
    assert (await dav.as_("apionly")("PROPFIND", "/", Depth="0")).status_code == 403
    assert (await dav.as_("off")("PROPFIND", "/", Depth="0")).status_code == 403


async def test_a_read_only_user_reads_but_writes_nothing(
    dav: Dav, services: Services, disk: Path
) -> None:
    await user(services, "reader", permission=READ_ONLY | FILE_BITS)
    reader = dav.as_("reader")
    assert (await reader("GET", "/local/docs/readme.txt")).content == b"hello world"
    assert (await reader("PUT", "/local/x.txt", b"x")).status_code == 403
    assert (await reader("DELETE", "/local/docs/readme.txt")).status_code == 403
    assert (await reader("MKCOL", "/local/made")).status_code == 403
    proppatch = (
        '<?xml version="1.0"?><D:propertyupdate xmlns:D="DAV:"><D:set><D:prop>'
        '<x:a xmlns:x="urn:x">1</x:a></D:prop></D:set></D:propertyupdate>'
    )
    assert (await reader("PROPPATCH", "/local/docs/readme.txt", proppatch)).status_code == 403
    assert not (disk / "x.txt").exists() and (disk / "docs" / "readme.txt").exists()


async def test_a_base_path_is_the_root_and_cannot_be_left(
    dav: Dav, services: Services, disk: Path
) -> None:
    await user(services, "based", permission=DAV_BITS | FILE_BITS, base_path="/local/docs")
    based = dav.as_("based")
    listing = await based("PROPFIND", "/", Depth="1")
    assert names(listing.content) == {"dav", "readme.txt"}
    assert (await based("GET", "/readme.txt")).content == b"hello world"
    assert (await based("PROPFIND", "/%2e%2e/%2e%2e/empty", Depth="0")).status_code == 404
    escape = await based("COPY", "/readme.txt", Destination="/dav/%2e%2e/%2e%2e/local/x.txt")
    assert escape.status_code == 409  # /local/docs/local does not exist
    assert (disk / "docs" / "local" / "x.txt").exists() is False
    assert (disk / "local" / "x.txt").exists() is False


async def test_a_folder_password_keeps_out_users_without_the_bit(
    dav: Dav, services: Services
) -> None:
    await services.metas.create(Meta(0, "/local/docs", "secret", p_sub=True))
    await user(services, "plain", permission=DAV_BITS | FILE_BITS)
    await user(
        services, "trusted", permission=DAV_BITS | FILE_BITS | int(Perm.ACCESS_WITHOUT_PASSWORD)
    )
    assert (await dav.as_("plain")("GET", "/local/docs/readme.txt")).status_code == 403
    assert (await dav.as_("trusted")("GET", "/local/docs/readme.txt")).status_code == 200


async def test_hidden_files_are_left_out_of_listings(dav: Dav, services: Services) -> None:
    await services.metas.create(Meta(0, "/local", "", hide="^docs$", h_sub=True))
    await user(services, "plain", permission=DAV_BITS | FILE_BITS)
    shown = await dav.as_("plain")("PROPFIND", "/local", Depth="1")
    assert names(shown.content) == {"local", "empty"}
    await user(services, "seer", permission=DAV_BITS | FILE_BITS | int(Perm.SEE_HIDDEN))
    everything = await dav.as_("seer")("PROPFIND", "/local", Depth="1")
    assert names(everything.content) == {"local", "empty", "docs"}


async def test_an_enabled_guest_with_the_bit_reads_as_guest(dav: Dav, services: Services) -> None:
    guest = await services.users.guest()
    permission = int(Perm.WEBDAV_READ)
    await services.users.update(
        guest.id, UserInput("guest", "guest", role=guest.role, permission=permission)
    )
    as_guest = dav.as_("guest", "guest")
    assert (await as_guest("GET", "/local/docs/readme.txt")).content == b"hello world"
    assert (await as_guest("PUT", "/local/x", b"x")).status_code == 403


async def test_the_admin_token_acts_as_admin(dav: Dav, services: Services) -> None:
    admin = dav.as_("")
    admin.auth = {"Authorization": f"Bearer {services.settings.get('token')}"}
    assert (await admin("PROPFIND", "/local", Depth="0")).status_code == 207


async def admin_with(services: Services, permission: int) -> None:
    admin = await services.users.admin()
    data = UserInput(admin.username, "admin-pw", role=admin.role, permission=permission)
    await services.users.update(admin.id, data)


async def test_a_fresh_admin_lacks_the_webdav_bits(dav: Dav, services: Services) -> None:
    await admin_with(services, 0x30FF)  # what AList gives a new admin: bits 0-7, 12, 13
    admin = dav.as_((await services.users.admin()).username, "admin-pw")
    assert (await admin("PROPFIND", "/local", Depth="0")).status_code == 403
    assert (await admin("GET", "/local/docs/readme.txt")).status_code == 403


async def test_an_admin_with_webdav_read_alone_reads_and_changes_nothing(
    dav: Dav, services: Services, disk: Path
) -> None:
    await admin_with(services, 0x30FF | READ_ONLY)
    admin = dav.as_((await services.users.admin()).username, "admin-pw")
    assert (await admin("GET", "/local/docs/readme.txt")).content == b"hello world"
    assert (await admin("PUT", "/local/x.txt", b"x")).status_code == 403
    assert (await admin("MKCOL", "/local/made")).status_code == 403
    assert (await admin("DELETE", "/local/docs/readme.txt")).status_code == 403
    moved = await admin("MOVE", "/local/docs/readme.txt", Destination="/dav/local/moved.txt")
    assert moved.status_code == 403
    assert sorted(p.name for p in disk.iterdir()) == ["docs", "empty"]
    assert (disk / "docs" / "readme.txt").exists()


async def test_an_admin_with_both_webdav_bits_writes(
    dav: Dav, services: Services, disk: Path
) -> None:
    await admin_with(services, 0x30FF | DAV_BITS)
    admin = dav.as_((await services.users.admin()).username, "admin-pw")
    assert (await admin("PUT", "/local/x.txt", b"x")).status_code == 201
    assert (disk / "x.txt").read_bytes() == b"x"


async def test_the_admin_token_needs_no_bits(dav: Dav, services: Services, disk: Path) -> None:
    await admin_with(services, 0x30FF)
    admin = dav.as_("")
    admin.auth = {"Authorization": f"Bearer {services.settings.get('token')}"}
    assert (await admin("PUT", "/local/x.txt", b"x")).status_code == 201
    assert (disk / "x.txt").read_bytes() == b"x"
