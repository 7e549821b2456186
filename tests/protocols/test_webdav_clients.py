"""Real WebDAV clients against a live server: the litmus suite, and rclone's webdav
back end driving one scripted session."""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from manifold.container import Services
from manifold.drivers.rclone.process import RCLONE
from tests.api.live_server import serving
from tests.protocols.dav_helpers import mount, user

# Per suite: the tests litmus runs, every one of which passes.
LITMUS_TARGETS = {"basic": 16, "copymove": 13, "props": 30, "locks": 41, "http": 4}


@pytest.fixture
async def live(services: Services, tmp_path: Path) -> AsyncIterator[tuple[str, Path]]:
    root = tmp_path / "disk"
    root.mkdir()
    await mount(services, "/local", root)
    await user(services, "dora")
    async with serving(services) as url:
        yield url, root


async def run(
    *args: str, env: dict[str, str] | None = None, cwd: Path | None = None
) -> tuple[int, str]:
    process = await asyncio.create_subprocess_exec(
        *args,
        cwd=cwd,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env={**os.environ, **(env or {})},
    )
    output, errors = await process.communicate()
    assert process.returncode is not None
    if process.returncode:
        output += errors
    return process.returncode, output.decode(errors="replace")


@pytest.mark.skipif(shutil.which("litmus") is None, reason="litmus is not installed")
async def test_litmus_passes_every_suite(live: tuple[str, Path], tmp_path: Path) -> None:
    url, _ = live
    # litmus writes its logs into the folder it runs in.
    _, output = await run("litmus", f"{url}/dav/local/", "dora", "dora-pw", cwd=tmp_path)
    summary = re.findall(r"summary for `(\w+)': of (\d+) tests run: (\d+) passed", output)
    passed = {suite: (int(ran), int(ok)) for suite, ran, ok in summary}
    full_marks = {suite: (n, n) for suite, n in LITMUS_TARGETS.items()}
    assert {suite: passed.get(suite) for suite in LITMUS_TARGETS} == full_marks, output


@pytest.mark.skipif(not os.path.exists(RCLONE), reason="rclone is not installed")
async def test_an_rclone_session(live: tuple[str, Path], tmp_path: Path) -> None:
    url, root = live
    _, obscured = await run(RCLONE, "obscure", "dora-pw")
    env = {
        "RCLONE_CONFIG": str(tmp_path / "none.conf"),
        "RCLONE_CONFIG_M_TYPE": "webdav",
        "RCLONE_CONFIG_M_URL": f"{url}/dav/local",
        "RCLONE_CONFIG_M_VENDOR": "other",
        "RCLONE_CONFIG_M_USER": "dora",
        "RCLONE_CONFIG_M_PASS": obscured.strip(),
    }

    async def rclone(*args: str) -> str:
        code, output = await run(RCLONE, *args, env=env)
        assert code == 0, output
        return output

    source = tmp_path / "up.bin"
    source.write_bytes(bytes(range(256)) * 40)
    await rclone("copyto", str(source), "m:in/up.bin")
    assert (root / "in" / "up.bin").read_bytes() == source.read_bytes()
    listed = json.loads(await rclone("lsjson", "m:in"))
    assert [(e["Name"], e["Size"]) for e in listed] == [("up.bin", 10240)]
    ranged = await run(RCLONE, "cat", "--offset", "256", "--count", "4", "m:in/up.bin", env=env)
    assert ranged == (0, "\x00\x01\x02\x03")
    await rclone("moveto", "m:in/up.bin", "m:in/renamed.bin")
    await rclone("mkdir", "m:folder")
    await rclone("move", "m:in", "m:folder")
    assert (root / "folder" / "renamed.bin").read_bytes() == source.read_bytes()
    await rclone("deletefile", "m:folder/renamed.bin")
    assert not (root / "folder" / "renamed.bin").exists()
    (root / "folder" / "sub").mkdir()
    (root / "folder" / "sub" / "x").write_bytes(b"x")
    await rclone("purge", "m:folder")
    assert not (root / "folder").exists()
