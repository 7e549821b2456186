"""The S3 server through rclone's s3 backend (provider Other, path style, env config)."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path
from typing import Any

import pytest

from manifold.container import Services
from manifold.drivers.rclone.process import RCLONE
from tests.protocols.s3_helpers import BUCKET, KEY_ID, SECRET, Site, s3_site

pytestmark = pytest.mark.skipif(not os.path.exists(RCLONE), reason="rclone not installed")


@pytest.fixture
async def site(services: Services, tmp_path: Path) -> Any:
    async with s3_site(services, tmp_path / "root") as served:
        yield served


async def rclone(site: Site, *args: str) -> bytes:
    # AWS_CA_BUNDLE (set on some machines) makes rclone's S3 client refuse to start.
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("AWS_")},
        "RCLONE_CONFIG": "/dev/null",
        "RCLONE_CONFIG_M_TYPE": "s3",
        "RCLONE_CONFIG_M_PROVIDER": "Other",
        "RCLONE_CONFIG_M_ENDPOINT": site.url,
        "RCLONE_CONFIG_M_ACCESS_KEY_ID": KEY_ID,
        "RCLONE_CONFIG_M_SECRET_ACCESS_KEY": SECRET,
        "RCLONE_CONFIG_M_FORCE_PATH_STYLE": "true",
    }
    process = await asyncio.create_subprocess_exec(
        RCLONE,
        "--retries",
        "1",
        "--low-level-retries",
        "1",
        *args,
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await process.communicate()
    assert process.returncode == 0, err.decode()
    return out


async def test_rclone_lists_copies_reads_moves_and_deletes(site: Site, tmp_path: Path) -> None:
    (site.data / "dir").mkdir()
    (site.data / "dir/a.txt").write_bytes(b"alpha")
    listed = json.loads(await rclone(site, "lsjson", "-R", f"m:{BUCKET}"))
    assert {(e["Path"], e["IsDir"]) for e in listed} == {("dir", True), ("dir/a.txt", False)}
    local = tmp_path / "up.bin"
    data = os.urandom(3 << 20)
    local.write_bytes(data)
    await rclone(site, "copyto", str(local), f"m:{BUCKET}/dir/sub/up.bin")
    assert (site.data / "dir/sub/up.bin").read_bytes() == data
    part = await rclone(
        site, "cat", "--offset", "1000", "--count", "500", f"m:{BUCKET}/dir/sub/up.bin"
    )
    assert part == data[1000:1500]
    await rclone(site, "moveto", f"m:{BUCKET}/dir/sub/up.bin", "m:other/moved.bin")
    assert (site.root / "other/moved.bin").read_bytes() == data
    assert not (site.data / "dir/sub/up.bin").exists()
    await rclone(site, "deletefile", f"m:{BUCKET}/dir/a.txt")
    assert not (site.data / "dir/a.txt").exists()


async def test_rclone_multipart_upload(site: Site, tmp_path: Path) -> None:
    local = tmp_path / "parts.bin"
    data = os.urandom(12 << 20)
    local.write_bytes(data)
    await rclone(
        site,
        "--s3-upload-cutoff",
        "5M",
        "--s3-chunk-size",
        "5M",
        "copyto",
        str(local),
        f"m:{BUCKET}/parts.bin",
    )
    assert (site.data / "parts.bin").read_bytes() == data
    spool = site.services.config.data_dir / "temp" / "s3-multipart"
    assert not any(spool.rglob("part-*"))


async def test_rclone_server_side_copy_in_parts(site: Site) -> None:
    """Past ``--s3-copy-cutoff`` (4.6 GiB unless set) rclone copies with UploadPartCopy."""
    data = os.urandom(12 << 20)
    (site.data / "big.bin").write_bytes(data)
    await rclone(
        site, "--s3-copy-cutoff", "5M", "copyto", f"m:{BUCKET}/big.bin", "m:other/big copy.bin"
    )
    assert (site.root / "other/big copy.bin").read_bytes() == data
    listed = json.loads(await rclone(site, "lsjson", "--hash", "m:other"))
    assert [(e["Name"], e["Size"]) for e in listed] == [("big copy.bin", len(data))]
