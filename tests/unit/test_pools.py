"""Blocking work runs in bounded pools of its own, never in the loop's default executor,
which every library shares: one kind of work that stalls (a client that stops reading, a
remote server that hangs) must not take the threads another kind needs."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from manifold import concurrency

PACKAGE = Path(__file__).resolve().parents[2] / "manifold"


def _default_executor_uses(path: Path) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute):
            continue
        name = node.func.attr
        if name == "to_thread":
            found.append(f"{path.name}:{node.lineno} to_thread")
        elif name == "run_in_executor" and node.args and ast.unparse(node.args[0]) == "None":
            found.append(f"{path.name}:{node.lineno} run_in_executor(None, ...)")
    return found


@pytest.mark.parametrize("path", sorted(PACKAGE.rglob("*.py")), ids=lambda p: p.name)
def test_no_module_uses_the_default_executor(path: Path) -> None:
    assert _default_executor_uses(path) == []


def test_the_check_sees_both_spellings(tmp_path: Path) -> None:
    sample = tmp_path / "sample.py"
    sample.write_text(
        "import asyncio\n"
        "async def f(loop):\n"
        "    await asyncio.to_thread(print)\n"
        "    await loop.run_in_executor(None, print)\n"
    )
    assert len(_default_executor_uses(sample)) == 2


def test_every_pool_is_bounded_and_named_apart() -> None:
    pools = [v for v in vars(concurrency).values() if isinstance(v, concurrency.Pool)]
    assert len(pools) >= 6
    assert all(0 < pool.size <= 16 for pool in pools)
    assert len({pool.name for pool in pools}) == len(pools)
