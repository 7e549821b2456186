"""Settings: the default table merged with saved values, cached in memory.

Reads never touch the database. A save validates every item first and writes all
or nothing, then refreshes the cache, so it takes effect at once. The server owns
an item's type, group, flag, options and help; a client only sets values.
"""

from __future__ import annotations

import asyncio
import json
import re
import secrets
import string
import uuid
from collections.abc import Callable, Iterable
from dataclasses import replace

import orjson

from manifold import API_LEVEL, VERSION_STRING
from manifold.db.repos import SettingRepo
from manifold.errors import BadRequest, ServerError
from manifold.models import SettingItem
from manifold.policy.patterns import Pattern, PatternError
from manifold.services.admin.settings_defaults import (
    DEFAULT_SETTINGS,
    MANIFOLD_VERSION_KEY,
    TOKEN_KEY,
    VERSION_KEY,
    Flag,
    SettingDefault,
)
from manifold.state.bus import Bus, MemoryBus

_ALNUM = string.ascii_letters + string.digits


def new_admin_token() -> str:
    tail = "".join(secrets.choice(_ALNUM) for _ in range(64))
    return f"manifold-{uuid.uuid4()}{tail}"


class SettingsService:
    def __init__(self, repo: SettingRepo, bus: Bus | None = None) -> None:
        self._repo = repo
        # Other processes reload their settings on every change saved here.
        self._bus: Bus = bus or MemoryBus()
        self._items: dict[str, SettingItem] = {}
        self._public_body = b""
        self._privacy: list[Pattern] = []
        self._name_table: dict[int, str] = {}
        self._types: dict[str, int] = {}
        self._guards: dict[str, list[Callable[[str], None]]] = {}
        self._saving = asyncio.Lock()
        # Bumped on every change, so what is built from settings (the web page) knows
        # when to build again.
        self.version = 0

    async def start(self) -> None:
        stored = {item.key: item for item in await self._repo.all()}
        merged = merge_defaults(stored, DEFAULT_SETTINGS)
        if not merged[TOKEN_KEY].value:
            merged[TOKEN_KEY].value = new_admin_token()
        await self._repo.upsert(merged.values())
        self._refresh(merged.values())

    async def reload(self) -> None:
        """Read the saved values again: another process saved some."""
        stored = {item.key: item for item in await self._repo.all()}
        async with self._saving:
            self._refresh(merge_defaults(stored, DEFAULT_SETTINGS).values())

    def _refresh(self, items: Iterable[SettingItem]) -> None:
        self._items = {item.key: item for item in sorted(items, key=lambda i: i.index)}
        public = {k: i.value for k, i in sorted(self._items.items()) if _is_public(i)}
        self._public_body = orjson.dumps({"code": 200, "message": "success", "data": public})
        self._privacy = _saved_privacy_regs(self.get("privacy_regs"))
        mapping = _char_mapping(self.get("filename_char_mapping"))
        self._name_table = {ord(k): v for k, v in mapping.items() if len(k) == 1}
        self._types = _type_table(self)
        self.version += 1

    def name_table(self) -> dict[int, str]:
        """A ``str.translate`` table for how driver names are shown (``/`` as ``|``)."""
        return self._name_table

    def type_of_extension(self, ext: str) -> int:
        """AList's file type code for a lower-case extension (0 when unknown)."""
        return self._types.get(ext, 0)

    def get(self, key: str, default: str = "") -> str:
        item = self._items.get(key)
        return item.value if item is not None else default

    def get_bool(self, key: str) -> bool:
        return self.get(key) in ("true", "1")

    def get_int(self, key: str, default: int) -> int:
        try:
            return int(self.get(key))
        except ValueError:
            return default

    def public_envelope(self) -> bytes:
        """The whole ``/api/public/settings`` response body, encoded once per change."""
        return self._public_body

    def all_items(self) -> list[SettingItem]:
        return list(self._items.values())

    def by_groups(self, groups: Iterable[int]) -> list[SettingItem]:
        wanted = set(groups)
        return [item for item in self._items.values() if item.group in wanted]

    def defaults(self, groups: Iterable[int] | None = None) -> list[SettingItem]:
        """The items of ``groups`` (every item for None) as a fresh install has them,
        group by group in ascending order, as OpenList's "load default settings"
        answers. Nothing is stored: the page shows them and the admin saves them. The
        admin token is the current one (its default is a new random token)."""
        fresh = merge_defaults({}, DEFAULT_SETTINGS)
        fresh[TOKEN_KEY].value = self.get(TOKEN_KEY)
        if groups is None:
            return list(fresh.values())
        return [
            item for group in sorted(set(groups)) for item in fresh.values() if item.group == group
        ]

    def items_for(self, keys: Iterable[str]) -> list[SettingItem]:
        found = []
        for key in keys:
            item = self._items.get(key)
            if item is None:
                raise BadRequest("record not found")
            found.append(item)
        return found

    def guard(self, key: str, check: Callable[[str], None]) -> None:
        """Let another service refuse a new value of ``key`` by raising a ManifoldError."""
        self._guards.setdefault(key, []).append(check)

    async def save(self, changes: Iterable[tuple[str, str]]) -> None:
        # One save at a time: each writes every item, so two at once could undo each other.
        async with self._saving:
            updated = {k: replace(v) for k, v in self._items.items()}
            for key, value in changes:
                item = updated.get(key)
                if item is None:
                    raise BadRequest(f"setting [{key}] does not exist")
                _validate(item, value)
                if value != item.value:
                    for check in self._guards.get(key, ()):
                        check(value)
                item.value = value
            await self._repo.upsert(updated.values())
            self._refresh(updated.values())
        await self._bus.publish("settings", {})

    async def delete(self, key: str) -> None:
        item = self._items.get(key)
        if item is None:
            raise ServerError("failed to get settingItem: record not found")
        if item.flag != Flag.DEPRECATED:
            raise ServerError(f"setting [{key}] is not deprecated")
        await self._repo.delete(key)
        self._refresh(i for k, i in self._items.items() if k != key)
        await self._bus.publish("settings", {})

    async def reset_token(self) -> str:
        token = new_admin_token()
        await self.save([(TOKEN_KEY, token)])
        return token

    def mask_private(self, message: str) -> str:
        """Replace every privacy-rule match with as many stars as it has UTF-8 bytes."""
        for pattern in self._privacy:
            message = pattern.mask(message)
        return message


