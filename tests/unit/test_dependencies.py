"""A fresh machine installs what the suite ran with: constraints.txt pins every package."""

from __future__ import annotations

import re
import tomllib
from importlib import metadata
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[2]


def _pins() -> dict[str, str]:
    pins: dict[str, str] = {}
    for line in (ROOT / "constraints.txt").read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        name, sep, version = line.partition("==")
        assert sep, f"constraints.txt: {line!r} is not an exact pin"
        pins[canonicalize_name(name)] = version
    return pins


def _requirements() -> list[Requirement]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    names = list(project["dependencies"])
    for extra in project["optional-dependencies"].values():
        names.extend(extra)
    return [Requirement(text) for text in names]


def test_every_requirement_has_an_upper_bound_and_a_pin_inside_it() -> None:
    pins = _pins()
    for req in _requirements():
        assert any(s.operator in ("<", "<=", "==", "~=") for s in req.specifier), req
        pinned = pins.get(canonicalize_name(req.name))
        assert pinned is not None, f"{req.name} is not pinned in constraints.txt"
        assert req.specifier.contains(pinned, prereleases=True), (req, pinned)


def test_the_suite_runs_with_the_pinned_versions() -> None:
    pins = _pins()
    for req in _requirements():
        installed = metadata.version(req.name)
        assert installed == pins[canonicalize_name(req.name)], (req.name, installed)


def test_the_install_scripts_use_the_constraints() -> None:
    setup = (ROOT / "scripts" / "_setup.sh").read_text()
    assert re.search(r"pip install .*-c constraints\.txt", setup)
