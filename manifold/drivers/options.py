"""What the storage form shows of a driver's options: AList's item dicts, derived
from the options model's fields (``option`` in ``manifold.drivers.base`` puts the
item metadata on each field; this module reads it back).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel
from pydantic.fields import FieldInfo

from manifold.drivers.base import ITEM_KEY, ItemType, RootID, RootPath


def _root_options(model_cls: type[BaseModel]) -> set[str]:
    names = set()
    if issubclass(model_cls, RootPath):
        names.add("root_folder_path")
    if issubclass(model_cls, RootID):
        names.add("root_folder_id")
    return names


def describe_options(model_cls: type[BaseModel], default_root: str = "") -> list[dict[str, Any]]:
    """AList's item dicts ``{name,type,default,options,required,help}`` in field order.

    As in AList, a root option without a default shows the driver's ``default_root``
    and is required exactly when that default is not empty.
    """
    items = [_describe_field(name, info) for name, info in model_cls.model_fields.items()]
    roots = _root_options(model_cls)
    for item in items:
        if item["name"] in roots and not item["default"]:
            item["default"] = default_root
            item["required"] = default_root != ""
    return items


def _describe_field(name: str, info: FieldInfo) -> dict[str, Any]:
    extra = info.json_schema_extra if isinstance(info.json_schema_extra, dict) else {}
    meta = extra.get(ITEM_KEY)
    if not isinstance(meta, dict):
        meta = {}
    shown = meta.get("shown_default")
    return {
        "name": info.alias or name,
        "type": meta.get("type") or _item_type(info.annotation),
        "default": shown if shown is not None else _default_text(info),
        "options": meta.get("options", ""),
        "required": bool(meta.get("required", False)),
        "help": meta.get("help", ""),
    }


def _item_type(annotation: Any) -> ItemType:
    if annotation is bool:
        return "bool"
    if annotation in (int, float):
        return "number"
    return "string"


def _default_text(info: FieldInfo) -> str:
    if info.is_required():
        return ""
    value = info.get_default(call_default_factory=True)
    if isinstance(value, bool):
        return "true" if value else "false"
    return "" if value is None else str(value)


def secret_options(model_cls: type[BaseModel]) -> list[str]:
    """The names (as stored) of the options marked ``secret`` (``option(secret=True)``)."""
    found = []
    for name, info in model_cls.model_fields.items():
        extra = info.json_schema_extra if isinstance(info.json_schema_extra, dict) else {}
        meta = extra.get(ITEM_KEY)
        if isinstance(meta, dict) and meta.get("secret"):
            found.append(info.alias or name)
    return found
