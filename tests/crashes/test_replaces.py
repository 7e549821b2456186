"""A server killed (SIGKILL) while it replaces a folder holding a big file by a copy
from a slow source, and started again on the same data folder: the folder it was
replacing is whole under its name, and nothing stays parked under a hidden name."""

from __future__ import annotations

import base64
import contextlib
from collections.abc import Iterator
from pathlib import Path

import pytest

from manifold.paths import PARKING_PREFIX, RESERVED_PREFIX
from tests.crashes.harness import (
    USER,
    USER_PASSWORD,
    Node,
    after_restart,
    arriving,
    running,
    wait_for,
)
from tests.crashes.sources import SlowFtp, slow_ftp

NEW = bytes(range(256)) * (8 << 10)  # 2 MiB, 16 s at the slow rate
OLD = b"old version " * (64 << 10)
NAME = "big.bin"
# Longer than the test: the killed process's records are recovered because its
# process is gone, not because its lease ran out.
LEASE = 3600


@pytest.fixture
def node(tmp_path: Path) -> Iterator[Node]:
    with running(tmp_path, task_lease_seconds=LEASE) as server:
        yield server


@pytest.fixture
def source(tmp_path: Path, node: Node) -> Iterator[SlowFtp]:
    """A slow FTP server holding ``docs/big.bin``, mounted at ``/src``."""
    with slow_ftp(tmp_path / "ftp") as server:
        (server.root / "docs").mkdir()
        (server.root / "docs" / NAME).write_bytes(NEW)
        node.mount("/src", "FTP", server.addition)
        yield server


def parked(root: Path) -> list[Path]:
    return list(root.rglob(f"{PARKING_PREFIX}*"))


def test_a_folder_replaced_by_a_copy_when_the_server_dies(node: Node, source: SlowFtp) -> None:
    (node.root / "docs").mkdir()
    (node.root / "docs" / NAME).write_bytes(OLD)
    auth = base64.b64encode(f"{USER}:{USER_PASSWORD}".encode()).decode()
    head = (
        f"COPY /dav/src/docs HTTP/1.1\r\nHost: x\r\nAuthorization: Basic {auth}\r\n"
        "Destination: /dav/local/docs\r\nOverwrite: T\r\nDepth: infinity\r\n"
        "Content-Length: 0\r\n\r\n"
    )
    with contextlib.closing(node.raw(head)):
        copying = arriving(node.root, f"{RESERVED_PREFIX}*")
        # The copy is made beside the folder it replaces, under a parking name.
        assert copying.parent.name.startswith(PARKING_PREFIX)
        node.kill()
    source.fast()
    node.start()
    wait_for(lambda: not parked(node.root), "what the dead server parked to be recovered")
    assert (node.root / "docs" / NAME).read_bytes() == OLD
    assert sorted(p.name for p in node.root.iterdir()) == ["docs"]
    assert node.listed("/local/docs") == [NAME]
    after_restart(node, f"docs/{NAME}", len(OLD))
