"""Each remote back end breaks under each call: a stall mid-body or mid-listing, a reset
mid-body, a half-open connection, a refused reconnect.

For every driver and each of list, download, ranged read, upload, copy and remove:
the call fails within the driver's limits (generous bound) with an error answer,
nothing half-written is left on the back end under any name once the fault clears
(a temporary upload name only while Manifold hides it, until it sweeps it), the Local
storage beside keeps answering at its usual pace meanwhile, and the storage works
again by itself once the fault is gone. The seven back ends are broken at the same
time, each behind its own proxy, so one test's wait is one driver's wait.
"""

from __future__ import annotations

import asyncio
import secrets
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Literal
from urllib.parse import quote

import httpx
import pytest

from manifold.paths import RESERVED_PREFIX
from tests.api.fs_helpers import fs_list
from tests.api.test_fs_write import put
from tests.conftest import Api
from tests.faults.backends import Backend
from tests.faults.conftest import Site, on_every_backend

PAYLOAD = secrets.token_bytes(512 * 1024)
MANY = 20  # files in the folder a listing is stalled in
RANGE = (1000, 300_999)
OPS = ["list", "download", "range", "upload", "copy", "remove"]
FAULTS = ["stall", "reset", "half_open", "refused"]
# Where a stall or a reset strikes: which way bytes are counted and after how many.
STRIKE: dict[str, tuple[Literal["up", "down"], int]] = {
    "list": ("down", 200),
    "download": ("down", 128 * 1024),
    "range": ("down", 32 * 1024),
    "upload": ("up", 128 * 1024),
    "copy": ("down", 200),
    "remove": ("down", 0),
}
# Generous bounds over the 2 s limits: a loaded machine, and a call may wait out two.
FAIL_BOUND = 25.0
LOCAL_BOUND = 3.0
RECOVER_BOUND = 60.0
SWEEP_BOUND = 30.0


@dataclass(frozen=True, slots=True)
class Outcome:
    ok: bool
    detail: str


@pytest.fixture(scope="module")
async def ready(site: Site) -> Site:
    """Each remote storage holds ``fixed/src.bin`` and ``fixed/many/`` (``MANY`` files),
    which the cases only read."""

    async def fill(backend: Backend) -> None:
        assert (await put(site.api, f"{backend.mount}/fixed/src.bin", PAYLOAD))["code"] == 200
        for index in range(MANY):
            path = f"{backend.mount}/fixed/many/file-{index:02}.txt"
            assert (await put(site.api, path, b"x" * 300))["code"] == 200

    await asyncio.gather(*(fill(b) for b in site.backends.values()))
    return site


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("fault", FAULTS)
async def test_a_broken_back_end_fails_the_call_in_time_and_leaves_nothing_half_made(
    ready: Site, fault: str, op: str
) -> None:
    problems = await on_every_backend(ready, lambda b: _bounded(Case(ready, b, fault, op).run()))
    assert not problems, problems


async def _bounded(work: Awaitable[None]) -> None:
    async with asyncio.timeout(FAIL_BOUND + RECOVER_BOUND + SWEEP_BOUND + 60):
        await work


