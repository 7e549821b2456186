"""Which task owners sharing this data folder are alive.

A task's row names its owner, and another instance takes it over once the owner's
lease runs out (``task_lease_seconds``). A process that was killed (SIGKILL, a crash,
the machine's power) renews nothing, yet its tasks stay "running" until then; after
a restart that is the new process waiting on its dead predecessor. Every task service
that runs on this data folder therefore leaves a mark in its ``owners`` folder,
naming itself, and holds it (``manifold.held``) while it lives: at start, a mark
nobody holds is an owner that died, whose tasks are let go of at once for this
process (or any other) to run again. Owners that work on another data folder (other
machines of a cluster) leave no mark here and keep the lease rule.

The same marks say whether a starting process is alone on the data folder: then
nothing in its temporary areas can be in progress, and what no task needs goes
whatever its age. Starts take turns (``START_LOCK``) from marking to the end of those
sweeps, so a process never sweeps while another has begun serving.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
from pathlib import Path

from manifold.concurrency import DISK_POOL, run_in
from manifold.held import hold, take_unheld

SUFFIX = ".owner"
START_LOCK = ".start"
# A mark a sweep took between its making and its holding is made again this often.
ATTEMPTS = 5


class OwnerMarks:
    """The ``owners`` folder of one data folder, seen by one task service."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.dead: list[str] = []  # the owners the start found dead
        self._mine: Path | None = None
        self._held: int | None = None
        self._turn: int | None = None
        self._alone = False

    async def start(self, owner: str) -> bool:
        """Wait for this start's turn (until ``started``) and mark ``owner`` as alive
        (until ``stop``); whether no other live process shares the data folder. The
        owners found dead are in ``dead``; their marks are gone."""
        return await run_in(DISK_POOL, self._start, owner)

    async def started(self) -> None:
        """End this start's turn: the next process's start may go on."""
        await run_in(DISK_POOL, self._end_turn)

    async def stop(self, let_go: bool = True) -> None:
        """Stop holding this owner's mark, and remove it when its tasks were let go of
        (``let_go``); else it stays, for the next start to find its owner dead."""
        await run_in(DISK_POOL, self._stop, let_go)

    def _start(self, owner: str) -> bool:
        if self._held is not None:
            return self._alone  # marked already: a second start of the same services
        self.folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        self._turn = os.open(self.folder / START_LOCK, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        fcntl.flock(self._turn, fcntl.LOCK_EX)
        mine = self.folder / (hashlib.sha256(owner.encode()).hexdigest()[:32] + SUFFIX)
        self._held, self._mine = self._mark(mine, owner), mine
        dead: list[str] = []
        alone = True
        for path in self.folder.glob(f"*{SUFFIX}"):
            if path != mine and not take_unheld(str(path), lambda f: dead.append(_forget(f))):
                alone = False
        self.dead = [owner for owner in dead if owner]
        self._alone = alone
        return alone

    def _end_turn(self) -> None:
        turn, self._turn = self._turn, None
        if turn is not None:
            os.close(turn)

    @staticmethod
    def _mark(path: Path, owner: str) -> int:
        for _ in range(ATTEMPTS - 1):
            _write_private(path, owner)
            try:
                return hold(str(path))
            except FileNotFoundError:
                continue  # another start found it unheld and took it: make it again
        _write_private(path, owner)
        return hold(str(path))

    def _stop(self, let_go: bool) -> None:
        self._end_turn()
        held, self._held = self._held, None
        if held is None or self._mine is None:
            return
        if let_go:
            self._mine.unlink(missing_ok=True)
        os.close(held)


def _forget(path: str) -> str:
    """The owner a dead mark names; the mark is removed."""
    try:
        owner = Path(path).read_text()
    except (OSError, UnicodeDecodeError):
        owner = ""
    Path(path).unlink(missing_ok=True)
    return owner


def _write_private(path: Path, text: str) -> None:
    """Write a mark readable by the server's user only, as all of the data folder is."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
    with os.fdopen(fd, "w") as out:
        out.write(text)
