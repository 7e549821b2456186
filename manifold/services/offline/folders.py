"""The private folders downloads are fetched into, and keeping them empty.

Each download gets ``<temp>/offline/<tool>/<random id>`` of its own. Nothing of a
download stays there after it: a download that does not finish has its folder
removed by its task, a file that a delete policy removes after its transfer takes
the folders it leaves empty with it, and at start ``sweep`` removes every folder no
task can still use (a crash or a stop leaves some; a policy that keeps files keeps
them until then, as AList's clean of its temp folder at start does).

Paths of this folder are the server's own: ``without_paths`` takes them out of any
text a task shows its users.
"""

from __future__ import annotations

import contextlib
import copy
import os
import uuid
from pathlib import Path

from manifold.config import make_private
from manifold.errors import ManifoldError, ServerError
from manifold.localfs import discard_tree


class DownloadFolders:
    def __init__(self, root: Path) -> None:
        self.root = root

    def new(self, tool_name: str) -> str:
        """A private folder of its own for one download (made when first needed)."""
        if not self.root.exists():
            self.root.mkdir(mode=0o700, parents=True, exist_ok=True)
            make_private(self.root)
        folder = self.root / _safe(tool_name) / uuid.uuid4().hex
        folder.mkdir(mode=0o700, parents=True)
        return str(folder)

    def owner(self, path: str) -> Path | None:
        """The folder of the one download that ``path`` is in, if it is in one."""
        try:
            parts = Path(path).relative_to(self.root).parts
        except ValueError:
            return None
        return self.root / parts[0] / parts[1] if len(parts) >= 2 else None

    def inside(self, path: str) -> bool:
        real, base = os.path.realpath(path), os.path.realpath(self.root)
        return real.startswith(base + os.sep)

    def shown(self, path: str) -> str:
        """``path`` as tasks show it: from the tool's folder on."""
        return path.removeprefix(str(self.root))

    def sweep(self, needed: set[Path]) -> None:
        """Remove every download folder but those in ``needed``, and anything else
        found where the tools' folders are."""
        if not self.root.is_dir():
            return
        for tool_folder in self.root.iterdir():
            if tool_folder.is_symlink() or not tool_folder.is_dir():
                discard_tree(tool_folder)
                continue
            for folder in tool_folder.iterdir():
                if folder not in needed:
                    discard_tree(folder)
            with contextlib.suppress(OSError):
                tool_folder.rmdir()

    def discard_file(self, path: str) -> None:
        """Delete a downloaded file, and every folder of its download it leaves empty."""
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)
        self.prune(os.path.dirname(path))

    def prune(self, folder: str) -> None:
        """Remove ``folder`` and its parents up to its download's folder while empty."""
        top = self.owner(folder)
        path = Path(folder)
        while top is not None and path.is_relative_to(top):
            try:
                path.rmdir()
            except OSError:
                return  # not empty: another file of the download is still to be moved
            path = path.parent

    def without_paths(self, exc: BaseException) -> BaseException:
        """``exc`` with no path of this folder in its text: task errors are shown to
        users. A file system error keeps only its reason."""
        if isinstance(exc, OSError):
            return ServerError(exc.strerror or type(exc).__name__)
        if not isinstance(exc, ManifoldError):
            return exc
        text = exc.message
        for root in {str(self.root), os.path.realpath(self.root)}:
            text = text.replace(root, "")
        if text == exc.message:
            return exc
        clone = copy.copy(exc)
        clone.message, clone.args = text, (text,)
        return clone


def _safe(name: str) -> str:
    return "".join(c if c.isalnum() else "_" for c in name)