def _is_public(item: SettingItem) -> bool:
    return item.flag in (Flag.PUBLIC, Flag.READONLY)


# Filled with the running versions at every start, never taken from the database:
# ``version`` is exactly AList's (clients parse it), ``manifold_version`` is Manifold's.
_RUNNING_VERSIONS = {VERSION_KEY: API_LEVEL, MANIFOLD_VERSION_KEY: VERSION_STRING}


def merge_defaults(
    stored: dict[str, SettingItem], defaults: Iterable[SettingDefault]
) -> dict[str, SettingItem]:
    """AList's start-up merge: the code owns every field but a value the admin changed."""
    merged: dict[str, SettingItem] = {}
    position = 0
    for position, default in enumerate(defaults):
        value = default.value
        old = stored.get(default.key)
        previous = default.pre_default if default.pre_default is not None else default.value
        running = _RUNNING_VERSIONS.get(default.key)
        if old is not None and running is None and old.value != previous:
            value = old.value
        if running is not None:
            value = running
        merged[default.key] = SettingItem(
            default.key, value, default.help, default.type, default.options,
            default.group, default.flag, position,
        )  # fmt: skip
    for key, old in stored.items():
        if key not in merged:
            position += 1
            old.flag = Flag.DEPRECATED
            old.index = position
            merged[key] = old
    return merged


def _validate(item: SettingItem, value: str) -> None:
    if value == item.value:
        return
    if item.flag == Flag.READONLY:
        raise BadRequest(f"setting [{item.key}] is read-only")
    if item.type == "number" and not re.fullmatch(r"-?[0-9]+", value):
        raise BadRequest(f"setting [{item.key}] must be a whole number")
    if item.type == "bool" and value not in ("true", "false"):
        raise BadRequest(f"setting [{item.key}] must be true or false")
    if item.type == "select" and value and value not in item.options.split(","):
        raise BadRequest(f"setting [{item.key}] must be one of {item.options}")
    if item.key == TOKEN_KEY and len(value) < 16:
        raise BadRequest("setting [token] must be at least 16 characters")
    _HOOKS.get(item.key, _no_hook)(value)


def _no_hook(_value: str) -> None:
    return None


def _check_char_mapping(value: str) -> None:
    try:
        loaded = json.loads(value)
    except ValueError:
        raise BadRequest("setting [filename_char_mapping] must be a JSON object") from None
    if not isinstance(loaded, dict) or not all(isinstance(v, str) for v in loaded.values()):
        raise BadRequest("setting [filename_char_mapping] must map strings to strings")


def _check_privacy_regs(value: str) -> None:
    try:
        compile_privacy_regs(value)
    except PatternError as exc:
        raise BadRequest(f"setting [privacy_regs]: {exc}") from None


_HOOKS = {
    "filename_char_mapping": _check_char_mapping,
    "privacy_regs": _check_privacy_regs,
}


def compile_privacy_regs(text: str) -> list[Pattern]:
    """One pattern per line; Go syntax (``(?U)``, ``[[:xdigit:]]``) as the defaults use."""
    return [Pattern(line) for line in text.splitlines() if line]


def _saved_privacy_regs(text: str) -> list[Pattern]:
    """Lines a save accepted, less any saved before they ran on RE2 that it refuses."""
    compiled = []
    for line in text.splitlines():
        try:
            compiled.extend(compile_privacy_regs(line))
        except PatternError:
            continue
    return compiled


def _char_mapping(value: str) -> dict[str, str]:
    try:
        loaded = json.loads(value)
    except ValueError:
        return {}
    return (
        {k: v for k, v in loaded.items() if isinstance(v, str)} if isinstance(loaded, dict) else {}
    )


# Checked in this order; the first list holding an extension gives its code.
_TYPE_SETTINGS = (("audio_types", 3), ("video_types", 2), ("image_types", 5), ("text_types", 4))


def _type_table(settings: SettingsService) -> dict[str, int]:
    table: dict[str, int] = {}
    for key, code in _TYPE_SETTINGS:
        for ext in settings.get(key).split(","):
            table.setdefault(ext, code)
    return table
