"""/d and /p with the path resolved once: the order of errors, and settings that change
between requests."""

from __future__ import annotations

import pytest

from manifold.api.deps import trusted_networks
from tests.api.fs_helpers import save_settings
from tests.api.test_downloads import (  # noqa: F401 - fixtures
    UPSTREAM_FILES,
    assert_envelope,
    remote,
    served,
    signed,
    upstream,
    url_driver,
)
from tests.conftest import Api


@pytest.mark.usefixtures("served")
async def test_the_sign_is_checked_before_the_storage_is_missed(api: Api) -> None:
    assert_envelope(await api.client.get("/d/nowhere/a.txt"), 401, "expire missing")
    response = await api.client.get("/d" + signed(api, "/nowhere/a.txt"))
    assert response.status_code == 404, response.text
    assert "storage not found" in response.json()["message"]


@pytest.mark.usefixtures("remote")
async def test_a_changed_proxy_types_setting_counts_at_the_next_request(api: Api) -> None:
    await api.as_admin()
    url = "/d" + signed(api, "/url/list.m3u8")
    assert (await api.client.get(url)).status_code == 200  # m3u8 is proxied by default
    await save_settings(api, proxy_types="mp4")
    assert (await api.client.get(url)).status_code == 302
    await save_settings(api, proxy_types="mp4,m3u8")
    response = await api.client.get(url)
    assert (response.status_code, response.content) == (200, UPSTREAM_FILES["list.m3u8"])


def test_trusted_proxies_are_parsed_once_per_list() -> None:
    entries = ("10.0.0.0/8", "not a network", "::1", "192.168.1.7")
    networks = trusted_networks(entries)
    assert [str(n) for n in networks] == ["10.0.0.0/8", "::1/128", "192.168.1.7/32"]
    assert trusted_networks(tuple(entries)) is networks
