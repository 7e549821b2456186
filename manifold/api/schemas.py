"""Request bodies and response shapes, with the API's JSON names exactly."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict

from manifold.models import Meta, SettingItem, SshKey, User


class RequestBody(BaseModel):
    """Unknown fields are ignored (clients send whole objects back); wrong types are refused."""

    model_config = ConfigDict(strict=True, extra="ignore")


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
