"""The table of drivers by name, and what the admin API shows about each.

Drivers are discovered: every package under ``manifold.drivers`` is one; a
driver whose third-party library cannot be imported is still listed, marked
unavailable with the import error as the reason, so start-up never breaks and the
admin sees why. Names are AList's exactly: stored storages refer to them.
"""

from __future__ import annotations

import importlib
import pkgutil
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from pydantic import BaseModel, ValidationError

from manifold.drivers.base import Driver, DriverConfig
from manifold.drivers.options import describe_options
from manifold.errors import InvalidRequest, NotFound, NotSupported
from manifold.models import Storage


@dataclass(frozen=True, slots=True)
class DriverInfo:
    """One registered driver; ``driver_cls`` is None when it is unavailable."""

    name: str
    config: DriverConfig
    options: type[BaseModel]
    driver_cls: type[Driver[Any]] | None
    capabilities: frozenset[str]
    available: bool = True
    reason: str = ""


class _NoOptions(BaseModel):
    """Options of a driver whose meta module itself failed to import."""


class DriverRegistry:
    """Drivers by name. Each server builds its own (``builtin_registry``)."""

    def __init__(self) -> None:
        self._drivers: dict[str, DriverInfo] = {}

    def register(
        self,
        name: str,
        driver_cls: type[Driver[Any]],
        options_cls: type[BaseModel],
        config: DriverConfig,
    ) -> DriverInfo:
        """Add a usable driver; its capabilities are read from the class."""
        _check_name(name, config)
        info = DriverInfo(name, config, options_cls, driver_cls, driver_cls.capabilities())
        self._drivers[name] = info
        return info

    def register_unavailable(
        self, name: str, options_cls: type[BaseModel], config: DriverConfig, reason: str
    ) -> DriverInfo:
        """List a driver that cannot run here, keeping what it can still describe."""
        _check_name(name, config)
        info = DriverInfo(name, config, options_cls, None, frozenset(), False, reason)
        self._drivers[name] = info
        return info

    def all(self) -> list[DriverInfo]:
        """Every registered driver, available or not, sorted by name."""
        return [self._drivers[name] for name in sorted(self._drivers)]

    def get(self, name: str) -> DriverInfo:
        """The driver called ``name``; ``NotFound`` (AList's 404 text) otherwise."""
        info = self._drivers.get(name)
        if info is None:
            raise NotFound(f"driver [{name}] not found")
        return info

    def info_json(self, name: str) -> dict[str, Any]:
        """``{"common", "additional", "config"}`` as ``/api/admin/driver/info`` returns it."""
        info = self.get(name)
        additional = describe_options(info.options, info.config.default_root)
        return {
            "common": common_items(info.config),
            "additional": additional or None,
            "config": info.config.to_json(),
        }

    def build(self, storage: Storage) -> Driver[Any]:
        """A driver instance for ``storage`` with its addition validated (not yet init'd).

        Raises ``NotFound`` for an unknown driver, ``NotSupported`` for an
        unavailable one and ``InvalidRequest`` when the addition does not validate.
        """
        info = self.get(storage.driver)
        if info.driver_cls is None:
            raise NotSupported(f"driver {info.name} is unavailable: {info.reason}")
        try:
            options = info.options.model_validate_json(storage.addition or "{}")
        except ValidationError as exc:
            # Each field and what is wrong with it, never the values given: an
            # addition holds passwords and keys.
            problems = "; ".join(
                f"{'.'.join(map(str, e['loc'])) or 'addition'}: {e['msg']}"
                for e in exc.errors(include_input=False, include_url=False)
            )
            raise InvalidRequest(f"invalid addition: {problems}") from None
        return info.driver_cls(storage, options)

    def discover(self, package: ModuleType | None = None) -> list[DriverInfo]:
        """Register every driver package inside ``package`` (``manifold.drivers``).

        A driver is a sub-package holding ``meta.py``; adding one is adding its
        folder. Packages named with a leading underscore (templates) are skipped.
        """
        package = package or importlib.import_module("manifold.drivers")
        found = pkgutil.iter_modules(package.__path__, f"{package.__name__}.")
        return [
            self.load_package(module.name)
            for module in sorted(found, key=lambda m: m.name)
            if module.ispkg and not module.name.rpartition(".")[2].startswith("_")
        ]

    def load_package(self, package: str) -> DriverInfo:
        """Register the driver in ``package``, or list it unavailable if an import fails.

        Its name is its config's; a package whose ``meta`` cannot be imported is
        listed under the package's own name. Any failure counts, not only a missing
        module: a library's bindings can raise ``OSError`` (a shared object that will
        not load) or anything else at import, and one driver must not stop the server.
        """
        try:
            meta = importlib.import_module(f"{package}.meta")
        except Exception as exc:
            name = package.rpartition(".")[2]
            return self.register_unavailable(name, _NoOptions, DriverConfig(name), str(exc))
        config: DriverConfig = meta.CONFIG
        options: type[BaseModel] = meta.Addition
        try:
            driver_cls: type[Driver[Any]] = importlib.import_module(f"{package}.driver").DRIVER
        except Exception as exc:
            return self.register_unavailable(config.name, options, config, str(exc))
        return self.register(config.name, driver_cls, options, config)


def _check_name(name: str, config: DriverConfig) -> None:
    # The registry key and the config name both reach clients; they must agree.
    if name != config.name:
        raise ValueError(f"driver registered as {name!r} but its config says {config.name!r}")


def _item(
    name: str,
    type: str,
    *,
    default: str = "",
    options: str = "",
    required: bool = False,
    help: str = "",
) -> dict[str, Any]:
    return {
        "name": name,
        "type": type,
        "default": default,
        "options": options,
        "required": required,
        "help": help,
    }


def common_items(config: DriverConfig) -> list[dict[str, Any]]:
    """The storage fields every driver's form shows, in AList's order, per its config."""
    mount_help = "The path you want to mount to, it is unique and cannot be repeated"
    items = [
        _item("mount_path", "string", required=True, help=mount_help),
        _item("order", "number", help="use to sort"),
        _item("remark", "text"),
    ]
    if not config.no_cache:
        cache_help = "The cache expiration time for this storage"
        items.append(
            _item("cache_expiration", "number", default="30", required=True, help=cache_help)
        )
    items += _proxy_items(config)
    items.append(_item("down_proxy_url", "text"))
    if config.local_sort:
        items.append(_item("order_by", "select", options="name,size,modified"))
        items.append(_item("order_direction", "select", options="asc,desc"))
    items += [
        _item("extract_folder", "select", options="front,back"),
        _item("disable_index", "bool", default="false", required=True),
        _item("enable_sign", "bool", default="false", required=True),
    ]
    return items


def _proxy_items(config: DriverConfig) -> list[dict[str, Any]]:
    if config.must_proxy:
        policies = "use_proxy_url,native_proxy"
        return [
            _item(
                "webdav_policy", "select", default="native_proxy", options=policies, required=True
            )
        ]
    policies = "302_redirect,use_proxy_url,native_proxy"
    items = [
        _item("web_proxy", "bool"),
        _item("webdav_policy", "select", default="302_redirect", options=policies, required=True),
    ]
    if config.proxy_range_option:
        items.append(_item("proxy_range", "bool", help="Need to enable proxy"))
    return items


def builtin_registry() -> DriverRegistry:
    """A registry of every driver package under ``manifold.drivers`` (one per server)."""
    registry = DriverRegistry()
    registry.discover()
    return registry
