"""WebDAV's COPY and MOVE as the rule book decides: nothing that holds the source, or
lies inside it, is replaced, and replacing needs the remove permission."""

from __future__ import annotations

from pathlib import Path

import pytest

from manifold.container import Services
from tests.api.fs_helpers import make_tree
from tests.protocols.dav_helpers import DAV_BITS, Dav, user

TREE = {"t/f.txt": "f", "t/sub/s.txt": "s", "t/sub/deeper/g.txt": "g", "t/other.txt": "o"}


def files(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): p.read_text() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.mark.parametrize(
    ("method", "src", "dst"),
    [
        ("MOVE", "/local/t/sub/", "/dav/local/t/"),
        ("MOVE", "/local/t/sub", "/dav/local/t"),
        ("COPY", "/local/t/f.txt", "/dav/local/t/"),
        ("MOVE", "/local/t/sub/deeper/g.txt", "/dav/local/t/sub"),
        ("COPY", "/local/t/sub/deeper", "/dav/local/t/sub"),
        ("MOVE", "/local/t/sub/deeper/g.txt", "{base}/dav/local/t"),
    ],
)
async def test_a_destination_holding_the_source_is_refused_and_nothing_is_lost(
    dav: Dav, disk: Path, method: str, src: str, dst: str
) -> None:
    make_tree(disk, TREE)
    before = files(disk)
    base = str(dav.client.base_url).rstrip("/")
    answer = await dav(method, src, Destination=dst.format(base=base), Overwrite="T")
    assert answer.status_code == 409
    assert files(disk) == before


async def test_a_destination_inside_the_source_is_refused(dav: Dav, disk: Path) -> None:
    make_tree(disk, TREE)
    before = files(disk)
    answer = await dav("COPY", "/local/t/sub", Destination="/dav/local/t/sub/deeper/in")
    assert answer.status_code == 409
    assert files(disk) == before


async def test_overwrite_replaces_a_folder_by_a_file_only_with_the_remove_permission(
    services: Services, dav: Dav, disk: Path
) -> None:
    make_tree(disk, TREE)
    await user(services, "keeper", DAV_BITS | 0x78)  # write, rename, move, copy: no remove
    keeper = dav.as_("keeper")
    refused = await keeper("COPY", "/local/t/f.txt", Destination="/dav/local/t/sub")
    assert refused.status_code == 403
    assert (disk / "t" / "sub" / "deeper" / "g.txt").read_text() == "g"
    replaced = await dav("COPY", "/local/t/f.txt", Destination="/dav/local/t/sub")
    assert replaced.status_code == 204
    assert (disk / "t" / "sub").read_text() == "f"


async def test_a_file_replaces_an_empty_file_without_the_remove_permission(
    services: Services, dav: Dav, disk: Path
) -> None:
    make_tree(disk, {**TREE, "t/empty.txt": ""})
    await user(services, "keeper", DAV_BITS | 0x78)
    keeper = dav.as_("keeper")
    assert (await keeper("PUT", "/local/t/empty.txt", "now full")).status_code == 204
    assert (disk / "t" / "empty.txt").read_text() == "now full"
    assert (await keeper("PUT", "/local/t/f.txt", "lost?")).status_code == 403
    assert (disk / "t" / "f.txt").read_text() == "f"
