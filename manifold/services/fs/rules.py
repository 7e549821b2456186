"""The rule book every front end shares: what a write may replace at its destination.

Each protocol says what its verb asks for, and nothing more: WebDAV's
``Overwrite: T`` asks to replace anything (RFC 4918: the destination, file or
folder, is deleted first), SFTP's ``posix-rename@openssh.com``, FTP's ``RNTO`` and
``STOR``, S3's ``PutObject`` and ``CopyObject`` and the API's ``overwrite`` ask to
replace a file by a file, and SFTP's plain rename asks to replace nothing. The
decision is made here, once, before anything is touched:

* a destination that is the source reached by another path is the source itself
  (the caller decides whether that is a no-op); one inside the source, or one that
  holds the source (an ancestor), is ``Overlapping``, whatever the request asked;
* a taken destination is ``FileExists`` unless the request replaces, and a folder on
  either side is ``FileExists`` unless the request replaces folders, or (the API's
  copy with ``overwrite``, as AList does it) merges a folder into a folder: the
  folder stays and each file copied into it replaces its namesake;
* replacing needs the remove permission, since the replaced object is gone after,
  except an empty file, which loses nothing (the placeholder a WebDAV ``LOCK`` makes
  and the client's ``PUT`` then fills);
* a folder that goes must be removable whole by the caller (no entry withheld from
  them), as a remove checks it.

The steps that then place the object (``placing``) never replace what these rules
refused, and never a folder that holds the source, whoever calls them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from manifold.errors import FileExists, Overlapping, PermissionDenied
from manifold.models import Obj, Perm, User
from manifold.paths import clean_path, is_sub_path, split_path

if TYPE_CHECKING:
    from manifold.services.fs.tree import FileTree

INTO_ITSELF = "the destination folder is a subfolder of the source folder"
HOLDS_SOURCE = "the destination holds the source: it cannot be replaced by it"


@dataclass(frozen=True)
class Replace:
    """What a request may replace at a taken destination."""

    files: bool = False  # a file by a file
    folders: bool = False  # anything by anything: a folder on either side
    merge: bool = False  # a folder copied into a folder of its name, file by file

    @classmethod
    def of(cls, overwrite: bool, folders: bool = False) -> Replace:
        """A request's ``overwrite``, replacing folders too where its protocol says so."""
        return cls(files=overwrite, folders=overwrite and folders)


NOTHING = Replace()
FILES = Replace(files=True)
ANYTHING = Replace(files=True, folders=True)


async def overlap(tree: FileTree, src: str, dst: str) -> bool:
    """Whether ``dst`` is the object at ``src`` itself, reached by whatever path;
    ``Overlapping`` when ``dst`` lies inside it or holds it."""
    if clean_path(src) == clean_path(dst):
        return True
    real, real_dst = await tree.backing_path(src), await tree.backing_path(dst)
    if real == real_dst:
        return True
    if is_sub_path(real, real_dst):
        raise Overlapping(INTO_ITSELF)
    if is_sub_path(real_dst, real):
        raise Overlapping(HOLDS_SOURCE)
    return False


async def destination(
    tree: FileTree, user: User, dst: str, replace: Replace, source: Obj | None
) -> Obj | None:
    """What stands at ``dst`` and may go for ``source`` (None for a new folder, or a
    put that has no object yet: a file), or None for a free name; refused by the
    rules above otherwise. The overlap of a source with ``dst`` is ``overlap``'s."""
    existing = await tree.exists(tree.place(dst))
    if existing is None:
        return None
    name = split_path(dst)[1]
    if not replace.files:
        raise FileExists(name)
    moving_folder = source is not None and source.is_dir
    merging = replace.merge and existing.is_dir and moving_folder
    if (existing.is_dir or moving_folder) and not (replace.folders or merging):
        raise FileExists(name)
    if not may_replace(user, existing):
        raise PermissionDenied()
    return existing


def may_replace(user: User, existing: Obj) -> bool:
    """Whether ``user`` may have ``existing`` replaced (or, a folder, merged into): the
    remove bit, unless it is an empty file, whose replacing loses nothing."""
    if not existing.is_dir and existing.size == 0:
        return True
    return user.can(Perm.REMOVE)
