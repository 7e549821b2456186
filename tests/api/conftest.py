"""Fixtures shared by the API tests that need a real HTTP server."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from manifold.container import Services
from tests.api.fs_helpers import make_tree, mount_local
from tests.api.live_server import serving
from tests.api.offline_helpers import aria2, files_url, world  # noqa: F401 - fixtures
from tests.conftest import Api


@pytest.fixture
def root(tmp_path: Path, request: pytest.FixtureRequest) -> Path:
    """The test module's ``TREE`` (see ``make_tree``) made in a temporary folder."""
    return make_tree(tmp_path / "root", request.module.TREE)


@pytest.fixture
async def admin(api: Api, root: Path) -> Api:
    """``api`` as the admin, with ``root`` served by a Local storage at /local."""
    await api.as_admin()
    await mount_local(api, "/local", root)
    return api


@pytest.fixture
async def live_root(
    services: Services, api: Api, tmp_path: Path
) -> AsyncIterator[tuple[str, Path]]:
    """A uvicorn server on a free port serving ``services``, with a Local storage at
    ``/local``; yields the server's URL and the storage's root folder."""
    root = make_tree(tmp_path / "root", {"keep.txt": "keep"})
    await api.as_admin()
    await mount_local(api, "/local", root)
    async with serving(services) as url:
        yield url, root
