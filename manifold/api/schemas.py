"""Request bodies and response shapes, with the API's JSON names exactly."""

from __future__ import annotations

import re
from typing import Annotated, Any, get_args, get_origin

from annotated_types import Ge, Le
from pydantic import BaseModel, ConfigDict, field_validator, model_validator

from manifold.models import Meta, SettingItem, SshKey, User

# Every whole number a client sends is one of these two, so that none reaches the
# database (a 64-bit column) or an offset computation out of range.
Int64 = Annotated[int, Ge(-(2**63)), Le(2**63 - 1)]
# A page or page size; two of them multiplied (an offset) still fit in 64 bits.
PageNumber = Annotated[int, Ge(-(2**31)), Le(2**31 - 1)]

_SURROGATE = re.compile("[\ud800-\udfff]")


class RequestBody(BaseModel):
    """A request body decoded as Go's ``encoding/json`` decodes it into AList's structs.

    One rule for every endpoint: a missing key and ``null`` both leave a field at its
    zero value (so every field has a default, checked by the tests over every model);
    unknown keys are ignored (clients send whole objects back); a value of the wrong
    JSON type is refused (400 naming the field), never converted.
    """

    model_config = ConfigDict(strict=True, extra="ignore")

    @model_validator(mode="before")
    @classmethod
    def _null_is_missing(cls, data: Any) -> Any:
        if data is None:
            return {}  # null into a struct sets nothing
        if not isinstance(data, dict):
            return data
        shown = {}
        for key, value in data.items():
            if value is None:
                continue
            if isinstance(value, list) and None in value and key in cls.model_fields:
                zero = _zero_item(cls.model_fields[key].annotation)
                value = [zero if item is None else item for item in value]
            shown[key] = value
        return shown

    @field_validator("*", mode="before")
    @classmethod
    def _valid_text(cls, value: Any) -> Any:
        # JSON may escape half of a UTF-16 pair (\ud800); such text cannot be stored
        # or encoded anywhere below, so it is refused here, naming the field.
        if has_lone_surrogate(value):
            raise ValueError("text is not valid Unicode (lone surrogate)")
        return value


_ZEROS: dict[Any, Any] = {str: "", int: 0, bool: False, float: 0.0}


def _zero_item(annotation: Any) -> Any:
    """The zero value Go leaves for a ``null`` item of a list field (a struct: empty)."""
    args = get_args(annotation)
    item = (
        get_args(args[0])[0]
        if args and get_origin(args[0]) is Annotated
        else (args[0] if args else None)
    )
    return _ZEROS.get(item)  # None for a struct: its own validator makes it empty


def has_lone_surrogate(value: Any) -> bool:
    """Whether ``value`` (text, or lists and objects of it) holds half a UTF-16 pair."""
    if isinstance(value, str):
        return not value.isascii() and _SURROGATE.search(value) is not None
    if isinstance(value, list):
        return any(has_lone_surrogate(item) for item in value)
    if isinstance(value, dict):
        return any(has_lone_surrogate(k) or has_lone_surrogate(v) for k, v in value.items())
    return False


def user_json(user: User, with_otp: bool = False) -> dict[str, Any]:
    shown: dict[str, Any] = {
        "id": user.id,
        "username": user.username,
        "password": "",
        "base_path": user.base_path,
        "role": user.role,
        "disabled": user.disabled,
        "permission": user.permission,
        "sso_id": user.sso_id,
    }
    if with_otp:
        shown["otp"] = bool(user.otp_secret)
    return shown


def meta_json(meta: Meta) -> dict[str, Any]:
    return {
        "id": meta.id,
        "path": meta.path,
        "password": meta.password,
        "p_sub": meta.p_sub,
        "write": meta.write,
        "w_sub": meta.w_sub,
        "hide": meta.hide,
        "h_sub": meta.h_sub,
        "readme": meta.readme,
        "r_sub": meta.r_sub,
        "header": meta.header,
        "header_sub": meta.header_sub,
    }


def setting_json(item: SettingItem) -> dict[str, Any]:
    return {
        "key": item.key,
        "value": item.value,
        "help": item.help,
        "type": item.type,
        "options": item.options,
        "group": item.group,
        "flag": item.flag,
        "index": item.index,
    }


def sshkey_json(key: SshKey) -> dict[str, Any]:
    return {
        "id": key.id,
        "title": key.title,
        "fingerprint": key.fingerprint,
        "added_time": key.added_time.isoformat(),
        "last_used_time": key.last_used_time.isoformat(),
    }
