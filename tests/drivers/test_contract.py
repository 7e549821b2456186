"""The contract's shape: a driver imports all it needs from ``base`` in one line, while
each name lives in the one of four modules that owns it."""

from __future__ import annotations

import dataclasses

from manifold.drivers import base, helpers, options, trees
from manifold.models import Link


def test_base_re_exports_what_a_driver_imports_from_the_module_that_owns_it() -> None:
    owners = {
        helpers: ["ErrorTable", "FileSource", "run_blocking", "translate", "translating"],
        trees: ["VirtualTree", "WritableTree"],
    }
    for module, names in owners.items():
        for name in names:
            assert getattr(base, name) is getattr(module, name), name
            assert name in base.__all__
    defined = ["Driver", "DriverConfig", "RootID", "RootPath", "Upload", "option"]
    assert all(getattr(base, name).__module__ == base.__name__ for name in defined)
    assert set(defined) <= set(base.__all__)


def test_the_form_description_is_the_registrys_alone() -> None:
    """Drivers never describe their options themselves: the registry derives the form."""
    assert options.describe_options.__module__ == options.__name__
    assert "describe_options" not in base.__all__


def test_the_contract_names_its_four_modules() -> None:
    doc = base.__doc__ or ""
    assert all(f"``{name}``" in doc for name in ("base", "helpers", "trees", "options"))


def test_link_documents_every_kind_of_link() -> None:
    """A field added to ``Link`` is a kind a driver author must be told about."""
    doc = base.Driver.link.__doc__ or ""
    qualifiers = ("headers", "expires_in", "verify", "idle_timeout", "relay")
    kinds = [name for name in fields_of(Link) if name not in qualifiers]
    assert kinds == ["file_path", "url", "reader"]
    assert all(f"* ``{kind}``" in doc for kind in kinds)
    assert all(f"``{name}``" in doc for name in qualifiers)


def fields_of(cls: type) -> list[str]:
    return [field.name for field in dataclasses.fields(cls)]
