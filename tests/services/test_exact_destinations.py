"""Copy and move to an EXACT destination path, on Local and through an Alias.

Overwrite is checked against the destination path alone: nothing else in the
destination folder (a namesake of the source) and never the source itself is
touched, whatever the overwrite flag says.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from manifold.container import Services
from manifold.drivers.base import ATOMIC_REPLACE
from manifold.models import Storage
from tests.api.fs_helpers import make_tree
from tests.services.test_file_ops import caller

# The mount each scenario writes through: Local itself, or a writable Alias over it.
KINDS = ["/a", "/al"]


@pytest.fixture
async def disk(services: Services, tmp_path: Path) -> Path:
    root = make_tree(
        tmp_path / "a", {"x/report.txt": "mine", "y/report.txt": "bystander", "y/keep.txt": "k"}
    )
    addition = json.dumps({"root_folder_path": str(root)})
    await services.storages.create(Storage(0, "/a", "Local", addition=addition))
    alias = json.dumps({"paths": "/a", "writable": True})
    await services.storages.create(Storage(0, "/al", "Alias", addition=alias))
    return root


def tree_of(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): p.read_text() for p in root.rglob("*") if p.is_file()}


@pytest.mark.parametrize("mount", KINDS)
@pytest.mark.parametrize("overwrite", [True, False])
async def test_a_copy_to_a_new_name_in_the_same_folder_keeps_the_source(
    services: Services, disk: Path, mount: str, overwrite: bool
) -> None:
    await services.ops.copy(caller(), f"{mount}/x/report.txt", f"{mount}/x/copy.txt", overwrite)
    assert tree_of(disk) == {
        "x/report.txt": "mine",
        "x/copy.txt": "mine",
        "y/report.txt": "bystander",
        "y/keep.txt": "k",
    }


@pytest.mark.parametrize("mount", KINDS)
async def test_a_copy_to_a_new_name_elsewhere_with_overwrite_keeps_the_namesake(
    services: Services, disk: Path, mount: str
) -> None:
    await services.ops.copy(caller(), f"{mount}/x/report.txt", f"{mount}/y/final.txt", True)
    assert tree_of(disk) == {
        "x/report.txt": "mine",
        "y/final.txt": "mine",
        "y/report.txt": "bystander",
        "y/keep.txt": "k",
    }


@pytest.mark.parametrize("mount", KINDS)
async def test_a_rename_to_a_new_name_elsewhere_with_overwrite_keeps_the_namesake(
    services: Services, disk: Path, mount: str
) -> None:
    await services.ops.rename(caller(), f"{mount}/x/report.txt", f"{mount}/y/final.txt", True)
    assert tree_of(disk) == {"y/final.txt": "mine", "y/report.txt": "bystander", "y/keep.txt": "k"}


@pytest.mark.parametrize("mount", KINDS)
async def test_overwrite_replaces_the_exact_destination_only(
    services: Services, disk: Path, mount: str
) -> None:
    who = caller()
    await services.ops.copy(who, f"{mount}/x/report.txt", f"{mount}/y/keep.txt", True)
    assert tree_of(disk) == {
        "x/report.txt": "mine",
        "y/report.txt": "bystander",
        "y/keep.txt": "mine",
    }
    await services.ops.rename(who, f"{mount}/y/report.txt", f"{mount}/x/report.txt", True)
    assert tree_of(disk) == {"x/report.txt": "bystander", "y/keep.txt": "mine"}
    assert not [p for p in disk.rglob("*") if p.name.startswith(".manifold")]


@pytest.mark.parametrize("overwrite", [True, False])
async def test_a_copy_across_storages_to_a_new_name_keeps_the_namesake(
    services: Services, disk: Path, tmp_path: Path, overwrite: bool
) -> None:
    other = make_tree(tmp_path / "b", {"y/report.txt": "bystander"})
    addition = json.dumps({"root_folder_path": str(other)})
    await services.storages.create(Storage(0, "/b", "Local", addition=addition))
    await services.ops.copy(caller(), "/al/x/report.txt", "/b/y/final.txt", overwrite)
    await services.ops.copy(caller(), "/b/y/report.txt", "/a/x/renamed.txt", overwrite)
    assert tree_of(other) == {"y/report.txt": "bystander", "y/final.txt": "mine"}
    assert tree_of(disk)["x/report.txt"] == "mine"
    assert tree_of(disk)["x/renamed.txt"] == "bystander"


@pytest.mark.parametrize("mount", KINDS)
async def test_a_copy_over_a_file_replaces_it_and_parks_nothing(
    services: Services, disk: Path, mount: str
) -> None:
    assert ATOMIC_REPLACE in services.tree.place("/a").ops.driver.promises()
    await services.ops.copy(caller(), f"{mount}/x/report.txt", f"{mount}/y/keep.txt", True)
    await services.ops.copy(caller(), f"{mount}/y/keep.txt", f"{mount}/y/report.txt", True)
    assert tree_of(disk) == {"x/report.txt": "mine", "y/report.txt": "mine", "y/keep.txt": "mine"}
    assert sorted(p.name for p in (disk / "y").iterdir()) == ["keep.txt", "report.txt"]
    listed = {o.name: o.size for o in await services.ops.list(caller(), f"{mount}/y")}
    assert listed == {"keep.txt": 4, "report.txt": 4}
