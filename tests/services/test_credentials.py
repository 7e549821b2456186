"""The one credential check of the protocol servers, called directly: passwords,
keys, the guest and the admin token, with the API's lock-out."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from manifold.container import Services
from manifold.errors import Forbidden, TooManyAttempts, Unauthorized
from manifold.models import Perm
from manifold.services.auth.pubkeys import parse_public_key
from manifold.services.auth.users import UserInput
from tests.api.test_sshkeys import keygen
from tests.conftest import ADMIN_PASSWORD

DAV_BITS = int(Perm.WEBDAV_READ | Perm.WEBDAV_MANAGE)
CLIENT = "198.51.100.9"


async def make(services: Services, name: str, permission: int = DAV_BITS, **fields: object) -> int:
    user = await services.users.create(UserInput(name, f"{name}-pw", permission=permission))
    if fields:
        data = UserInput(name, "", permission=permission, **fields)  # type: ignore[arg-type]
        await services.users.update(user.id, data)
    return user.id


async def test_a_right_password_gives_the_caller_of_its_protocol(services: Services) -> None:
    await make(services, "dora")
    caller = await services.credentials.password("dora", "dora-pw", CLIENT, "webdav")
    assert (caller.user.username, caller.protocol, caller.client) == ("dora", "webdav", CLIENT)


@pytest.mark.parametrize(("name", "password"), [("dora", "wrong"), ("nobody", "x"), ("dora", "")])
async def test_wrong_credentials_are_unauthorized(
    services: Services, name: str, password: str
) -> None:
    await make(services, "dora")
    with pytest.raises(Unauthorized):
        await services.credentials.password(name, password, CLIENT, "webdav")


async def test_disabled_or_without_the_protocol_bit_is_forbidden(services: Services) -> None:
    await make(services, "off", disabled=True)
    await make(services, "ftponly", permission=int(Perm.FTP_READ))
    with pytest.raises(Forbidden):
        await services.credentials.password("off", "off-pw", CLIENT, "webdav")
    with pytest.raises(Forbidden):
        await services.credentials.password("ftponly", "ftponly-pw", CLIENT, "webdav")
    assert (await services.credentials.password("ftponly", "ftponly-pw", CLIENT, "ftp")).user


async def test_a_fresh_admin_lacks_the_protocol_bits_as_in_alist(services: Services) -> None:
    with pytest.raises(Forbidden):
        await services.credentials.password("admin", ADMIN_PASSWORD, CLIENT, "webdav")
    admin = await services.users.admin()
    permission = admin.permission | DAV_BITS
    await services.users.update(
        admin.id, UserInput("admin", "", role=admin.role, permission=permission)
    )
    caller = await services.credentials.password("admin", ADMIN_PASSWORD, CLIENT, "webdav")
    assert caller.user.is_admin


async def test_wrong_passwords_lock_out_as_api_logins_do(services: Services) -> None:
    await make(services, "dora")
    for _ in range(services.config.max_login_failures):
        with pytest.raises(Unauthorized):
            await services.credentials.password("dora", "guess", CLIENT, "webdav")
    with pytest.raises(TooManyAttempts):
        await services.credentials.password("dora", "dora-pw", CLIENT, "webdav")
    # The API's login counts in the same place.
    with pytest.raises(TooManyAttempts):
        await services.auth.login("dora", "dora-pw", "", CLIENT)


async def test_api_login_failures_count_for_the_protocols_too(services: Services) -> None:
    await make(services, "dora")
    for _ in range(services.config.max_login_failures):
        with pytest.raises(Exception):  # noqa: B017 - the API's own error class
            await services.auth.login("dora", "guess", "", CLIENT)
    with pytest.raises(TooManyAttempts):
        await services.credentials.password("dora", "dora-pw", CLIENT, "webdav")


async def test_a_password_change_ends_a_remembered_password_at_once(services: Services) -> None:
    uid = await make(services, "dora")
    await services.credentials.password("dora", "dora-pw", CLIENT, "webdav")
    await services.users.update(uid, UserInput("dora", "new-pw", permission=DAV_BITS))
    with pytest.raises(Unauthorized):
        await services.credentials.password("dora", "dora-pw", CLIENT, "webdav")
    assert await services.credentials.password("dora", "new-pw", CLIENT, "webdav")


async def test_an_edit_applies_to_the_next_request(services: Services) -> None:
    uid = await make(services, "dora")
    await services.credentials.password("dora", "dora-pw", CLIENT, "webdav")
    await services.users.update(uid, UserInput("dora", "", permission=DAV_BITS, disabled=True))
    with pytest.raises(Forbidden):
        await services.credentials.password("dora", "dora-pw", CLIENT, "webdav")


async def test_the_guest_needs_to_be_enabled_and_allowed(services: Services) -> None:
    with pytest.raises(Unauthorized):
        await services.credentials.guest("webdav", CLIENT)
    guest = await services.users.guest()
    await services.users.update(
        guest.id, UserInput("guest", "", role=guest.role, permission=0, disabled=False)
    )
    with pytest.raises(Forbidden):
        await services.credentials.guest("webdav", CLIENT)
    await services.users.update(
        guest.id, UserInput("guest", "", role=guest.role, permission=int(Perm.WEBDAV_READ))
    )
    assert (await services.credentials.guest("webdav", CLIENT)).user.is_guest


async def test_the_admin_token_acts_as_the_admin(services: Services) -> None:
    token = services.settings.get("token")
    assert (await services.credentials.bearer(token, CLIENT, "webdav")).user.is_admin
    with pytest.raises(Unauthorized):
        await services.credentials.bearer(token + "x", CLIENT, "webdav")


async def test_a_registered_key_logs_in_by_its_wire_form(
    services: Services, tmp_path_factory: pytest.TempPathFactory
) -> None:
    folder = tmp_path_factory.mktemp("keys")
    mine, other = keygen(folder, "mine", "-t", "ed25519"), keygen(folder, "other", "-t", "ed25519")
    uid = await make(services, "sam", permission=int(Perm.FTP_READ))
    user = await services.users.by_name("sam")
    assert user is not None and user.id == uid
    before = datetime.now(UTC)
    await services.sshkeys.add(user, "laptop", mine.text)
    blob = parse_public_key(mine.text).blob
    caller = await services.credentials.public_key("sam", blob, CLIENT)
    assert (caller.user.username, caller.protocol) == ("sam", "sftp")
    keys, _ = await services.sshkeys.page(user, 1, 0)
    assert keys[0].last_used_time >= before.replace(microsecond=0)
    with pytest.raises(Unauthorized):
        await services.credentials.public_key("sam", parse_public_key(other.text).blob, CLIENT)
