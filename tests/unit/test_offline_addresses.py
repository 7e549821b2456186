"""The SSRF guard's judgement of addresses: only global unicast is public, and an
IPv6 address that embeds an IPv4 address is judged by that IPv4 address. Only the
predicate runs here: nothing is sent anywhere."""

from __future__ import annotations

import pytest

from manifold.policy.addresses import is_public

PRIVATE = [
    "127.0.0.1", "10.1.2.3", "192.168.0.1", "172.16.0.1", "169.254.169.254", "0.0.0.0",
    "224.0.0.1", "100.64.0.1", "255.255.255.255", "::1", "::", "fe80::1", "fe80::1%eth0",
    "fc00::1", "ff02::1", "2001:db8::1",
    # IPv4-mapped and IPv4-compatible
    "::ffff:127.0.0.1", "::ffff:10.0.0.1", "::127.0.0.1", "::10.0.0.1", "::169.254.169.254",
    # SIIT
    "::ffff:0:7f00:1", "::ffff:0:a00:1", "::ffff:0:a9fe:a9fe",
    # NAT64, well-known and local-use prefixes
    "64:ff9b::7f00:1", "64:ff9b::127.0.0.1", "64:ff9b::c0a8:1", "64:ff9b:1::7f00:1",
    "64:ff9b:1::808:808",
    # 6to4
    "2002:7f00:1::", "2002:a00:1::1", "2002:c0a8:101::1",
    # Teredo: a loopback client (the last 32 bits are the client, inverted), a private server
    "2001:0:4136:e378:8000:63bf:80ff:fffe", "2001:0:a00:1:8000:63bf:f7f7:f7f7",
    "not an address",
]  # fmt: skip

PUBLIC = [
    "93.184.216.34", "8.8.8.8", "2606:2800:220:1:248:1893:25c8:1946",
    "::ffff:8.8.8.8", "::ffff:0:808:808", "64:ff9b::808:808", "2002:808:808::1",
    "2001:0:4136:e378:8000:63bf:f7f7:f7f7",
]  # fmt: skip


@pytest.mark.parametrize("address", PRIVATE)
def test_private_addresses_and_every_embedding_of_one_are_refused(address: str) -> None:
    assert not is_public(address)


@pytest.mark.parametrize("address", PUBLIC)
def test_global_addresses_and_embeddings_of_one_are_public(address: str) -> None:
    assert is_public(address)
