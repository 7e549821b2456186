"""Putting an object at a full path without losing anything on the way.

A move, a rename, a copy under a new name: the driver contract offers ``rename``
(same folder), ``move`` and ``copy`` (into a folder, keeping the name), and none of
them replaces a taken name. Here these steps are combined so that

* nothing but the destination path itself is ever touched: a namesake of the old
  name in the destination folder is passed by under a parking name, not cleared;
* the destination being the source itself, reached through any link or Alias, is a
  no-op, and a destination inside the source or holding it is refused before any
  step (``rules.overlap``);
* an object replaced at the destination is only set aside while the new one takes
  its place, and removed after; when a step fails, the steps before it are undone.
  A file copied over a file on a storage whose put replaces in one step
  (``ATOMIC_REPLACE``) is put over it instead, and a file moved or renamed over a
  file on a storage whose driver has ``move_over`` is moved over it in one step: in
  both the name never stands empty and nothing is parked.

Parking names are hidden (a leading dot) and never reserved for drivers' own use,
so no sweep of unfinished uploads can take an object parked here: should a step and
its undoing both fail, a parked object may be the only copy of a user's data. So the
clean-ups (undoing, removing what was set aside) run to their end even when the
caller is cancelled: a cancellation between the last rename and the removal of the
replaced object leaves nothing parked. Each parking is recorded before the step that
parks (``parking``), so what a process killed mid-way left parked is put back.
"""

from __future__ import annotations

import asyncio
import builtins
from collections.abc import Awaitable, Callable
from contextlib import suppress
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from manifold.drivers.base import ATOMIC_REPLACE
from manifold.errors import (
    ManifoldError,
    NotSupported,
    ObjectExists,
    ObjectNotFound,
    Overlapping,
    PermissionDenied,
    ServerError,
)
from manifold.models import Obj
from manifold.paths import (
    clean_path,
    is_sub_path,
    parking_name,
    refuse_long_name,
    split_path,
    validate_name,
)
from manifold.services.fs.parking import Parked
from manifold.services.fs.rules import HOLDS_SOURCE, overlap

if TYPE_CHECKING:
    from manifold.services.fs.tree import FileTree

# Aliases of aliases followed before the chain counts as a loop.
MAX_HOPS = 16


@runtime_checkable
class Forwarding(Protocol):
    """A driver whose entries are other mounts' entries (Alias)."""

    async def backing_path(self, path: str) -> str | None: ...


async def rename_to(tree: FileTree, path: str, dst: str, replace: bool) -> Obj:
    """Give the object at ``path`` the full path ``dst``: a rename, a move, or both.

    ``ObjectExists`` for a taken ``dst`` without ``replace``; across storages
    AList's "can't move" error.
    """
    src = tree.refuse_root(tree.place(path), "move")
    if await is_itself(tree, path, dst):
        return (await tree.lookup(path))[0]
    (src_dir, name), (dst_dir, new_name) = split_path(path), split_path(dst)
    validate_name(new_name)
    if new_name != name:
        refuse_long_name(new_name)
    if not src.same_storage(tree.place(dst_dir)):
        raise ServerError.across_storages()
    existing = await tree.exists(tree.place(dst))
    if existing is not None and not replace:
        raise ObjectExists()
    if existing is not None:
        await refuse_holding(tree, dst, path)
    if existing is not None and not existing.is_dir:
        moved = await _move_over(tree, path, dst)
        if moved is not None:
            return moved
    steps, parked = _Steps(tree), tree.parkings.operation()
    via, set_aside = name, ""
    try:
        if src_dir != dst_dir:
            via, obj = await _carry(tree, steps, parked, path, dst)
        if existing is not None:
            set_aside = clean_path(f"{dst_dir}/{parking_name()}")
            await parked.park(tree.place(set_aside), new_name, True)
            await steps.rename(dst, split_path(set_aside)[1])
        if via != new_name:
            obj = await steps.rename(clean_path(f"{dst_dir}/{via}"), new_name)
    except BaseException:
        await finished(_undo(steps, parked))
        raise
    await finished(_clear(tree, set_aside, parked))
    return obj


