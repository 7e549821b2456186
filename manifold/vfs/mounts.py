"""The mount table: which storage serves a virtual path. Pure; no I/O.

A path belongs to the mount whose path is its longest prefix on whole segments
(``/a/bc`` is not under ``/a/b``). Folders above deeper mounts that no storage
serves are virtual: they list the next segment of each mount below them. Several
storages mounted as ``/x``, ``/x.balance1``, ``/x.balance2`` form one group that
serves ``/x`` in turn.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Generic, TypeVar

from manifold.paths import clean_path, is_sub_path

T = TypeVar("T")

BALANCE = ".balance"


def actual_mount_path(mount_path: str) -> str:
    """The path a mount serves: everything from the last ``.balance`` on is cut."""
    index = mount_path.rfind(BALANCE)
    return clean_path(mount_path[:index] if index >= 0 else mount_path)


@dataclass(frozen=True, slots=True)
class Resolved(Generic[T]):
    mount_path: str
    target: T
    sub_path: str


class MountTable(Generic[T]):
    def __init__(self, entries: Iterable[tuple[str, T]] = ()) -> None:
        groups: dict[str, list[T]] = {}
        for mount_path, target in entries:
            groups.setdefault(actual_mount_path(mount_path), []).append(target)
        self._groups = groups
        self._turns = {path: itertools.cycle(range(len(ts))) for path, ts in groups.items()}
        # Longest first, so the first prefix that matches is the longest.
        self._order = sorted(groups, key=lambda p: (-len(p), p))

    def __len__(self) -> int:
        return len(self._groups)

    def resolve(self, path: str) -> Resolved[T] | None:
        """The mount serving ``path`` and the path inside it, or None."""
        path = clean_path(path)
        for mount_path in self._order:
            if is_sub_path(mount_path, path):
                targets = self._groups[mount_path]
                target = targets[next(self._turns[mount_path])] if len(targets) > 1 else targets[0]
                sub = path[len(mount_path) :] if mount_path != "/" else path
                return Resolved(mount_path, target, clean_path(sub))
        return None

    def virtual_children(self, path: str) -> list[str]:
        """Names of the folders that deeper mounts make visible directly below ``path``."""
        path = clean_path(path)
        names: list[str] = []
        for mount_path in sorted(self._groups):
            if mount_path == path or not is_sub_path(path, mount_path):
                continue
            rest = mount_path[len(path) :].lstrip("/")
            name = rest.split("/", 1)[0]
            if name and name not in names:
                names.append(name)
        return names

    def is_virtual(self, path: str) -> bool:
        """Whether ``path`` is a folder only because deeper mounts lie below it."""
        return bool(self.virtual_children(path)) and clean_path(path) not in self._groups