class Case:
    """One back end under one fault during one call."""

    def __init__(self, site: Site, backend: Backend, fault: str, op: str) -> None:
        self.api = site.api
        self.backend = backend
        self.fault = fault
        self.op = op
        self.folder = f"{backend.mount}/{fault}-{op}"
        # Names the call may leave in its folder, each only whole: name -> size.
        self.whole = {
            "up.bin": len(PAYLOAD),
            "src.bin": len(PAYLOAD),
            "gone.bin": len(PAYLOAD),
            ".alist": 0,  # S3's folder placeholder
        }
        self.copy_target = self.folder
        self.removed = False  # found gone once the fault cleared

    async def run(self) -> None:
        await self.prepare()
        try:
            self.arm()
            failed = await self.timed_failure()
        finally:
            self.backend.proxy.clear()
        assert not failed.ok, f"{self.op} succeeded under {self.fault}: {failed.detail}"
        await self.recovered()
        await self.nothing_half_made()
        await self.settle_targets()
        again = await self.call()
        assert again.ok, f"{self.op} after the fault: {again.detail}"

    async def prepare(self) -> None:
        done = await put(self.api, f"{self.folder}/gone.bin", PAYLOAD)
        assert done["code"] == 200, f"before the fault: {done}"

    async def settle_targets(self) -> None:
        """Where the call goes again: a copy the fault let through is not made twice."""
        listed = await fs_list(self.api, self.folder, refresh=True)
        assert listed["code"] == 200, f"after the fault: {listed}"
        shown = [o["name"] for o in listed["data"]["content"] or []]
        if self.op == "copy" and "src.bin" in shown:
            self.copy_target = f"{self.folder}/again"
            made = await self.api.post("/api/fs/mkdir", {"path": self.copy_target})
            assert made["code"] == 200, f"after the fault: {made}"
        self.removed = "gone.bin" not in shown

    def arm(self) -> None:
        proxy = self.backend.proxy
        if self.fault == "half_open":
            proxy.half_open()
        elif self.fault == "refused":
            proxy.refuse()
        else:
            counted, after = STRIKE[self.op]
            strike = proxy.stall if self.fault == "stall" else proxy.reset
            strike(after, counted)

    async def timed_failure(self) -> Outcome:
        """The call under the fault, timed, with the Local storage timed meanwhile."""
        started = time.monotonic()
        call = asyncio.ensure_future(self.call())
        await local_answers_quickly(self.api)
        outcome = await call
        took = time.monotonic() - started
        assert took < FAIL_BOUND, f"{self.op} took {took:.1f}s under {self.fault}"
        return outcome

    async def call(self) -> Outcome:
        calls: dict[str, Callable[[], Awaitable[Outcome]]] = {
            "list": self.list,
            "download": self.download,
            "range": self.ranged,
            "upload": self.upload,
            "copy": self.copy,
            "remove": self.remove,
        }
        try:
            return await calls[self.op]()
        except httpx.TransportError as exc:  # a download cut off mid-body
            return Outcome(False, f"cut off: {exc!r}")

    async def list(self) -> Outcome:
        body = await fs_list(self.api, f"{self.backend.mount}/fixed/many", refresh=True)
        return envelope(body, lambda data: len(data["content"] or []) == MANY)

    async def download(self) -> Outcome:
        return await self.fetch({}, 200, PAYLOAD)

    async def ranged(self) -> Outcome:
        first, last = RANGE
        return await self.fetch({"Range": f"bytes={first}-{last}"}, 206, PAYLOAD[first : last + 1])

    async def fetch(self, headers: dict[str, str], status: int, wanted: bytes) -> Outcome:
        path = f"{self.backend.mount}/fixed/src.bin"
        signed = f"/p{quote(path)}?sign={self.api.services.signer.sign(path)}"
        response = await self.api.client.get(signed, headers=headers)
        if response.status_code == status:
            whole = response.content == wanted
            return Outcome(whole, f"{status} with {len(response.content)} bytes")
        return Outcome(False, f"{response.status_code}: {response.text[:300]}")

    async def upload(self) -> Outcome:
        return envelope(await put(self.api, f"{self.folder}/up.bin", PAYLOAD))

    async def copy(self) -> Outcome:
        body = {
            "src_dir": f"{self.backend.mount}/fixed",
            "dst_dir": self.copy_target,
            "names": ["src.bin"],
        }
        answer = await self.api.post("/api/fs/copy", body)
        if answer["code"] != 200:
            return envelope(answer)
        return await tasks_outcome(self.api, answer)

    async def remove(self) -> Outcome:
        if self.removed:
            return Outcome(True, "removed under the fault after all")
        body = {"dir": self.folder, "names": ["gone.bin"]}
        return envelope(await self.api.post("/api/fs/remove", body))

    async def recovered(self) -> None:
        """The storage answers again, by itself, soon after the fault ends."""
        deadline = time.monotonic() + RECOVER_BOUND
        while True:
            body = await fs_list(self.api, self.folder, refresh=True)
            if body["code"] == 200:
                return
            assert time.monotonic() < deadline, f"still failing after the fault: {body}"
            await asyncio.sleep(0.5)

    async def nothing_half_made(self) -> None:
        """Every name on the back end holds a whole file; a temporary one only while
        listings hide it, and it goes (swept) soon."""
        deadline = time.monotonic() + SWEEP_BOUND
        while True:
            found = await self.backend.files(self.folder.removeprefix(self.backend.mount))
            temps = {n for n in found if n.rpartition("/")[2].startswith(RESERVED_PREFIX)}
            for name, size in found.items():
                if name not in temps and not name.startswith("again/"):
                    assert self.whole.get(name) == size, f"{name}: {size} bytes on the back end"
            listed = await fs_list(self.api, self.folder, refresh=True)
            assert listed["code"] == 200, f"after the fault: {listed}"
            shown = [o["name"] for o in listed["data"]["content"] or []]
            assert not [n for n in shown if n.startswith(RESERVED_PREFIX)], shown
            if not temps:
                return
            assert time.monotonic() < deadline, f"temporaries never swept: {sorted(temps)}"
            await asyncio.sleep(0.5)


def envelope(body: dict[str, Any], good: Callable[[Any], bool] = lambda _: True) -> Outcome:
    if body["code"] == 200:
        return Outcome(good(body["data"]), f"200: {str(body['data'])[:200]}")
    assert body["message"], body  # an error that says what went wrong
    return Outcome(False, f"{body['code']}: {body['message']}")


async def tasks_outcome(api: Api, answer: dict[str, Any]) -> Outcome:
    """How the copy tasks an answer started ended (a copy the storage cannot make
    itself runs as a task)."""
    tasks = (answer["data"] or {}).get("tasks") or []
    for task in tasks:
        await api.services.tasks.wait_done(task["id"])
    ended = [api.services.tasks.get(task["id"]) for task in tasks]
    errors = [t.error for t in ended if t is not None and t.error]
    return Outcome(not errors, "; ".join(errors) or "copied")


async def local_answers_quickly(api: Api) -> None:
    """The Local storage's listings keep their pace while a remote one hangs."""
    await asyncio.sleep(0.3)
    for _ in range(3):
        started = time.monotonic()
        body = await fs_list(api, "/local", refresh=True)
        took = time.monotonic() - started
        assert body["code"] == 200, body
        assert took < LOCAL_BOUND, f"/local took {took:.1f}s to list during the fault"
