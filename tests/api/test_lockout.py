"""Login lock-out against attackers who mix their guesses with other logins.

Failures are counted per client address and per username; only a success for the
same address and name clears them. Each test runs an attack against ``admin``,
guessing either the password or, when the password is known, the 2FA code.
"""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import pyotp
import pytest
import redis.asyncio as aioredis

from manifold.container import Services
from manifold.services.auth.limiter import LoginLimiter, MemoryLoginLimiter
from manifold.services.auth.passwords import static_hash
from manifold.state.counters import DatabaseLoginLimiter, RedisLoginLimiter
from tests.api.test_auth import LOCKED, enable_2fa, login, wrong_code
from tests.conftest import ADMIN_PASSWORD, Api, open_api

MAX_FAILURES = 5
LOCKOUT_SECONDS = 300.0


@dataclass(slots=True)
class Target:
    """The admin account under attack; with ``otp_secret`` the password is known."""

    otp_secret: str = ""

    async def guess(self, api: Api) -> dict[str, Any]:
        if self.otp_secret:
            return await login(api, "admin", ADMIN_PASSWORD, otp_code=wrong_code(self.otp_secret))
        return await login(api, "admin", "wrong-password")

    async def right(self, api: Api) -> dict[str, Any]:
        code = pyotp.TOTP(self.otp_secret).now() if self.otp_secret else ""
        return await login(api, "admin", ADMIN_PASSWORD, otp_code=code)


class Clock:
    def __init__(self) -> None:
        self.now = 1_000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture(params=["password", "2fa code"])
async def target(request: pytest.FixtureRequest, api: Api) -> Target:
    await api.make_user("bob", "bob-pw")
    await api.make_user("carol", "carol-pw", disabled=True)
    if request.param == "password":
        return Target()
    return Target(await enable_2fa(api, await api.login()))


@pytest.fixture(params=["memory", "database", "redis"], autouse=True)
async def limiter(
    request: pytest.FixtureRequest, services: Services
) -> AsyncIterator[LoginLimiter]:
    """Every test runs against each implementation of the login limiter."""
    scope = "login-" + secrets.token_hex(4)
    chosen: LoginLimiter
    if request.param == "memory":
        chosen = MemoryLoginLimiter(MAX_FAILURES, LOCKOUT_SECONDS)
    elif request.param == "database":
        chosen = DatabaseLoginLimiter(services.engine, scope, MAX_FAILURES, LOCKOUT_SECONDS)
    else:
        client = aioredis.Redis.from_url(request.getfixturevalue("redis_server").url)
        chosen = RedisLoginLimiter(client, scope, MAX_FAILURES, LOCKOUT_SECONDS)
    services.auth.limiter = chosen
    yield chosen
    if request.param == "redis":
        await client.aclose()


@pytest.fixture
def clock(limiter: LoginLimiter) -> Clock:
    fake = Clock()
    assert isinstance(limiter, MemoryLoginLimiter | DatabaseLoginLimiter | RedisLoginLimiter)
    limiter.clock = fake
    return fake


async def own_login(api: Api) -> dict[str, Any]:
    return await login(api, "bob", "bob-pw")


async def own_login_hash(api: Api) -> dict[str, Any]:
    credentials = {"username": "bob", "password": static_hash("bob-pw")}
    return await api.post("/api/auth/login/hash", credentials, token="")


async def default_guest(api: Api) -> dict[str, Any]:
    return await login(api, "guest", "guest")


async def disabled_user(api: Api) -> dict[str, Any]:
    return await login(api, "carol", "carol-pw")


INTERLEAVED: dict[str, Callable[[Api], Awaitable[dict[str, Any]]]] = {
    "another user's login": own_login,
    "another user's hashed login": own_login_hash,
    "the disabled default guest": default_guest,
    "a disabled user's right password": disabled_user,
}


@pytest.mark.parametrize("interleaved", INTERLEAVED.values(), ids=INTERLEAVED.keys())
async def test_guesses_interleaved_with_other_logins_still_lock(
    api: Api,
    target: Target,
    interleaved: Callable[[Api], Awaitable[dict[str, Any]]],
) -> None:
    for _ in range(MAX_FAILURES):
        assert (await target.guess(api))["code"] in (400, 402, 429)
        await interleaved(api)
    assert await target.right(api) == {"code": 429, "message": LOCKED, "data": None}


async def test_a_name_is_locked_from_every_address(
    api: Api, services: Services, target: Target
) -> None:
    for n in range(MAX_FAILURES):
        async with open_api(services, f"198.51.100.{n}") as attacker:
            assert (await target.guess(attacker))["code"] in (400, 402)
    async with open_api(services, "192.0.2.50") as elsewhere:
        assert await target.right(elsewhere) == {"code": 429, "message": LOCKED, "data": None}
        assert (await own_login(elsewhere))["code"] == 200


