"""The web interface in a real browser: ``manifold server`` started as a user starts it,
the OpenList frontend it serves, and headless Chromium driven by Playwright.

Every API answer the page receives is recorded; a test fails on any code other than
200 that its flow did not say it expects. A failing test leaves a screenshot in
``tests/browser/screenshots/``.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from manifold.web import default_dist_dir

playwright_api = pytest.importorskip("playwright.async_api")

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
# The flags that keep Chromium quiet on a closed network and runnable as root.
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
ADMIN_PASSWORD = "browser-admin-pw"
SCREENSHOTS = Path(__file__).parent / "screenshots"
STEP = 15_000  # ms a page step may take on a busy machine

if not os.path.exists(CHROMIUM) or not (default_dist_dir() / "index.html").is_file():
    pytest.skip(
        "Chromium or the web interface is missing (scripts/test installs both)",
        allow_module_level=True,
    )


@dataclass
class Site:
    """A running ``manifold server`` with its admin token and a folder for files."""

    base: str
    token: str
    files: Path
    data: Path  # the server's data folder

    def api(self, path: str, body: Any = None, token: str | None = None) -> dict[str, Any]:
        headers = {"Authorization": self.token if token is None else token}
        if body is None and not path.startswith("/api/admin/storage/create"):
            response = httpx.get(self.base + path, headers=headers, timeout=30)
        else:
            response = httpx.post(self.base + path, json=body, headers=headers, timeout=30)
        answer: dict[str, Any] = response.json()
        assert answer["code"] == 200, (path, answer)
        return answer

    def mount(self, name: str, **addition: Any) -> Path:
        """A Local storage at ``/<name>`` over a fresh folder of its own."""
        root = self.files / name
        root.mkdir(parents=True)
        fields = {"root_folder_path": str(root), **addition}
        body = {"mount_path": f"/{name}", "driver": "Local", "addition": json.dumps(fields)}
        self.api("/api/admin/storage/create", body)
        return root

    def login(self, username: str, password: str) -> str:
        body = {"username": username, "password": password}
        return str(self.api("/api/auth/login", body, token="")["data"]["token"])


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture(scope="session")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    with serve(tmp_path_factory, free_port()) as started:
        yield started


@contextlib.contextmanager
def serve(
    tmp_path_factory: pytest.TempPathFactory, port: int, env: dict[str, str] | None = None
) -> Iterator[Site]:
    """``manifold server`` on ``port`` with ``env`` added to its environment."""
    data = tmp_path_factory.mktemp("browser-data")
    files = tmp_path_factory.mktemp("browser-files")
    env = {
        **os.environ,
        "MANIFOLD_ADMIN_PASSWORD": ADMIN_PASSWORD,
        "MANIFOLD_LOG_LEVEL": "warning",
        **(env or {}),
    }
    command = [sys.executable, "-m", "manifold", "server", "--data", str(data), "--port", str(port)]
    log = (data / "server.log").open("wb")
    server = subprocess.Popen(
        [*command, "--host", "127.0.0.1"], env=env, stdout=log, stderr=subprocess.STDOUT
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(base + "/ping", timeout=2).text == "pong":
                    break
            except httpx.TransportError:
                pass
            assert server.poll() is None, (data / "server.log").read_text()
            assert time.monotonic() < deadline, "the server did not start"
            time.sleep(0.2)
        answer = httpx.post(
            base + "/api/auth/login", json={"username": "admin", "password": ADMIN_PASSWORD}
        ).json()
        started = Site(base, answer["data"]["token"], files, data)
        started.mount("home")  # an empty root answers "please add a storage first"
        yield started
    finally:
        server.terminate()
        server.wait(timeout=30)
        log.close()


@pytest.fixture(scope="session")
async def browser() -> AsyncIterator[Any]:
    async with playwright_api.async_playwright() as driver:
        launched = await driver.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield launched
        await launched.close()


@dataclass
class Flow:
    """What the page received from the API during one test."""

    answers: list[tuple[str, str, int, str]] = field(default_factory=list)
    requests: list[tuple[str, str]] = field(default_factory=list)
    expected: set[tuple[str, int]] = field(default_factory=set)

    def expect(self, path: str, code: int) -> None:
        """The flow expects ``path`` to answer ``code`` (a wrong password, say)."""
        self.expected.add((path, code))

    def unexpected(self) -> list[tuple[str, str, int, str]]:
        return [a for a in self.answers if a[2] != 200 and (a[1], a[2]) not in self.expected]

    def saw(self, path: str) -> bool:
        """Whether the page called ``path`` (answered or not: it may have moved on)."""
        return any(request[1] == path for request in self.requests)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    report = yield
    setattr(item, f"report_{report.when}", report)
    return report


@pytest.fixture
def flow() -> Flow:
    return Flow()


@pytest.fixture
async def page(
    browser: Any, site: Site, flow: Flow, request: pytest.FixtureRequest
) -> AsyncIterator[Any]:
    context = await browser.new_context(viewport={"width": 1280, "height": 800})
    context.set_default_timeout(STEP)
    opened = await context.new_page()

    async def record(response: Any) -> None:
        path = response.url.removeprefix(site.base).split("?")[0]
        if not path.startswith("/api/"):
            return
        try:
            text = await response.text()
        except Exception:  # the page moved on before the body arrived: nothing to judge
            return
        try:
            body = json.loads(text)
        except ValueError:
            flow.answers.append((response.request.method, path, -1, "not JSON"))
            return
        if isinstance(body, dict):
            flow.answers.append(
                (response.request.method, path, body.get("code", -1), str(body.get("message")))
            )

    def sent(request: Any) -> None:
        path = request.url.removeprefix(site.base).split("?")[0]
        if path.startswith("/api/"):
            flow.requests.append((request.method, path))

    opened.on("request", sent)
    opened.on("response", record)
    yield opened
    report = getattr(request.node, "report_call", None)
    if report is None or report.failed:
        SCREENSHOTS.mkdir(exist_ok=True)
        await opened.screenshot(path=str(SCREENSHOTS / f"{request.node.name}.png"))
    await context.close()
    assert flow.unexpected() == [], "the page received answers its flow did not expect"


async def log_in(page: Any, site: Site, username: str, password: str) -> None:
    """Log in through the real login page and wait for the file page."""
    await page.goto(site.base + "/@login")
    await page.fill("input[name=username]", username)
    await page.fill("input[name=password]", password)
    await page.get_by_role("button", name="Login").click()
    await page.wait_for_url(lambda url: "@login" not in url)
