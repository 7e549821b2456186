"""Task owners on one data folder: a live one's mark is left alone, a dead one's is
found at the next start (its tasks then run again at once), and a start is alone on
the folder only when every other owner is gone."""

from __future__ import annotations

from pathlib import Path

from manifold.services.task_owners import OwnerMarks


async def test_a_live_owner_is_left_alone_and_a_dead_one_found(tmp_path: Path) -> None:
    folder = tmp_path / "owners"
    first, second, third = OwnerMarks(folder), OwnerMarks(folder), OwnerMarks(folder)
    assert await first.start("host:1/a") is True
    await first.started()
    # Another process on the same data folder, the first still alive.
    assert await second.start("host:2/b") is False
    assert second.dead == []
    await second.started()
    await first.stop(let_go=False)  # it ends without letting go of its tasks: it died
    await second.stop()  # it let go of its tasks: nothing to find
    assert await third.start("host:3/c") is True
    assert third.dead == ["host:1/a"]
    await third.stop()
    assert sorted(p.name for p in folder.iterdir()) == [".start"]