async def _carry(
    tree: FileTree, steps: _Steps, parked: Parked, path: str, dst: str
) -> tuple[str, Obj]:
    """Move ``path`` into the folder of ``dst``; the name it has there and the object.
    Its own name taken there, it passes by under a parking name, recorded in both
    folders before it goes: whenever the process dies, one record says where it is."""
    (src_dir, name), (dst_dir, new_name) = split_path(path), split_path(dst)
    if await tree.exists(tree.place(clean_path(f"{dst_dir}/{name}"))) is None:
        return name, await steps.move(path, dst_dir)
    via = parking_name()
    on_its_way = await parked.park(tree.place(clean_path(f"{src_dir}/{via}")), name, False)
    await steps.rename(path, via)
    await parked.park(tree.place(clean_path(f"{dst_dir}/{via}")), new_name, False)
    obj = await steps.move(clean_path(f"{src_dir}/{via}"), dst_dir)
    await parked.left(on_its_way)
    return via, obj


async def copy_to(tree: FileTree, path: str, dst: str, replace: bool) -> Obj:
    """Copy the object at ``path`` to the full path ``dst``; the copy once whole.

    Under a new name or over an existing object, the copy is made beside ``dst``
    and takes its place only when whole, so a failed copy leaves ``dst`` as it was.
    """
    src = tree.refuse_root(tree.place(path), "copy")
    if await is_itself(tree, path, dst):
        return (await tree.lookup(path))[0]
    (_, name), (dst_dir, new_name) = split_path(path), split_path(dst)
    validate_name(new_name)
    if new_name != name:
        refuse_long_name(new_name)
    existing = await tree.exists(tree.place(dst))
    if existing is not None and not replace:
        raise ObjectExists()
    if existing is not None:
        await refuse_holding(tree, dst, path)
        if await _put_over(tree, path, existing, dst_dir):
            return await tree.copy_file(path, dst_dir, name=new_name, overwrite=True)
    if existing is None and name == new_name:
        return await tree.copy(path, dst_dir)
    native = tree.copies_natively(src, tree.place(dst_dir))
    if existing is None and not native:
        return await tree.copy_across(path, dst)
    # A driver copies under the source's own name: into a folder of its own first.
    beside = clean_path(f"{dst_dir}/{parking_name()}")
    made = clean_path(f"{beside}/{name}") if native else beside
    parked = tree.parkings.operation()
    try:
        # No home: a copy in progress may be partial, and goes if the process dies.
        await parked.park(tree.place(beside), "", True)
        if native:
            await tree.make_dir(beside)
            await tree.copy(path, beside)
        else:
            await tree.copy_across(path, beside)
        return await rename_to(tree, made, dst, replace)
    finally:
        await finished(_clear_beside(tree, beside, parked))


async def _undo(steps: _Steps, parked: Parked) -> None:
    """Undo the steps of a failed operation. Its records are let go of rather than
    dropped: a step that failed may have parked its object all the same (a back end
    that did it, then timed out), which recovery finds out."""
    await steps.undo()
    await parked.close(settled=False)


async def _clear(tree: FileTree, set_aside: str, parked: Parked) -> None:
    """Remove what a replace set aside; its records go, or stay for recovery when the
    removal fails."""
    try:
        if set_aside:
            await tree.remove(set_aside)
    except BaseException:
        await parked.close(settled=False)
        raise
    await parked.close(settled=True)


async def _clear_beside(tree: FileTree, beside: str, parked: Parked) -> None:
    """Remove what is left of a copy made beside (nothing once it took its place)."""
    try:
        await tree.remove(beside)
    except ObjectNotFound:
        pass
    except ManifoldError:
        await parked.close(settled=False)
        return
    await parked.close(settled=True)


# Clean-ups still running for callers that were cancelled (a task must be held).
_CLEANUPS: set[asyncio.Future[None]] = set()


