"""The driver registry and the driver info it derives from each driver's code."""

from __future__ import annotations

import importlib
import json
import textwrap
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from manifold.drivers import registry
from manifold.drivers.base import Driver, DriverConfig, LinkArgs, RootID, option
from manifold.drivers.local.driver import LocalDriver
from manifold.drivers.options import describe_options
from manifold.drivers.registry import DriverRegistry, common_items
from manifold.errors import InvalidRequest, NotFound, NotSupported
from manifold.models import Link, Obj, Storage
from tests.drivers.inert import InertDriver

# Written out by hand from the reference, so a drift in the code shows up here.
LOCAL_CONFIG = {
    "name": "Local",
    "local_sort": True,
    "only_local": True,
    "only_proxy": False,
    "no_cache": True,
    "no_upload": False,
    "need_ms": False,
    "default_root": "/",
    "alert": "",
}
LOCAL_ADDITIONAL = [
    ("root_folder_path", "string", "/", True),
    ("thumbnail", "bool", "", True),
    ("thumb_cache_folder", "string", "", False),
    ("thumb_concurrency", "string", "16", False),
    ("video_thumb_pos", "string", "20%", False),
    ("show_hidden", "bool", "true", False),
    ("mkdir_perm", "string", "777", False),
    ("recycle_bin_path", "string", "delete permanently", False),
]
ITEM_KEYS = {"name", "type", "default", "options", "required", "help"}


class Bare(InertDriver[BaseModel]):
    async def list(self, dir: Obj) -> list[Obj]:
        return []

    async def link(self, file: Obj, args: LinkArgs) -> Link:
        return Link()


class Options(RootID):
    flag: bool = option(False)
    count: int = option(3, help="how many")
    mode: str = option("a", type="select", options="a,b", required=True)
    notes: str = option("", type="text")


@pytest.fixture
def local_info() -> dict[str, Any]:
    return registry.builtin_registry().info_json("Local")


def test_local_is_registered_under_its_alist_name() -> None:
    drivers = registry.builtin_registry()
    info = drivers.get("Local")
    assert (info.name, info.available, info.driver_cls) == ("Local", True, LocalDriver)
    remote_only = {"list_refreshed", "archive_meta", "archive_list", "archive_link"}
    remote_only |= {"archive_decompress", "multipart_begin"}  # a store's own multipart
    assert info.capabilities == set(Driver.OPTIONAL_METHODS) - {"other", "list_pages", *remote_only}
    assert "Local" in [d.name for d in drivers.all()]


def test_every_driver_package_is_discovered() -> None:
    packages = sorted(
        p.name
        for p in Path(registry.__file__).parent.iterdir()
        if (p / "meta.py").exists() and not p.name.startswith("_")
    )
    found = registry.builtin_registry().all()
    assert len(found) == len(packages)
    assert {"Local", "Alias"} <= {d.name for d in found}
    assert all(d.available for d in found), [(d.name, d.reason) for d in found]
    assert all(d.available for d in found)


def test_local_info_config_and_common_items(local_info: dict[str, Any]) -> None:
    assert set(local_info) == {"common", "additional", "config"}
    assert local_info["config"] == LOCAL_CONFIG
    common = local_info["common"]
    assert [item["name"] for item in common] == [
        "mount_path",
        "order",
        "remark",
        "webdav_policy",
        "down_proxy_url",
        "order_by",
        "order_direction",
        "extract_folder",
        "disable_index",
        "enable_sign",
    ]
    assert all(set(item) == ITEM_KEYS for item in common)
    policy = common[3]
    assert (policy["default"], policy["options"], policy["required"]) == (
        "native_proxy",
        "use_proxy_url,native_proxy",
        True,
    )


def test_local_additional_items_come_from_the_options_model(local_info: dict[str, Any]) -> None:
    additional = local_info["additional"]
    assert all(set(item) == ITEM_KEYS for item in additional)
    shown = [(i["name"], i["type"], i["default"], i["required"]) for i in additional]
    assert shown == LOCAL_ADDITIONAL
    assert additional[5]["help"] == "show hidden directories and files"
    json.dumps(local_info)  # the endpoint serialises it as is


def test_unknown_driver_is_not_found() -> None:
    with pytest.raises(NotFound, match=r"^driver \[Nope\] not found$") as caught:
        registry.builtin_registry().info_json("Nope")
    assert caught.value.code == 404


def test_cached_redirecting_driver_gets_the_other_common_items() -> None:
    config = DriverConfig(name="X", proxy_range_option=True)
    names = [item["name"] for item in common_items(config)]
    assert names == [
        "mount_path",
        "order",
        "remark",
        "cache_expiration",
        "web_proxy",
        "webdav_policy",
        "proxy_range",
        "down_proxy_url",
        "extract_folder",
        "disable_index",
        "enable_sign",
    ]
    cache = common_items(config)[3]
    assert (cache["type"], cache["default"], cache["required"]) == ("number", "30", True)
    assert common_items(config)[5]["options"] == "302_redirect,use_proxy_url,native_proxy"


