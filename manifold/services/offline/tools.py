"""The contract every offline download tool meets: aria2, qBittorrent, Transmission.

A tool is a program of its own, reached over its RPC API. Manifold asks it to fetch
a URL (or magnet, or torrent) into a private folder under the data folder, polls its
progress, and takes the finished files from that folder into the target storage
(``service``). A tool never writes anywhere else, and removing a download from the
tool never deletes anything outside that folder.

Errors use AList's texts, since clients and the page show them as they are.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol
from urllib.parse import SplitResult, urlsplit, urlunsplit

from manifold.errors import ServerError


@dataclass(frozen=True, slots=True)
class ToolStatus:
    """What a tool reports about one download."""

    done: bool  # every byte is there (a torrent that is seeding counts as done)
    progress: float = 0.0  # 0 to 100
    total_bytes: int = 0
    error: str = ""  # the tool's own reason when the download failed; "" otherwise
    name: str = ""  # the download's name, when the tool knows it


class ToolError(ServerError):
    """The tool is unreachable, refused us, or failed the download."""


class ToolUnreachable(ToolError):
    """The tool did not answer: what it holds (a download, its files) is unknown."""


def split_url(url: str) -> SplitResult | None:
    """``url``'s parts, or None when it is not a URL at all (``http://[::1``)."""
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - a port that is not a number raises here
    except ValueError:
        return None
    return parts


def shown_url(url: str) -> str:
    """``url`` as an error may show it: its password, if it has one, as ``***``."""
    parts = split_url(url)
    if parts is None:
        return "(not a URL)"
    if parts.password is None:
        return url
    user = parts.username or ""
    host = parts.netloc.rsplit("@", 1)[-1]
    return urlunsplit((parts.scheme, f"{user}:***@{host}", parts.path, parts.query, parts.fragment))


class Tool(Protocol):
    """One offline download tool, configured from the settings."""

    name: str  # exactly as AList names it: "aria2", "qBittorrent", "Transmission"

    @property
    def ready(self) -> bool:
        """Whether the last ``init`` succeeded (the tool is listed as available)."""
        ...

    async def init(self) -> str:
        """Connect with the current settings and check the tool answers; returns a
        short description (aria2: its version). Raises ``ToolError`` with AList's text."""
        ...

    async def add(self, url: str, folder: str, tag: str) -> str:
        """Start downloading ``url`` into ``folder``; returns the tool's id for it.
        ``tag`` is unique per task (qBittorrent labels the torrent with it)."""
        ...

    async def status(self, ident: str) -> ToolStatus:
        """The download's state. Raises ``ToolError`` when the tool can't be asked
        or no longer knows the download."""
        ...

    async def remove(self, ident: str) -> None:
        """Stop and forget the download; its files stay where they are. Raises
        ``ToolUnreachable`` when the tool does not answer (a download it no longer
        knows is no error)."""
        ...

    def seed_minutes(self) -> int:
        """How long a finished torrent keeps seeding before it is removed (0: at once)."""
        ...
