"""The layers import only downward (see STYLE): a new import the wrong way fails here."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "manifold"


def imported(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return found


def modules(folder: str) -> list[Path]:
    return sorted((PACKAGE / folder).rglob("*.py"))


@pytest.mark.parametrize("path", modules("api"), ids=lambda p: p.name)
def test_no_route_module_reaches_a_driver(path: Path) -> None:
    assert not {m for m in imported(path) if m.startswith("manifold.drivers")}


@pytest.mark.parametrize("path", modules("drivers"), ids=lambda p: p.name)
def test_drivers_import_only_the_contract_the_models_and_the_errors(path: Path) -> None:
    allowed = ("manifold.drivers", "manifold.models", "manifold.errors", "manifold.vfs.paths",
               "manifold.concurrency")  # fmt: skip
    wrong = {m for m in imported(path) if m.startswith("manifold") and not m.startswith(allowed)}
    assert not wrong


@pytest.mark.parametrize("path", modules("vfs"), ids=lambda p: p.name)
def test_vfs_never_reaches_up_into_services_or_the_api(path: Path) -> None:
    assert not {m for m in imported(path) if m.startswith(("manifold.services", "manifold.api"))}


def test_no_driver_name_is_written_outside_its_folder() -> None:
    names = ('"Local"', '"Alias"', '"AList V3"', '"AList V2"', '"S3"', '"SFTP"', '"WebDav"')
    offenders = [
        str(path.relative_to(PACKAGE))
        for path in PACKAGE.rglob("*.py")
        if "drivers" not in path.relative_to(PACKAGE).parts[:1]
        and any(name in path.read_text() for name in names)
    ]
    assert offenders == []
