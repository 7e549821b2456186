"""``log_format: json``: one JSON object a line, the access log included, no secrets."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator
from pathlib import Path

import pytest

from manifold.logs import DatabaseErrorFilter, JsonFormatter
from tests.conftest import open_api, start_services

SIGN = "sign-secret-value-123"


@pytest.fixture
def captured() -> Iterator[io.StringIO]:
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(JsonFormatter())
    handler.addFilter(DatabaseErrorFilter())
    root = logging.getLogger()
    root.addHandler(handler)
    previous = logging.getLogger("manifold.access").level
    logging.getLogger("manifold.access").setLevel(logging.INFO)
    yield stream
    root.removeHandler(handler)
    logging.getLogger("manifold.access").setLevel(previous)


def lines(stream: io.StringIO) -> list[dict[str, object]]:
    return [json.loads(line) for line in stream.getvalue().splitlines()]


def test_a_record_is_one_json_line_with_its_fields(captured: io.StringIO) -> None:
    log = logging.getLogger("manifold.test")
    log.warning("two\nlines %s", "here", extra={"storage": "/s3"})
    try:
        raise ValueError("broken")
    except ValueError:
        log.exception("failed")
    first, second = lines(captured)
    assert first["message"] == "two\nlines here"
    assert first["level"] == "warning" and first["logger"] == "manifold.test"
    assert first["storage"] == "/s3"
    assert "ValueError: broken" in str(second["error"])
    assert len(captured.getvalue().splitlines()) == 2


async def test_the_access_log_names_route_and_status_never_the_query(
    tmp_path: Path, captured: io.StringIO
) -> None:
    data = tmp_path / "data"
    data.mkdir(mode=0o700)
    (data / "config.json").write_text(json.dumps({"log_format": "json"}))
    services = await start_services(data)
    try:
        async with open_api(services) as api:
            token = await api.login()
            await api.client.get(f"/d/nowhere/x.txt?sign={SIGN}")
            await api.get("/api/me", token=token)
    finally:
        await services.stop()
    access = [line for line in lines(captured) if line["logger"] == "manifold.access"]
    download = next(line for line in access if line["route"] == "/d/{path:path}")
    assert download["path"] == "/d/nowhere/x.txt"
    assert download["method"] == "GET" and isinstance(download["status"], int)
    assert any(line["path"] == "/api/me" and line["status"] == 200 for line in access)
    assert SIGN not in captured.getvalue()
    assert token not in captured.getvalue()
