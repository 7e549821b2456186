"""A session as OpenList's page sees it: received chunks as ranges, bytes, frontier."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from manifold.db.multipart_repo import UploadSession

RECEIVING, COMPLETING, COMPLETED = "receiving", "completing", "completed"
FAILED = "failed_permanent"


@dataclass(frozen=True, slots=True)
class Snapshot:
    """OpenList's session snapshot, field for field."""

    upload_id: str
    state: str
    path: str
    size: int
    chunk_size: int
    total_chunks: int
    received: list[tuple[int, int]] = field(default_factory=list)
    received_bytes: int = 0
    frontier: int = 0
    storage_progress: float = 0.0
    attempt: int = 0
    error: str = ""

    def json(self) -> dict[str, object]:
        """As OpenList sends it: ``error`` only when there is one."""
        shown = {name: getattr(self, name) for name in self.__slots__}
        if not self.error:
            del shown["error"]
        shown["received"] = [list(run) for run in self.received]
        return shown


def total_chunks(size: int, chunk_size: int) -> int:
    return max(1, -(-size // chunk_size))


def chunk_length(session: UploadSession, index: int) -> int:
    """The length chunk ``index`` must have: ``chunk_size``, the last one what is left."""
    return min(session.chunk_size, session.size - index * session.chunk_size)


def snapshot(session: UploadSession, chunks: dict[int, int], state: str = "") -> Snapshot:
    total = total_chunks(session.size, session.chunk_size)
    state = state or session.state
    if state == COMPLETED:
        chunks = {i: chunk_length(session, i) for i in range(total)}
    return Snapshot(
        upload_id=session.id,
        state=state,
        path=session.path,
        size=session.size,
        chunk_size=session.chunk_size,
        total_chunks=total,
        received=ranges(sorted(chunks)),
        received_bytes=sum(chunks.values()),
        frontier=_frontier(chunks, total),
        storage_progress=100.0 if state == COMPLETED else 0.0,
    )


def failed(shot: Snapshot, message: str) -> Snapshot:
    """``shot`` of a session that has just failed for good (it is gone)."""
    return replace(shot, state=FAILED, error=message)


def ranges(indexes: list[int]) -> list[tuple[int, int]]:
    """Sorted indexes as inclusive runs: [0, 1, 2, 5] is [(0, 2), (5, 5)]."""
    runs: list[tuple[int, int]] = []
    for index in indexes:
        if runs and runs[-1][1] == index - 1:
            runs[-1] = (runs[-1][0], index)
        else:
            runs.append((index, index))
    return runs


def _frontier(chunks: dict[int, int], total: int) -> int:
    """The first chunk not received yet (``total`` once all are)."""
    index = 0
    while index < total and index in chunks:
        index += 1
    return index
