"""The S3 server through the ``aws`` command line, when it is installed."""

from __future__ import annotations

import asyncio
import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from manifold.container import Services
from tests.protocols.s3_helpers import BUCKET, KEY_ID, SECRET, Site, s3_site

pytestmark = pytest.mark.skipif(shutil.which("aws") is None, reason="aws CLI not installed")


@pytest.fixture
async def site(services: Services, tmp_path: Path) -> Any:
    async with s3_site(services, tmp_path / "root") as served:
        yield served


async def aws(site: Site, *args: str) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env |= {
        "AWS_ACCESS_KEY_ID": KEY_ID,
        "AWS_SECRET_ACCESS_KEY": SECRET,
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_CONFIG_FILE": "/dev/null",
        "AWS_SHARED_CREDENTIALS_FILE": "/dev/null",
    }
    process = await asyncio.create_subprocess_exec(
        "aws",
        "--endpoint-url",
        site.url,
        *args,
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await process.communicate()
    assert process.returncode == 0, err.decode()
    return out.decode()


async def test_aws_cli_copies_lists_and_removes(site: Site, tmp_path: Path) -> None:
    local = tmp_path / "up.bin"
    data = os.urandom(10 << 20)  # past the CLI's 8 MiB threshold: a multipart upload
    local.write_bytes(data)
    await aws(site, "s3", "cp", str(local), f"s3://{BUCKET}/cli/up.bin")
    assert (site.data / "cli/up.bin").read_bytes() == data
    listed = await aws(site, "s3", "ls", f"s3://{BUCKET}/cli/")
    assert "up.bin" in listed
    back = tmp_path / "back.bin"
    await aws(site, "s3", "cp", f"s3://{BUCKET}/cli/up.bin", str(back))
    assert back.read_bytes() == data
    await aws(site, "s3", "rm", f"s3://{BUCKET}/cli/up.bin")
    assert not (site.data / "cli/up.bin").exists()
