"""Which addresses an offline download, or a redirect of a link this server fetches
for a user, may reach: the SSRF guard's judgement.

An address is public only when it is global unicast. An IPv6 address that carries
an IPv4 address inside it is judged by that IPv4 address, because a translator or
tunnel on the way delivers the packets to it: IPv4-mapped ``::ffff:a.b.c.d``,
IPv4-compatible ``::a.b.c.d``, SIIT ``::ffff:0:a.b.c.d``, the NAT64 well-known
prefix ``64:ff9b::/96``, 6to4 ``2002::/16`` and Teredo ``2001::/32`` (its server
and its client). The local-use NAT64 prefix ``64:ff9b:1::/48`` is a site's own
translator, so it is never public, whatever it embeds.

``refused_host`` is the check at submit time: a URL whose host is a private
address, or a name that resolves only to private addresses, is refused before a
task exists. The check that counts stays the one on the address actually connected
to (``simple_http.GuardedBackend``), since a name may resolve differently later.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

RESOLVE_SECONDS = 2.0
SETTING = "offline_download_allow_private"

_NAT64 = ipaddress.IPv6Network("64:ff9b::/96")
_NAT64_LOCAL = ipaddress.IPv6Network("64:ff9b:1::/48")
_SIIT = ipaddress.IPv6Network("::ffff:0:0:0/96")
_COMPATIBLE = ipaddress.IPv6Network("::/96")
_TEREDO = ipaddress.IPv6Network("2001::/32")


def is_public(address: str) -> bool:
    """Whether ``address`` is a global unicast address, an IPv6 one that embeds an
    IPv4 address judged by that IPv4 address."""
    try:
        ip = ipaddress.ip_address(address.split("%", 1)[0])
    except ValueError:
        return False
    return _public(ip)


def _public(ip: IPAddress) -> bool:
    if isinstance(ip, ipaddress.IPv6Address):
        if ip in _NAT64_LOCAL:
            return False
        inner = embedded_ipv4(ip)
        if inner is not None:
            return all(_public(v4) for v4 in inner)
    return ip.is_global and not ip.is_multicast


def embedded_ipv4(ip: ipaddress.IPv6Address) -> tuple[ipaddress.IPv4Address, ...] | None:
    """The IPv4 addresses ``ip`` carries (Teredo carries two), or None."""
    if ip.ipv4_mapped is not None:
        return (ip.ipv4_mapped,)
    if ip.sixtofour is not None:
        return (ip.sixtofour,)
    if ip in _TEREDO and ip.teredo is not None:
        return ip.teredo
    if ip in _NAT64 or ip in _SIIT or ip in _COMPATIBLE:
        return (ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF),)
    return None


def literal(host: str) -> IPAddress | None:
    """``host`` as an address when it is one (brackets and zone dropped)."""
    try:
        return ipaddress.ip_address(host.strip("[]").split("%", 1)[0])
    except ValueError:
        return None


async def addresses_of(host: str) -> list[IPAddress]:
    """The address ``host`` is, or those it resolves to in ``RESOLVE_SECONDS`` (none
    when it does not resolve in that time)."""
    ip = literal(host)
    if ip is not None:
        return [ip]
    loop = asyncio.get_running_loop()
    try:
        infos = await asyncio.wait_for(
            loop.getaddrinfo(host, None, type=socket.SOCK_STREAM), RESOLVE_SECONDS
        )
    except (OSError, TimeoutError, UnicodeError):
        return []
    return [ip for info in infos if (ip := literal(str(info[4][0]))) is not None]


async def refused_host(host: str) -> bool:
    """Whether ``host`` is certainly private: a private literal, or a name whose every
    address is private. A name that does not resolve in ``RESOLVE_SECONDS`` is let
    through: the download's own check judges it when it connects."""
    found = await addresses_of(host)
    return bool(found) and not any(_public(ip) for ip in found)


async def public_host(host: str) -> bool:
    """Whether every address ``host`` is or resolves to is public (none: not public)."""
    found = await addresses_of(host)
    return bool(found) and all(_public(ip) for ip in found)