async def finished(cleanup: Awaitable[None]) -> None:
    """Await ``cleanup``, which runs to its end even when the caller is cancelled
    meanwhile (the caller's cancellation is raised at once; a failure of the clean-up
    it no longer waits for is dropped, as nobody is left to hear it)."""
    task = asyncio.ensure_future(cleanup)
    _CLEANUPS.add(task)
    task.add_done_callback(_forget_cleanup)
    await asyncio.shield(task)


def _forget_cleanup(task: asyncio.Future[None]) -> None:
    _CLEANUPS.discard(task)
    if not task.cancelled():
        task.exception()  # retrieved: reported to the caller if it was still waiting


async def _move_over(tree: FileTree, path: str, dst: str) -> Obj | None:
    """The file ``path`` moved over the file at ``dst`` in one step, or None where the
    storage cannot (no ``move_over``, a folder to move, a server without the means)."""
    if not tree.moves_over(path, dst) or (await tree.lookup(path))[0].is_dir:
        return None
    try:
        return await tree.move_over(path, dst)
    except NotSupported:
        return None


async def _put_over(tree: FileTree, path: str, existing: Obj, dst_dir: str) -> bool:
    """Whether a copy of ``path`` replaces the file ``existing`` by one put."""
    if existing.is_dir or ATOMIC_REPLACE not in tree.place(dst_dir).ops.driver.promises():
        return False
    return not (await tree.lookup(path))[0].is_dir


async def is_itself(tree: FileTree, path: str, dst: str) -> bool:
    """Whether ``dst`` is the object at ``path`` itself, reached by whatever path;
    ``Overlapping`` when ``dst`` lies inside it or holds it (``rules.overlap``)."""
    return await overlap(tree, path, dst)


async def refuse_holding(tree: FileTree, dst: str, path: str) -> None:
    """``Overlapping`` when the folder ``dst``, to be replaced, holds the source
    ``path``: replacing it would take the source with it."""
    if is_sub_path(await backing_path(tree, dst), await backing_path(tree, path)):
        raise Overlapping(HOLDS_SOURCE)


async def backing_path(tree: FileTree, path: str, hops: int = 0) -> str:
    """Where ``path`` really is once Aliases and links are followed; for a path that
    nothing holds yet, where it would be made."""
    if hops > MAX_HOPS:
        raise ServerError(f"too many aliases lead to {path}: is there a loop?")
    place = tree.find(path)
    if place is None:
        return path
    driver = place.ops.driver
    try:
        if not isinstance(driver, Forwarding):
            return await tree.real_path_of(path)
        inner = await driver.backing_path(place.sub_path)
    except PermissionDenied:
        return path  # links lead out of the storage: no other mount's path either
    except ObjectNotFound:
        if place.is_root:
            raise
        parent, name = split_path(path)
        return clean_path(f"{await backing_path(tree, parent, hops + 1)}/{name}")
    return path if inner is None else await backing_path(tree, inner, hops + 1)


class _Steps:
    """The renames and moves made so far, undone in reverse when a later step fails."""

    def __init__(self, tree: FileTree) -> None:
        self._tree = tree
        self._undo: builtins.list[Callable[[], Awaitable[Obj]]] = []

    async def rename(self, path: str, new_name: str) -> Obj:
        obj = await self._tree.rename(path, new_name)
        parent, name = split_path(path)
        renamed = clean_path(f"{parent}/{new_name}")
        self._undo.append(lambda: self._tree.rename(renamed, name))
        return obj

    async def move(self, path: str, dst_dir: str) -> Obj:
        obj = await self._tree.move(path, dst_dir)
        parent, name = split_path(path)
        moved = clean_path(f"{dst_dir}/{name}")
        self._undo.append(lambda: self._tree.move(moved, parent))
        return obj

    async def undo(self) -> None:
        for step in reversed(self._undo):
            with suppress(ManifoldError):
                await step()
