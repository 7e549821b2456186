"""The passive ports, from the ``ftp_pasv_port_map`` setting as AList reads it.

Entries are separated by new lines or commas; each is a ``port``, a range
``start-end``, or ``exposed[-end]:listened[-end]`` (the port clients are told, and
the one listened on, for a server behind a port-forwarding NAT), both sides of the
same length. Ranges lie within 1024-65535. An empty map lets the system pick any
free port. A wrong entry stops the server from starting, with the entry named.
"""

from __future__ import annotations

import re

from manifold.config import ConfigError

# (port told to clients, port listened on)
PortPair = tuple[int, int]

_SPAN = re.compile(r"(\d+)(?:-(\d+))?")
_LOWEST = 1024
_HIGHEST = 65535


def parse_port_map(text: str) -> list[PortPair]:
    """Every (exposed, listened) pair of the map, in order; empty for an empty map."""
    pairs: list[PortPair] = []
    for entry in re.split(r"[\n,]", text):
        entry = entry.strip()
        if entry:
            pairs.extend(_entry(entry))
    return pairs


def _entry(entry: str) -> list[PortPair]:
    exposed, colon, listened = entry.partition(":")
    told = _span(exposed.strip(), entry)
    bound = _span(listened.strip(), entry) if colon else told
    if len(told) != len(bound):
        raise ConfigError(f"ftp_pasv_port_map: {entry!r}: both sides must hold as many ports")
    return list(zip(told, bound, strict=True))


def _span(text: str, entry: str) -> range:
    match = _SPAN.fullmatch(text)
    if match is None:
        raise ConfigError(f"ftp_pasv_port_map: {entry!r} is not a port or a range of ports")
    start = int(match[1])
    end = int(match[2]) if match[2] is not None else start
    lowest = _LOWEST if match[2] is not None else 1
    if not lowest <= start <= end <= _HIGHEST:
        raise ConfigError(
            f"ftp_pasv_port_map: {entry!r}: ports must lie within {lowest}-{_HIGHEST}, "
            "the first of a range not above the last"
        )
    return range(start, end + 1)
