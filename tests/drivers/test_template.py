"""The driver template: it imports, discovery leaves it out, and a copy of it under a
name without the underscore is a driver discovery finds."""

from __future__ import annotations

import importlib
import shutil
from pathlib import Path

import pytest

from manifold.drivers import registry
from manifold.drivers.base import Driver
from manifold.drivers.registry import DriverRegistry
from manifold.errors import NotSupported
from manifold.models import Storage

TEMPLATE = Path(registry.__file__).parent / "_template"


def test_the_template_imports_as_a_driver_with_only_the_mandatory_methods() -> None:
    meta = importlib.import_module("manifold.drivers._template.meta")
    driver_cls = importlib.import_module("manifold.drivers._template.driver").DRIVER
    assert issubclass(driver_cls, Driver)
    assert driver_cls.capabilities() == frozenset()
    assert meta.CONFIG.name == "Template"


def test_discovery_leaves_the_template_out() -> None:
    assert "Template" not in {info.name for info in registry.builtin_registry().all()}


async def test_a_copy_of_the_template_without_the_underscore_is_discovered(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.syspath_prepend(str(tmp_path))
    package = tmp_path / "template_copies"
    package.mkdir()
    (package / "__init__.py").write_text("")
    shutil.copytree(TEMPLATE, package / "example", ignore=shutil.ignore_patterns("__pycache__"))
    table = DriverRegistry()
    table.discover(importlib.import_module("template_copies"))
    (info,) = table.all()
    assert (info.name, info.available, info.reason) == ("Template", True, "")
    form = table.info_json("Template")["additional"]
    assert [item["name"] for item in form] == [
        "root_folder_path",
        "address",
        "username",
        "password",
    ]
    addition = '{"root_folder_path": "/", "address": "example.test:21"}'
    driver = table.build(Storage(id=1, mount_path="/t", driver="Template", addition=addition))
    with pytest.raises(NotSupported):  # the stand-in for a library refuses to connect
        await driver.init()
    await driver.drop()
