"""Where a storage's objects are on the wire: the server's address, the share, and
each name as the SMB protocol lets it be spelled.

SMB refuses the characters Windows keeps for wildcards and devices (``"*:<>?|``, the
backslash and the control characters) in a name, and a server lists a name ending in
a space or a dot under a mangled 8.3 name (``TIXEP6~1``), as Windows cannot open it.
Such characters are sent as the code points of Unicode's private use area that macOS
clients use for them (the "SFM" mapping: U+F001 to U+F027, and U+F028/U+F029 for a
last space or dot), and mapped back in listings: a Windows server stores them so and
macOS shows them as the characters they stand for, and a Samba share with
``vfs objects = catia`` (or ``fruit``) set to this mapping stores the real characters
on its disk. A name whose own characters are in that range reads back as the
characters they stand for, as macOS clients show it.
"""

from __future__ import annotations

from manifold.errors import InvalidRequest

DEFAULT_PORT = 445

_SPECIAL = {'"': 0xF020, "*": 0xF021, ":": 0xF022, "<": 0xF023, ">": 0xF024}
_SPECIAL |= {"?": 0xF025, "\\": 0xF026, "|": 0xF027}
_TO_WIRE: dict[int, int] = {code: 0xF000 + code for code in range(0x01, 0x20)}
_TO_WIRE |= {ord(char): private for char, private in _SPECIAL.items()}
_FROM_WIRE: dict[int, int] = {private: code for code, private in _TO_WIRE.items()}
_LAST_TO_WIRE = {" ": "\uf028", ".": "\uf029"}
_LAST_FROM_WIRE = {private: char for char, private in _LAST_TO_WIRE.items()}


def to_wire(name: str) -> str:
    """``name`` as the server is sent it."""
    name = name.translate(_TO_WIRE)
    last = _LAST_TO_WIRE.get(name[-1:])
    return name[:-1] + last if last else name


def from_wire(name: str) -> str:
    """A name the server listed, as users see it."""
    name = name.translate(_FROM_WIRE)
    last = _LAST_FROM_WIRE.get(name[-1:])
    return name[:-1] + last if last else name


def parse_address(address: str) -> tuple[str, int]:
    """``host`` or ``host:port`` (``[v6]:port`` for an IPv6 address) as (host, port)."""
    text = address.strip()
    if text.startswith("["):
        host, _, rest = text[1:].partition("]")
        port = rest.removeprefix(":")
    elif text.count(":") == 1:
        host, _, port = text.partition(":")
    else:
        host, port = text, ""
    if not host:
        raise InvalidRequest("address is empty")
    if not port:
        return host, DEFAULT_PORT
    if not port.isdigit() or not 0 < int(port) < 65536:
        raise InvalidRequest(f"invalid port in address: {port!r}")
    return host, int(port)


def folder_parts(path: str) -> list[str]:
    """The names of a folder path inside the share (``/`` or ``\\`` between them;
    ``.`` and empty parts stand for the share's top)."""
    parts = [part for part in path.replace("\\", "/").split("/") if part not in ("", ".")]
    if ".." in parts:
        raise InvalidRequest(f"invalid root folder path: {path!r}")
    return parts


class Place:
    """Turns the storage's own paths (``/a/b``, as users name them) into UNC paths
    (``\\\\host\\share\\root\\a\\b``, as the server is sent them)."""

    def __init__(self, host: str, share: str, root: str) -> None:
        share = share.strip().strip("\\/")
        if not share or any(c in share for c in "\\/"):
            raise InvalidRequest(f"invalid share name: {share!r}")
        self.share = rf"\\{host}\{share}"
        self.root = "\\".join([self.share, *(to_wire(part) for part in folder_parts(root))])

    def unc(self, path: str) -> str:
        """The UNC path of ``path``, a path inside the storage."""
        names = [to_wire(name) for name in path.split("/") if name]
        return "\\".join([self.root, *names]) if names else self.root
