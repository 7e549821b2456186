"""What the storage form says when a remote driver cannot reach its server: the host and
port the admin typed, unmasked, and why (refused, name not found), through the API."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.conftest import Api
from tests.fixtures.processes import free_port

NOWHERE = "no-such-host.invalid"


def addition(driver: str, host: str, port: int) -> dict[str, Any]:
    """Options of ``driver`` pointing at ``host:port``, everything else well formed."""
    login = {"username": "someone", "password": "a-password-1"}
    if driver == "S3":
        return {"bucket": "b", "endpoint": f"http://{host}:{port}", "region": "us-east-1",
                "access_key_id": "AKIDEXAMPLE", "secret_access_key": "secret-key-1",
                "force_path_style": True, "root_folder_path": "/"}  # fmt: skip
    if driver == "SFTP":
        return {"address": f"{host}:{port}", "root_folder_path": "/", **login}
    if driver == "SMB":
        share = {"share_name": "share", "root_folder_path": "/"}
        return {"address": f"{host}:{port}", **share, **login}
    if driver == "FTP":
        return {"address": f"{host}:{port}", "root_folder_path": "/", **login}
    return {"address": f"http://{host}:{port}", "root_folder_path": "/", **login}


DRIVERS = ["S3", "SFTP", "SMB", "FTP", "WebDav"]


async def failure(api: Api, driver: str, host: str, port: int) -> str:
    """The message the storage form shows after Add."""
    body = {"mount_path": f"/{driver.lower()}-{port}", "driver": driver,
            "addition": json.dumps(addition(driver, host, port))}  # fmt: skip
    answer = await api.post("/api/admin/storage/create", body, token=await api.login())
    assert answer["code"] != 200, answer
    return str(answer["message"])


@pytest.mark.parametrize("driver", DRIVERS)
async def test_a_closed_port_is_named_and_said_refused(api: Api, driver: str) -> None:
    port = free_port()
    message = await failure(api, driver, "127.0.0.1", port)
    assert f"127.0.0.1:{port}" in message, message
    assert "refused" in message.lower(), message
    assert "*" not in message, message


@pytest.mark.parametrize("driver", DRIVERS)
async def test_a_name_that_does_not_resolve_is_named(api: Api, driver: str) -> None:
    port = free_port()
    message = await failure(api, driver, NOWHERE, port)
    assert NOWHERE in message, message
    assert any(w in message.lower() for w in ("not found", "resolve", "not known")), message
    assert "*" not in message, message