def test_describe_options_derives_types_and_defaults() -> None:
    items = {item["name"]: item for item in describe_options(Options, default_root="0")}
    assert items["root_folder_id"]["default"] == "0" and items["root_folder_id"]["required"]
    assert next(iter(items)) == "root_folder_id"  # the mix-in's field comes first
    assert (items["flag"]["type"], items["flag"]["default"]) == ("bool", "false")
    assert (items["count"]["type"], items["count"]["default"]) == ("number", "3")
    assert items["count"]["help"] == "how many"
    assert (items["mode"]["type"], items["mode"]["options"]) == ("select", "a,b")
    assert items["notes"]["type"] == "text"


def test_only_a_root_mix_in_makes_a_root_option() -> None:
    class NamedAlike(BaseModel):
        root_folder_id: str = option("")

    [item] = describe_options(NamedAlike, default_root="0")
    assert (item["default"], item["required"]) == ("", False)


def test_driver_without_options_has_null_additional() -> None:
    table = DriverRegistry()
    table.register("Bare", Bare, BaseModel, DriverConfig(name="Bare"))
    assert table.info_json("Bare")["additional"] is None
    assert table.get("Bare").capabilities == frozenset()


def test_registered_name_must_match_config() -> None:
    with pytest.raises(ValueError, match="config says"):
        DriverRegistry().register("Bare", Bare, BaseModel, DriverConfig(name="Other"))


def test_build_validates_the_addition() -> None:
    drivers = registry.builtin_registry()
    storage = Storage(id=1, mount_path="/l", driver="Local", addition='{"root_folder_path": "/"}')
    built = drivers.build(storage)
    assert isinstance(built, LocalDriver) and built.options.show_hidden
    storage.addition = "{}"  # the root is mandatory: never default to the whole disk
    with pytest.raises(InvalidRequest):
        drivers.build(storage)


def write_package(root: Path, name: str, driver_source: str, meta_source: str) -> str:
    package = root / name
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "meta.py").write_text(textwrap.dedent(meta_source))
    (package / "driver.py").write_text(textwrap.dedent(driver_source))
    return name


FAKE_META = """
    from pydantic import BaseModel
    from manifold.drivers.base import DriverConfig, option

    CONFIG = DriverConfig(name="Fake", local_sort=True)

    class Addition(BaseModel):
        endpoint: str = option("", required=True, help="where")
"""


def test_driver_with_a_missing_library_is_listed_unavailable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.syspath_prepend(str(tmp_path))
    driver_source = "import no_such_library_for_manifold_tests\nDRIVER = None\n"
    package = write_package(tmp_path, "fake_missing_lib", driver_source, FAKE_META)
    table = DriverRegistry()
    info = table.load_package(package)
    assert (info.available, info.driver_cls, info.capabilities) == (False, None, frozenset())
    assert "no_such_library_for_manifold_tests" in info.reason
    assert [d.name for d in table.all()] == ["Fake"]
    assert table.info_json("Fake")["additional"][0]["name"] == "endpoint"
    with pytest.raises(NotSupported, match="unavailable"):
        table.build(Storage(id=1, mount_path="/f", driver="Fake"))


@pytest.mark.parametrize(
    "failure",
    ['raise OSError("libfake.so: cannot open shared object file")', "raise RuntimeError('no')"],
)
def test_a_library_failing_at_import_in_any_way_leaves_the_driver_listed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, failure: str
) -> None:
    monkeypatch.syspath_prepend(str(tmp_path))
    name = f"fake_raising_{abs(hash(failure))}"
    package = write_package(tmp_path, name, f"{failure}\nDRIVER = None\n", FAKE_META)
    info = DriverRegistry().load_package(package)
    assert (info.available, info.config.name) == (False, "Fake")
    assert info.reason


def test_driver_whose_meta_fails_is_still_listed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.syspath_prepend(str(tmp_path))
    meta_source = "import no_such_library_for_manifold_meta\n"
    package = write_package(tmp_path, "fake_broken_meta", "DRIVER = None\n", meta_source)
    info = DriverRegistry().load_package(package)
    assert not info.available and "no_such_library_for_manifold_meta" in info.reason
    assert info.config.name == "fake_broken_meta"


def test_discovery_registers_a_driver_folder_and_skips_templates(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.syspath_prepend(str(tmp_path))
    (tmp_path / "plugins").mkdir()
    (tmp_path / "plugins" / "__init__.py").write_text("")
    driver_source = "import no_such_library_for_manifold_tests\nDRIVER = None\n"
    write_package(tmp_path / "plugins", "fake", driver_source, FAKE_META)
    write_package(tmp_path / "plugins", "_template", driver_source, FAKE_META)
    table = DriverRegistry()
    table.discover(importlib.import_module("plugins"))
    assert [d.name for d in table.all()] == ["Fake"]


def test_an_invalid_addition_is_named_without_the_values_given() -> None:
    # An addition holds passwords: the error says which field, never what was in it.
    addition = json.dumps({"address": ["hunter2-secret"], "password": "hunter2-secret"})
    storage = Storage(1, "/smb", "SMB", addition=addition)
    with pytest.raises(InvalidRequest) as caught:
        registry.builtin_registry().build(storage)
    assert "address: Input should be a valid string" in caught.value.message
    assert "hunter2" not in caught.value.message
    assert caught.value.__cause__ is None
