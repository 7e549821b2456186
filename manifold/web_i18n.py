"""The page's language packs, served with Manifold's own storage form texts filled in.

The storage form of the OpenList page (shipped as built, never changed) shows an
option's label and help by looking them up in its language pack: the label under
``drivers.<driver>.<name>`` (``storages.common.<name>`` for the fields every driver
has) and, when the server gives the option any help, the help under the same key with
``-tips`` added. A key the pack lacks shows as itself, its last part capitalised with
spaces for underscores: ``Tls insecure skip verify-tips`` for an option AList does not
have. So the help and the "Unsafe" warnings the server describes its options with never
reached the admin.

Each pack is a script the page loads from ``/assets`` (``entry-<hash>.js``: its
dictionary exported as ``dict``; ``entry-legacy-<hash>.js`` for old browsers, the same
dictionary given to ``System.register``'s export). ``LanguagePacks`` answers those
addresses with the pack followed by a few lines that add Manifold's texts to the
dictionary before the page receives it, each only where the pack has no text of its own
(AList's texts, and their translations, stay). Manifold's texts are English in every
language. A file that is no pack, or a pack whose shape is not recognised, is served as
it is.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from manifold.drivers.registry import DriverRegistry

# The two shapes of a pack's end: the modern module's export, and the legacy build's
# call of the export function with the dictionary's object of sections.
_MODERN = re.compile(r"export\{([\w$]+) as dict\};?\s*$")
_LEGACY = re.compile(r"([\w$]+)\(`dict`,(\{[^{}]*\})\)")
# Adds texts to a dictionary where it has none: ``m`` is {section: {group: {key: text}}}.
# Written for old browsers too (the legacy build runs there).
_MERGE = (
    "function(d,m){for(var s in m)for(var g in m[s]){d[s]=d[s]||{};"
    "var o=d[s][g]=d[s][g]||{};for(var k in m[s][g])if(!(k in o))o[k]=m[s][g][k]}}"
)
# Words a label shows in capitals (the page's own fallback capitalises the first only).
_ACRONYMS = frozenset(
    {"api", "dav", "ftp", "http", "https", "id", "s3", "sftp", "smb", "ssh", "tls", "url"}
)


def label_of(name: str) -> str:
    """An option's label from its name: ``tls_insecure_skip_verify`` is "TLS insecure
    skip verify"."""
    words = [w.upper() if w in _ACRONYMS else w for w in name.split("_")]
    text = " ".join(words)
    return text[:1].upper() + text[1:]


def form_texts(registry: DriverRegistry) -> dict[str, dict[str, dict[str, str]]]:
    """Every driver's option labels and help, as the page's pack would hold them."""
    drivers: dict[str, dict[str, str]] = {}
    common: dict[str, str] = {}
    for info in registry.all():
        shown = registry.info_json(info.name)
        common.update(_texts(shown["common"]))
        drivers[info.name] = _texts(shown["additional"] or [])
    return {"drivers": drivers, "storages": {"common": common}}


def _texts(items: list[dict[str, Any]]) -> dict[str, str]:
    texts: dict[str, str] = {}
    for item in items:
        texts[item["name"]] = label_of(item["name"])
        if item["help"]:
            texts[f"{item['name']}-tips"] = item["help"]
    return texts


def with_texts(pack: str, texts: dict[str, Any]) -> str | None:
    """``pack`` with ``texts`` filled into its dictionary; None when it is no pack."""
    data = json.dumps(texts, ensure_ascii=True)
    modern = _MODERN.search(pack)
    if modern is not None:
        name = modern.group(1)
        return f"{pack[: modern.start()]}({_MERGE})({name},{data});{pack[modern.start() :]}"
    legacy = _LEGACY.search(pack)
    if legacy is not None:
        call, sections = legacy.group(1), legacy.group(2)
        filled = f"{call}(`dict`,(function(d){{({_MERGE})(d,{data});return d}})({sections}))"
        return pack[: legacy.start()] + filled + pack[legacy.end() :]
    return None


class LanguagePacks:
    """The packs of one asset folder, each answered with the current drivers' texts."""

    def __init__(self, folder: Path, registry: DriverRegistry) -> None:
        self._folder = folder
        self._registry = registry
        self._texts = ""
        self._made: dict[str, bytes | None] = {}

    def answer(self, path: str) -> bytes | None:
        """The body for ``path`` (relative to the folder) when it is a pack; None for
        any other file, which is served from the disk."""
        if "/" in path or not (path.startswith("entry-") and path.endswith(".js")):
            return None
        texts = form_texts(self._registry)
        key = json.dumps(texts, sort_keys=True)
        if key != self._texts:  # a driver registered since: every pack anew
            self._texts, self._made = key, {}
        if path not in self._made:
            self._made[path] = self._build(path, texts)
        return self._made[path]

    def _build(self, path: str, texts: dict[str, Any]) -> bytes | None:
        file = self._folder / path
        if not file.is_file():
            return None
        filled = with_texts(file.read_text(encoding="utf-8"), texts)
        return filled.encode() if filled is not None else None
