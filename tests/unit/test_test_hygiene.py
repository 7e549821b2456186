"""The tests' own hygiene: they observe the code through its public surface, and each
of them asserts something.

A test that reads or patches a private attribute breaks when the code is reshaped
without any change in behaviour, and pins the shape rather than the behaviour; a test
that asserts nothing passes whatever the code does. Both are found here by reading the
tests' syntax trees, so a new one fails this module.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]

# Private accesses with no public way to observe the same thing:
# (path relative to tests/, the expression as written) -> why. None today.
PRIVATE_ALLOWED: dict[tuple[str, str], str] = {}

# Tests that assert nothing on purpose: "path::name" -> why. None today.
NO_ASSERT_ALLOWED: dict[str, str] = {}

# Calls that assert although their names do not say so: pytest's checks and
# Playwright's ``expect``.
ASSERTING_CALLS = {"raises", "warns", "fail", "expect", "deprecated_call"}
ASSERTING_PREFIXES = ("assert_", "check_", "expect_")


def is_private(name: str) -> bool:
    """``_name`` and ``__name`` (mangled), not ``__dunder__``."""
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def sources() -> list[Path]:
    return sorted(p for p in TESTS.rglob("*.py") if "__pycache__" not in p.parts)


def parse(path: Path) -> ast.Module:
    return ast.parse(path.read_text(), filename=str(path))


def parents_of(tree: ast.AST) -> dict[ast.AST, ast.AST]:
    return {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}


def inside_class(node: ast.AST, parents: dict[ast.AST, ast.AST]) -> bool:
    while node in parents:
        node = parents[node]
        if isinstance(node, ast.ClassDef):
            return True
    return False


def dotted_private(value: object) -> bool:
    """A string naming a private attribute or module (``"_x"``, ``"pkg._mod.f"``)."""
    return isinstance(value, str) and any(is_private(part) for part in value.split("."))


def private_accesses(path: Path) -> Iterator[tuple[int, str]]:
    """(line, expression) of each reach into something private that is not the test's
    own: ``obj._x`` (but ``self._x``/``cls._x`` in a class the test defines), a private
    name imported from the package, and ``setattr``/``getattr``/``patch`` by a private
    name."""
    tree = parse(path)
    parents = parents_of(tree)
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and is_private(node.attr):
            own = isinstance(node.value, ast.Name) and node.value.id in ("self", "cls")
            if not (own and inside_class(node, parents)):
                yield node.lineno, ast.unparse(node)
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("manifold"):
            for alias in node.names:
                if dotted_private(f"{node.module}.{alias.name}"):
                    yield node.lineno, f"{node.module}.{alias.name}"
        elif isinstance(node, ast.Call):
            called = ast.unparse(node.func).rsplit(".", 1)[-1]
            if called in ("setattr", "getattr", "delattr", "hasattr", "patch", "object"):
                named = [a.value for a in node.args[:2] if isinstance(a, ast.Constant)]
                if any(dotted_private(value) for value in named):
                    yield node.lineno, ast.unparse(node)


def calls_in(function: ast.AST) -> set[str]:
    """What ``function`` calls: ``name`` for a plain call (a helper it may share with
    other test modules), ``.name`` for a method (``client.get``: whose it is is unknown,
    so only its name's prefix can tell that it asserts)."""
    called: set[str] = set()
    for node in ast.walk(function):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            called.add(node.func.id)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            called.add("." + node.func.attr)
    return called


def asserts_directly(function: ast.AST) -> bool:
    for node in ast.walk(function):
        if isinstance(node, ast.Assert):
            return True
        if isinstance(node, ast.Raise) and node.exc is not None:
            raised = node.exc.func if isinstance(node.exc, ast.Call) else node.exc
            if isinstance(raised, ast.Name) and raised.id == "AssertionError":
                return True
    return False


Function = ast.FunctionDef | ast.AsyncFunctionDef


def functions() -> list[tuple[Path, Function]]:
    """Every function and method defined in tests/, with its file."""
    return [
        (path, node)
        for path in sources()
        for node in ast.walk(parse(path))
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
    ]


def asserting_helpers(defined: list[tuple[Path, Function]]) -> set[str]:
    """Names of the functions in tests/ that assert, directly or through another such
    function (by name, across files: helpers are imported from shared modules)."""
    asserting = {fn.name for _, fn in defined if asserts_directly(fn)}
    calls = [(fn.name, calls_in(fn)) for _, fn in defined]
    while True:
        more = {
            name
            for name, called in calls
            if name not in asserting and asserts_through(called, asserting)
        }
        if not more:
            return asserting
        asserting |= more


def asserts_through(called: set[str], asserting: set[str]) -> bool:
    """Whether one of ``called`` asserts: a helper of tests/ that does, pytest's or
    Playwright's checks, or a function or method named ``assert_``, ``check_``,
    ``expect_``."""
    for name in called:
        bare = name.removeprefix(".")
        if name in asserting or bare in ASSERTING_CALLS or bare.startswith(ASSERTING_PREFIXES):
            return True
    return False


def silent_tests() -> list[str]:
    defined = functions()
    asserting = asserting_helpers(defined)
    return [
        f"{path.relative_to(TESTS)}::{fn.name}"
        for path, fn in defined
        if fn.name.startswith("test_")
        and path.name.startswith("test_")
        and not asserts_directly(fn)
        and not asserts_through(calls_in(fn), asserting)
    ]


def test_no_test_reaches_into_a_private_attribute() -> None:
    found = [
        f"{path.relative_to(TESTS)}:{line}: {expression}"
        for path in sources()
        for line, expression in private_accesses(path)
        if (str(path.relative_to(TESTS)), expression) not in PRIVATE_ALLOWED
    ]
    assert found == [], "observe through a public method, a behaviour or an event instead"


def test_every_test_asserts() -> None:
    found = [name for name in silent_tests() if name not in NO_ASSERT_ALLOWED]
    assert found == [], "give each an assert, pytest.raises/warns or an assert_ helper"


def test_the_scan_sees_what_it_looks_for(tmp_path: Path) -> None:
    """The checks above pass on a clean tree only because this one finds things."""
    sample = tmp_path / "test_sample.py"
    sample.write_text(
        "from manifold.db.search_repo import _row\n"
        "class Fake:\n"
        "    def go(self):\n"
        "        return self._own\n"
        "def test_peeks(repo, monkeypatch):\n"
        "    repo._reader.close()\n"
        "    monkeypatch.setattr(repo, '_statements', {})\n"
        "    assert repo.__class__\n"
    )
    found = [expression for _, expression in sorted(private_accesses(sample))]
    assert found == [
        "manifold.db.search_repo._row",
        "repo._reader",
        "monkeypatch.setattr(repo, '_statements', {})",
    ]
    assert not asserts_directly(ast.parse("def test_x():\n    run()\n"))
    assert asserts_through({"assert_listing"}, set())
    assert asserts_through({".raises"}, set())
    assert not asserts_through({"run"}, {"check"})
    assert asserts_through({"run"}, {"run"})
    assert not asserts_through({".run"}, {"run"})  # someone else's method of that name
