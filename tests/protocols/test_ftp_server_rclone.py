"""rclone's ftp backend against the FTP server, over explicit TLS: lsjson, copyto,
cat with --offset/--count, moveto, deletefile; ranged reads (each closing its data
connection early, as rclone's multi-stream downloads do) logged without tracebacks."""

from __future__ import annotations

import json
import logging
import os
import subprocess
from pathlib import Path

import pytest

from manifold.container import Services
from manifold.drivers.rclone.process import RCLONE
from tests.api.fs_helpers import make_tree
from tests.fixtures.certs import self_signed
from tests.protocols.ftp_helpers import blocking, live_ftp, mount, user

pytestmark = pytest.mark.skipif(not os.path.exists(RCLONE), reason="rclone is not installed")
CONTENT = bytes(range(256)) * 64


def rclone(env: dict[str, str], *args: str) -> bytes:
    done = subprocess.run([RCLONE, *args], env=env, capture_output=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr.decode()
    return done.stdout


def environment(port: int, home: Path) -> dict[str, str]:
    secret = subprocess.run(
        [RCLONE, "obscure", "rita-pw"], capture_output=True, check=True, text=True
    ).stdout.strip()
    return {
        "PATH": os.environ["PATH"],
        "HOME": str(home),
        "RCLONE_CONFIG": str(home / "none.conf"),
        "RCLONE_CONFIG_M_TYPE": "ftp",
        "RCLONE_CONFIG_M_HOST": "127.0.0.1",
        "RCLONE_CONFIG_M_PORT": str(port),
        "RCLONE_CONFIG_M_USER": "rita",
        "RCLONE_CONFIG_M_PASS": secret,
        "RCLONE_CONFIG_M_EXPLICIT_TLS": "true",
        "RCLONE_CONFIG_M_NO_CHECK_CERTIFICATE": "true",
    }


def session(env: dict[str, str], upload: Path) -> dict[str, object]:
    seen: dict[str, object] = {}
    listing = json.loads(rclone(env, "lsjson", "m:local/docs"))
    seen["listed"] = {e["Name"]: (e["Size"], e["IsDir"]) for e in listing}
    rclone(env, "copyto", str(upload), "m:local/docs/up.bin")
    seen["range"] = rclone(env, "cat", "--offset", "1000", "--count", "500", "m:local/docs/up.bin")
    rclone(env, "moveto", "m:local/docs/up.bin", "m:local/moved/up.bin")
    rclone(env, "deletefile", "m:local/docs/readme.txt")
    seen["after"] = sorted(e["Path"] for e in json.loads(rclone(env, "lsjson", "-R", "m:local")))
    return seen


async def test_rclone_over_explicit_tls(services: Services, tmp_path: Path) -> None:
    root = make_tree(tmp_path / "disk", {"docs/readme.txt": "hello world", "moved/": ""})
    await mount(services, "/local", root)
    await user(services, "rita")
    cert, key = self_signed(tmp_path)
    await services.settings.save(
        [("ftp_tls_public_cert_path", str(cert)), ("ftp_tls_private_key_path", str(key))]
    )
    upload = tmp_path / "upload.bin"
    upload.write_bytes(CONTENT)
    home = tmp_path / "home"
    home.mkdir()
    async with live_ftp(services) as port:
        seen = await blocking(session, environment(port, home), upload)
    assert seen["listed"] == {"readme.txt": (11, False)}
    assert seen["range"] == CONTENT[1000:1500]
    assert seen["after"] == ["docs", "moved", "moved/up.bin"]
    assert (root / "moved" / "up.bin").read_bytes() == CONTENT


def ranges(env: dict[str, str]) -> list[bytes]:
    return [
        rclone(env, "cat", "--offset", str(offset), "--count", "100000", "m:local/big.bin")
        for offset in (0, 1 << 20, 5 << 20, 9 << 20)
    ]


async def test_ranged_reads_end_without_tracebacks(
    services: Services, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    big = os.urandom(16 << 20)
    root = make_tree(tmp_path / "disk", {"big.bin": big})
    await mount(services, "/local", root)
    await user(services, "rita")
    cert, key = self_signed(tmp_path)
    await services.settings.save(
        [("ftp_tls_public_cert_path", str(cert)), ("ftp_tls_private_key_path", str(key))]
    )
    home = tmp_path / "home"
    home.mkdir()
    caplog.set_level(logging.INFO)
    async with live_ftp(services) as port:
        got = await blocking(ranges, environment(port, home))
    assert got == [big[o : o + 100000] for o in (0, 1 << 20, 5 << 20, 9 << 20)]
    assert [r.getMessage() for r in caplog.records if r.exc_info or r.exc_text] == []
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == []
