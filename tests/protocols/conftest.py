"""Fixtures of the protocol tests: the app in process, a Local mount at ``/local``."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from manifold.container import Services
from tests.api.fs_helpers import make_tree
from tests.conftest import open_api
from tests.protocols.dav_helpers import Dav, mount, user


@pytest.fixture
async def disk(services: Services, tmp_path: Path) -> Path:
    root = make_tree(tmp_path / "disk", {"docs/readme.txt": "hello world", "empty/": ""})
    await mount(services, "/local", root)
    return root


@pytest.fixture
async def dav(services: Services, disk: Path) -> AsyncIterator[Dav]:
    await user(services, "dora")
    async with open_api(services) as api:
        yield Dav(api.client, "dora")
