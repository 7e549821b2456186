"""What a .torrent file describes (OpenList's ``torrent/parse``): its name, files,
sizes, piece length and info hash, read with the bencode codec under a size cap."""

from __future__ import annotations

import hashlib
from typing import Any

from manifold.errors import BadRequest
from manifold.services.fs.bencode import BencodeError, Value, decode_spans

# OpenList's cap: a .torrent of more is refused before it is decoded.
MAX_TORRENT_BYTES = 10 << 20
# A piece's SHA-1 is this long; ``pieces`` is their concatenation.
_PIECE_HASH = 20


def parse(data: bytes) -> dict[str, Any]:
    """OpenList's answer for a .torrent; ``BadRequest`` for anything malformed."""
    if len(data) > MAX_TORRENT_BYTES:
        raise BadRequest("torrent is too big (at most 10 MiB)")
    try:
        top, spans = decode_spans(data)
    except BencodeError as exc:
        raise BadRequest(f"not a torrent: {exc}") from None
    info = _field(top, b"info", dict) if isinstance(top, dict) else _bad("no info dictionary")
    pieces = _field(info, b"pieces", bytes)
    if len(pieces) % _PIECE_HASH:
        _bad("pieces is not a whole number of 20-byte hashes")
    name = _text(_field(info, b"name", bytes))
    files = _files(info, name)
    return {
        "name": name,
        "total_size": sum(f["size"] for f in files),
        "piece_length": _size(_field(info, b"piece length", int)),
        "piece_count": len(pieces) // _PIECE_HASH,
        "info_hash": hashlib.sha1(spans[b"info"]).hexdigest(),  # noqa: S324 - BitTorrent's
        "files": files,
        "has_cas": False,
    }


def _files(info: dict[bytes, Value], name: str) -> list[dict[str, Any]]:
    if b"files" not in info:
        return [{"path": name, "size": _size(_field(info, b"length", int))}]
    found = []
    for entry in _field(info, b"files", list):
        if not isinstance(entry, dict):
            _bad("a file entry is not a dictionary")
        parts = _field(entry, b"path", list)
        if not parts or not all(isinstance(p, bytes) for p in parts):
            _bad("a file path is not a list of strings")
        path = "/".join(_text(p) for p in parts if isinstance(p, bytes))
        found.append({"path": path, "size": _size(_field(entry, b"length", int))})
    return found


def _field(mapping: dict[bytes, Value], key: bytes, kind: type) -> Any:
    value = mapping.get(key)
    if not isinstance(value, kind):
        _bad(f"{key.decode()} is missing or not a {kind.__name__}")
    return value


def _size(value: int) -> int:
    if value < 0:
        _bad("a size is negative")
    return value


def _text(raw: bytes) -> str:
    return raw.decode("utf-8", "replace")


def _bad(why: str) -> Any:
    raise BadRequest(f"not a torrent: {why}")