async def test_a_success_clears_its_own_failures_only(api: Api, target: Target) -> None:
    for _ in range(MAX_FAILURES - 1):
        assert (await login(api, "bob", "wrong"))["code"] == 400
    assert (await own_login(api))["code"] == 200
    for _ in range(MAX_FAILURES):
        assert (await target.guess(api))["code"] in (400, 402)
    assert (await target.right(api))["code"] == 429


async def test_guesses_spread_over_names_lock_the_address(api: Api, services: Services) -> None:
    await api.make_user("bob", "bob-pw")
    for n in range(MAX_FAILURES):
        assert (await login(api, f"name-{n}", "x"))["code"] == 400
    assert (await login(api, "bob", "bob-pw"))["code"] == 429
    async with open_api(services, "192.0.2.50") as elsewhere:
        assert (await login(elsewhere, "bob", "bob-pw"))["code"] == 200


async def test_parallel_guesses_past_the_limit_are_not_checked(api: Api, target: Target) -> None:
    # Three times the limit at once: each is counted before its check, so only the
    # first ``MAX_FAILURES`` counted reach the check at all, and the rest are locked.
    answers = await asyncio.gather(*(target.guess(api) for _ in range(3 * MAX_FAILURES)))
    checked = [body for body in answers if body["code"] != 429]
    assert len(checked) <= MAX_FAILURES, [body["code"] for body in answers]
    assert await target.right(api) == {"code": 429, "message": LOCKED, "data": None}


# --- expiry ------------------------------------------------------------------------

ATTACKERS = {
    "one address": ["198.51.100.1"] * MAX_FAILURES,
    "many addresses": [f"198.51.100.{n}" for n in range(MAX_FAILURES)],
}


@pytest.mark.parametrize("addresses", ATTACKERS.values(), ids=ATTACKERS.keys())
async def test_a_lock_ends_after_the_last_counted_failure(
    api: Api, services: Services, clock: Clock, addresses: list[str]
) -> None:
    for address in addresses:
        async with open_api(services, address) as attacker:
            assert (await login(attacker, "admin", "wrong"))["code"] == 400
    async with open_api(services, addresses[0]) as attacker:
        clock.now += LOCKOUT_SECONDS - 1
        # Refused attempts do not extend the lock: the victim is free a second later.
        assert (await login(attacker, "admin", "wrong"))["code"] == 429
        assert (await login(attacker, "admin", ADMIN_PASSWORD))["code"] == 429
        clock.now += 1
        assert (await login(attacker, "admin", ADMIN_PASSWORD))["code"] == 200


async def test_failures_spaced_within_the_window_accumulate(api: Api, clock: Clock) -> None:
    for _ in range(MAX_FAILURES):
        assert (await login(api, "admin", "wrong"))["code"] == 400
        clock.now += LOCKOUT_SECONDS - 1
    assert (await login(api, "admin", ADMIN_PASSWORD))["code"] == 429


async def test_five_guesses_a_window_do_not_keep_a_victim_out_for_an_hour(
    api: Api, services: Services, clock: Clock
) -> None:
    async with open_api(services, "192.0.2.50") as victim:
        assert (await login(victim, "admin", ADMIN_PASSWORD))["code"] == 200
        successes = 0
        async with open_api(services, "198.51.100.1") as attacker:
            for _ in range(12):  # an hour of attack: 60 requests in all
                for _ in range(MAX_FAILURES):
                    await login(attacker, "admin", "wrong")
                clock.now += LOCKOUT_SECONDS / 10
                for _ in range(5):  # the victim tries once a minute meanwhile
                    successes += (await login(victim, "admin", ADMIN_PASSWORD))["code"] == 200
                    clock.now += LOCKOUT_SECONDS / 5
                clock.now -= LOCKOUT_SECONDS / 10  # the attacker's next round: as the lock ends
        assert successes > 0


# --- 2FA setup ---------------------------------------------------------------------

WRONG_CODES: dict[str, Callable[[str], str]] = {
    "another valid-looking code": wrong_code,
    "letters": lambda _: "abcdef",
    "too short": lambda _: "123",
}


@pytest.mark.parametrize("wrong", WRONG_CODES.values(), ids=WRONG_CODES.keys())
async def test_2fa_verify_guesses_are_limited(api: Api, wrong: Callable[[str], str]) -> None:
    token = await api.login()
    secret = (await api.post("/api/auth/2fa/generate", token=token))["data"]["secret"]
    for _ in range(MAX_FAILURES):
        body = await api.post(
            "/api/auth/2fa/verify", {"code": wrong(secret), "secret": secret}, token=token
        )
        assert (body["code"], body["message"]) == (400, "Invalid 2FA code")
    right = {"code": pyotp.TOTP(secret).now(), "secret": secret}
    body = await api.post("/api/auth/2fa/verify", right, token=token)
    assert body == {"code": 429, "message": LOCKED, "data": None}
    assert (await api.get("/api/me", token=token))["data"]["otp"] is False
    # Setting up 2FA is limited on its own; the account can still log in.
    assert (await login(api, "admin", ADMIN_PASSWORD))["code"] == 200
