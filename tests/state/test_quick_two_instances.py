"""The quick /api/me of one instance after a change made through another: two
instances on one SQLite database (the change bus a polled table), each a real server,
the token's /api/me asked on a kept-alive connection to the second, where the HTTP
protocol answers it itself (``ManifoldApp.quick``). Once the second has heard of the
change (``synced``), none of its answers may be the one from before."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AsyncExitStack
from dataclasses import dataclass
from pathlib import Path

import pytest

from manifold.services.auth.service import DISABLED
from tests.api.live_server import Connection, connected, serving
from tests.api.test_quick_answers import edit_user, me_on
from tests.conftest import Api, open_api
from tests.state.conftest import instances


@dataclass(slots=True)
class Pair:
    a: Api  # where the changes are made
    b: Api  # where the token's /api/me is asked, on ``kept``
    kept: Connection

    async def synced(self) -> None:
        """Everything either announced has been applied by the other."""
        for _ in range(2):
            for api in (self.a, self.b):
                await api.services.state.bus.sync()


@pytest.fixture
async def pair(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Pair]:
    async with instances(request, tmp_path) as (one, two), AsyncExitStack() as stack:
        a = await stack.enter_async_context(open_api(one))
        b = await stack.enter_async_context(open_api(two))
        url = await stack.enter_async_context(serving(two))
        yield Pair(a, b, await stack.enter_async_context(connected(url)))


async def user_kept_on_b(pair: Pair, name: str) -> tuple[int, str]:
    """A user made on a, its token, and its /api/me answered quickly on b."""
    user_id = await pair.a.make_user(name, f"{name}-pw", base_path="/", permission=0)
    await pair.synced()
    token = await pair.b.login(name, f"{name}-pw")
    assert (await me_on(pair.kept, token))["data"]["username"] == name
    return user_id, token


async def test_a_user_edited_on_one_shows_on_a_kept_connection_to_the_other(pair: Pair) -> None:
    user_id, token = await user_kept_on_b(pair, "jude")
    await edit_user(pair.a, user_id, "jude", base_path="/team", permission=1 << 4)
    await pair.synced()
    shown = (await me_on(pair.kept, token))["data"]
    assert (shown["base_path"], shown["permission"]) == ("/team", 1 << 4)


async def test_a_user_disabled_on_one_is_refused_on_a_kept_connection_to_the_other(
    pair: Pair,
) -> None:
    user_id, token = await user_kept_on_b(pair, "kit")
    await edit_user(pair.a, user_id, "kit", disabled=True)
    await pair.synced()
    refused = await me_on(pair.kept, token)
    assert (refused["code"], refused["message"]) == (401, DISABLED)


async def test_a_password_changed_on_one_refuses_the_token_on_a_kept_connection_to_the_other(
    pair: Pair,
) -> None:
    user_id, token = await user_kept_on_b(pair, "lou")
    await edit_user(pair.a, user_id, "lou", password="lou-new-pw")
    await pair.synced()
    refused = await me_on(pair.kept, token)
    assert (refused["code"], refused["message"]) == (401, "Password has been changed, login please")


async def test_a_logout_on_one_refuses_the_token_on_a_kept_connection_to_the_other(
    pair: Pair,
) -> None:
    _, token = await user_kept_on_b(pair, "max")
    assert (await pair.a.get("/api/auth/logout", token=token))["code"] == 200
    await pair.synced()
    refused = await me_on(pair.kept, token)
    assert (refused["code"], refused["message"]) == (401, "token is invalidated")
