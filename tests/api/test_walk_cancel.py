"""A walk on a request's behalf stops when its client hangs up, and harms nothing."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from starlette.types import Message

from manifold.app import create_app
from manifold.container import Services
from tests.api.fs_helpers import make_tree, mount_local
from tests.conftest import Api

HANG = 60.0
FOLDERS = {f"f{i}/g{j}/": "" for i in range(30) for j in range(30)}


async def hung_up(services: Services, token: str, route: str, body: dict[str, Any]) -> None:
    """Send ``body`` to ``route`` as a client that hangs up once the body is sent."""
    messages: list[Message] = [
        {"type": "http.request", "body": json.dumps(body).encode(), "more_body": False}
    ]

    async def receive() -> Message:
        return messages.pop(0) if messages else {"type": "http.disconnect"}

    async def send(message: Message) -> None:
        return None

    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": route,
        "raw_path": route.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": [
            (b"host", b"manifold.test"),
            (b"content-type", b"application/json"),
            (b"authorization", token.encode()),
        ],
        "client": ("203.0.113.9", 40002),
        "server": ("manifold.test", 80),
    }
    app = create_app(services.config, services)
    await asyncio.wait_for(app(scope, receive, send), HANG)


@pytest.mark.parametrize(
    ("route", "body"),
    [
        ("/api/fs/remove_empty_directory", {"src_dir": "/local"}),
        (
            "/api/fs/recursive_move",
            {"src_dir": "/local", "dst_dir": "/local/flat", "conflict_policy": "skip"},
        ),
    ],
)
async def test_a_walk_stops_when_its_client_hangs_up(
    api: Api, services: Services, tmp_path: Path, route: str, body: dict[str, Any]
) -> None:
    root = make_tree(tmp_path / "root", {**FOLDERS, "flat/": "", "f0/g0/x.txt": "x"})
    await api.as_admin()
    await mount_local(api, "/local", root)
    await hung_up(services, api.token, route, body)
    assert len(list(root.glob("f*/g*"))) == len(FOLDERS)
    assert (root / "f0/g0/x.txt").read_text() == "x"
    # The server is free for the next request, which walks to its end.
    done = await asyncio.wait_for(api.post(route, body), HANG)
    assert done["code"] == 200, done
