"""``/metrics``: off unless configured, guarded, counting by route template."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from manifold.config import load_config
from manifold.container import Services
from tests.api.fs_helpers import mount_local
from tests.conftest import Api, open_api, start_services

TOKEN = "scrape-token-7f3a9"


async def _started(data_dir: Path, metrics: str) -> Services:
    data_dir.mkdir(mode=0o700, parents=True)
    (data_dir / "config.json").write_text(json.dumps({"metrics": metrics}))
    return await start_services(data_dir)


@pytest.fixture
async def token_api(tmp_path: Path) -> AsyncIterator[Api]:
    services = await _started(tmp_path / "data", TOKEN)
    try:
        async with open_api(services) as api:
            yield api
    finally:
        await services.stop()


async def scrape(api: Api, token: str = TOKEN) -> httpx.Response:
    return await api.client.get("/metrics", headers={"Authorization": f"Bearer {token}"})


def value(text: str, prefix: str) -> float:
    lines = [line for line in text.splitlines() if line.startswith(prefix)]
    assert lines, f"no {prefix} in the metrics"
    return sum(float(line.rsplit(" ", 1)[1]) for line in lines)


async def test_metrics_are_off_unless_configured(api: Api) -> None:
    response = await api.client.get("/metrics", headers={"Authorization": "Bearer x"})
    assert "manifold_http" not in response.text  # a 404, or the web page that answers it


async def test_a_token_guards_the_metrics(token_api: Api) -> None:
    assert (await token_api.client.get("/metrics")).status_code == 401
    assert (await scrape(token_api, "wrong-token")).status_code == 401
    response = await scrape(token_api)
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain")


async def test_requests_are_counted_by_route_template(token_api: Api, tmp_path: Path) -> None:
    root = tmp_path / "files"
    root.mkdir()
    (root / "a.txt").write_bytes(b"12345")
    (root / "b.txt").write_bytes(b"678")
    await mount_local(token_api, "/local", root)
    admin = await token_api.login()
    await token_api.post("/api/fs/list", {"path": "/local"}, token=admin)
    await token_api.post("/api/fs/list", {"path": "/local"}, token=admin)
    for name in ("a.txt", "b.txt"):
        found = await token_api.post("/api/fs/get", {"path": f"/local/{name}"}, token=admin)
        sign = found["data"]["sign"]
        got = await token_api.client.get(f"/d/local/{name}", params={"sign": sign})
        assert got.status_code == 200
    text = (await scrape(token_api)).text
    downloads = 'manifold_http_requests_total{method="GET",route="/d/{path:path}",status="200"}'
    assert value(text, downloads) == 2
    assert "/d/local/a.txt" not in text
    assert value(text, 'manifold_http_response_bytes_total{route="/d/{path:path}"}') == 8
    assert value(text, 'manifold_list_cache_lookups_total{result="hit"}') >= 1
    assert value(text, 'manifold_storage_call_duration_seconds_count{call="list"') >= 1
    assert "manifold_http_request_duration_seconds_bucket" in text


async def test_tasks_are_counted_by_state(token_api: Api) -> None:
    text = (await scrape(token_api)).text
    assert "# TYPE manifold_tasks gauge" in text


async def test_an_address_list_guards_the_metrics(tmp_path: Path) -> None:
    services = await _started(tmp_path / "data", "127.0.0.1,::1")
    try:
        async with open_api(services, address="127.0.0.1") as near:
            assert (await near.client.get("/metrics")).status_code == 200
        async with open_api(services, address="203.0.113.9") as far:
            assert (await far.client.get("/metrics")).status_code == 403
    finally:
        await services.stop()


def test_the_token_is_masked_where_the_config_is_shown(tmp_path: Path) -> None:
    from manifold.config import describe

    config = load_config(tmp_path / "data", env={"MANIFOLD_METRICS": TOKEN})
    assert TOKEN not in str(describe(config))
    listed = load_config(tmp_path / "data", env={"MANIFOLD_METRICS": "10.0.0.0/8"})
    assert describe(listed)["metrics"] == "10.0.0.0/8"
