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
    allowed = ("manifold.drivers", "manifold.models", "manifold.errors", "manifold.paths",
               "manifold.concurrency", "manifold.localfs", "manifold.held",
               "manifold.splice")  # fmt: skip
    wrong = {m for m in imported(path) if m.startswith("manifold") and not m.startswith(allowed)}
    assert not wrong


@pytest.mark.parametrize("path", modules("vfs"), ids=lambda p: p.name)
def test_vfs_never_reaches_up_into_services_or_the_api(path: Path) -> None:
    assert not {m for m in imported(path) if m.startswith(("manifold.services", "manifold.api"))}


def test_no_driver_name_is_written_outside_its_folder() -> None:
    names = (
        '"Local"',
        '"Alias"',
        '"AList V3"',
        '"AList V2"',
        '"S3"',
        '"SFTP"',
        '"WebDav"',
        '"FTP"',
        '"SMB"',
        '"Crypt"',
        '"Azure Blob Storage"',
        '"Chunk"',
        '"Strm"',
        '"Virtual"',
        '"UrlTree"',
        '"AutoIndex"',
        '"Rclone"',
    )
    offenders = [
        str(path.relative_to(PACKAGE))
        for path in PACKAGE.rglob("*.py")
        if "drivers" not in path.relative_to(PACKAGE).parts[:1]
        and any(name in path.read_text() for name in names)
    ]
    assert offenders == []


# The modules every layer may use: plain data, errors, path logic, small helpers.
LEAVES = {"manifold", "errors", "models", "paths", "concurrency", "config", "logs", "localfs",
          "held", "metrics", "splice"}  # fmt: skip
# What each package may import besides itself and the leaves (STYLE's four layers, with
# the database beside ``vfs``). The wiring (app, container, cli, server, web) is above all.
ALLOWED = {
    "drivers": set(),
    "db": set(),
    "vfs": {"drivers"},
    "policy": set(),
    "services": {"db", "vfs", "drivers", "state", "policy"},
    "state": {"db"},
    "api": {"services", "vfs", "container", "web"},
    "protocols": {"services", "vfs", "state", "policy"},
}


def _unit(module: str) -> str:
    """The package (or top-level module) a ``manifold`` module belongs to."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "manifold"


@pytest.mark.parametrize("package", sorted(ALLOWED))
def test_each_package_imports_only_the_layers_below_it(package: str) -> None:
    allowed = ALLOWED[package] | LEAVES | {package}
    wrong = {
        f"{path.relative_to(PACKAGE)}: {module}"
        for path in modules(package)
        for module in imported(path)
        if module.startswith("manifold") and _unit(module) not in allowed
    }
    assert wrong == set()


def _runtime_nodes(tree: ast.Module) -> list[ast.AST]:
    """Every node but those under ``if TYPE_CHECKING:`` (annotations only, never run)."""
    skipped: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            skipped.update(id(inner) for part in node.body for inner in ast.walk(part))
    return [node for node in ast.walk(tree) if id(node) not in skipped]


def _module_graph() -> dict[str, set[str]]:
    names = {
        ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts).removesuffix(
            ".__init__"
        ): path
        for path in PACKAGE.rglob("*.py")
    }
    graph: dict[str, set[str]] = {}
    for name, path in names.items():
        tree = ast.parse(path.read_text())
        found: set[str] = set()
        for node in _runtime_nodes(tree):
            if isinstance(node, ast.ImportFrom) and node.module in names:
                found.add(node.module)
                found |= {f"{node.module}.{a.name}" for a in node.names} & names.keys()
            elif isinstance(node, ast.Import):
                found |= {a.name for a in node.names} & names.keys()
        graph[name] = found - {name}
    return graph


def test_no_two_modules_import_each_other_even_through_others() -> None:
    """The import graph (as run, annotations aside) has no cycle: each module can be
    read, and tested, with only the modules below it (the task runner below the
    services that submit tasks, the path helpers below the drivers and the mounts)."""
    graph = _module_graph()
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    cycles: list[list[str]] = []

    def visit(name: str, trail: list[str]) -> None:
        state[name] = 1
        for other in sorted(graph[name]):
            if state.get(other) == 1:
                cycles.append([*trail[trail.index(other) :], other])
            elif other not in state:
                visit(other, [*trail, other])
        state[name] = 2

    for name in sorted(graph):
        if name not in state:
            visit(name, [name])
    assert cycles == []


# The services' own order, lowest first: each sub-package (or module) of ``services``
# imports, as run, only those before it. The meta rules and name patterns that the
# settings, the metas and the file tree all apply live below them all, in ``policy``.
SERVICES_ORDER = ["task_context", "task_kinds", "task_leases", "task_owners", "admin", "auth",
                  "runner", "fs", "search", "archive", "offline", "shares"]  # fmt: skip


def _services_unit(path: Path) -> str:
    return path.relative_to(PACKAGE / "services").parts[0].removesuffix(".py")


@pytest.mark.parametrize(
    "path",
    [p for p in modules("services") if _services_unit(p) != "__init__"],
    ids=lambda p: str(p.relative_to(PACKAGE)),
)
def test_each_service_imports_only_the_services_before_it(path: Path) -> None:
    unit = _services_unit(path)
    assert unit in SERVICES_ORDER, f"{unit} has no place in SERVICES_ORDER"
    below = set(SERVICES_ORDER[: SERVICES_ORDER.index(unit) + 1])
    runtime = {
        node.module
        for node in _runtime_nodes(ast.parse(path.read_text()))
        if isinstance(node, ast.ImportFrom) and node.module
    }
    above = {
        module
        for module in runtime
        if module.startswith("manifold.services.") and module.split(".")[2] not in below
    }
    assert above == set()
