"""The first admin's password: shown once when generated, never when the operator chose it."""

from __future__ import annotations

from pathlib import Path

import pytest

from manifold.config import load_config
from manifold.container import ADMIN_PASSWORD_ENV, Services


async def _first_start(tmp_path: Path, password: str | None) -> Services:
    services = Services.build(load_config(tmp_path / "data", env={}))
    await services.start(admin_password=password)
    return services


async def test_a_chosen_password_is_not_kept_for_display(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(ADMIN_PASSWORD_ENV, raising=False)
    services = await _first_start(tmp_path, "chosen-secret-1")
    try:
        assert services.created_admin_password is None
    finally:
        await services.stop()


async def test_a_generated_password_is_shown_once_and_works(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(ADMIN_PASSWORD_ENV, raising=False)
    services = await _first_start(tmp_path, None)
    try:
        generated = services.created_admin_password
        assert generated and len(generated) >= 8
        token = await services.auth.login("admin", generated, "", "127.0.0.1")
        assert token
    finally:
        await services.stop()
    services = await _first_start(tmp_path, None)
    try:
        assert services.created_admin_password is None
    finally:
        await services.stop()
