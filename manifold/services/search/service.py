"""Search: objects found by name in the index, each caller seeing what its listings show.

The ``search_index`` setting picks the searcher at every call: ``database`` (full text where
the engine has it), ``database_non_full_text`` (LIKE) or ``none``. AList's ``bleve`` and
``meilisearch`` cannot be saved here; a value that came from an AList database counts as
``none``. Switching while an index build runs is refused with ``index is running``.

A hit is shown only when the caller could reach it through listings: every folder from the
caller's base path down to the hit must open with the request's password and none of them
may be hidden from the caller (AList checks the hit alone, so it can reveal the names of
hidden folders and of files in password folders without ``p_sub``). ``total`` counts the
hits shown, and pages are always full; AList's total counts hits it then drops.

Where hide rules apply, a page costs about a page still: the matches are counted per
folder in the database; where a folder's hide lines are plain text (with ``^`` or ``$``
at most, as ``^\\.`` for dot files), the database counts the names they hide too, and
only folders under other patterns have their matches read to test the names. The page
itself is read in chunks, filtered, until full.

Where links can lead out of the caller's base path, the page is read in chunks too, and
each chunk's hits are asked at once whether links take them out; the total is exact
once the reading reaches the last match (see ``_confined``).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, replace
from typing import Protocol

from manifold.db.search_repo import IndexWrite, NameMatch, Node, NodeQuery, SearchRepo
from manifold.errors import BadRequest, IndexRunning, RelativePath, SearchNotAvailable
from manifold.models import Meta, Obj, Perm, User
from manifold.paths import (
    child_path,
    clean_path,
    is_sub_path,
    is_tree_name,
    join_base,
    split_path,
)
from manifold.policy import access
from manifold.services.admin.metas import MetaService
from manifold.services.admin.settings import SettingsService
from manifold.services.admin.storages import StorageService
from manifold.services.auth.service import Caller
from manifold.services.fs.read import GuardedReader
from manifold.services.search.indexer import Indexer, IndexSink, Progress
from manifold.state.bus import Bus
from manifold.state.locks import Locks

MODE_KEY = "search_index"
DATABASE = "database"
DATABASE_NON_FULL_TEXT = "database_non_full_text"
NONE = "none"
UNSUPPORTED = ("bleve", "meilisearch")


class Searcher(IndexSink, Protocol):
    """One index back end: the writes the indexer makes, and the query.

    ``search`` returns one page of nodes below ``query.parent`` ordered by name and the
    number of matches in all; ``per_page < 1`` returns every match.
    """

    async def search(
        self, query: NodeQuery, page: int, per_page: int
    ) -> tuple[list[Node], int]: ...

    async def children(self, parent: str) -> list[Node]: ...

    async def parents(self, query: NodeQuery) -> list[tuple[str, int]]:
        """The folders holding matches, each with how many it holds."""
        ...


class DatabaseSearcher:
    """The index in Manifold's own database (``search_nodes``)."""

    def __init__(self, repo: SearchRepo, full_text: bool) -> None:
        self._repo = repo
        self._full_text = full_text

    async def search(self, query: NodeQuery, page: int, per_page: int) -> tuple[list[Node], int]:
        return await self._repo.search(query, page, per_page, self._full_text)

    async def parents(self, query: NodeQuery) -> list[tuple[str, int]]:
        return await self._repo.parents(query, self._full_text)

    async def index(self, batch: Sequence[Node]) -> None:
        await self._repo.insert(batch)

    async def apply(self, writes: Sequence[IndexWrite]) -> list[bool]:
        return await self._repo.apply(writes)

    async def replace(self, batch: Sequence[Node]) -> None:
        await self._repo.replace(batch)

    async def remove(self, path: str) -> None:
        await self._repo.delete_tree(path)

    async def move(self, src: str, dst: str) -> bool:
        return await self._repo.move_tree(src, dst)

    async def clear(self) -> None:
        await self._repo.clear()

    async def children(self, parent: str) -> list[Node]:
        return await self._repo.children(parent)


@dataclass(frozen=True, slots=True)
class SearchRequest:
    parent: str
    keywords: str
    scope: int
    page: int
    per_page: int
    password: str


AUTO_UPDATE_KEY = "auto_update_index"
# Rows read at least per chunk when a page is filtered by hide rules.
CHUNK_MIN = 50
# Folders whose matches one query reads for a total; padded to a power of two, so
# that few statement shapes serve every count.
FOLDERS_PER_QUERY = 64
# Which of a chunk of matches a page keeps, in their order.
Keep = Callable[[list[Node]], Awaitable[list[Node]]]


class SearchService:
    """Queries, index administration, and the tree listener that keeps the index right."""

    def __init__(
        self,
        repo: SearchRepo,
        settings: SettingsService,
        storages: StorageService,
        fs: GuardedReader,
        metas: MetaService,
        locks: Locks | None = None,
        bus: Bus | None = None,
    ) -> None:
        self._settings = settings
        self._metas = metas
        self._searchers: dict[str, Searcher] = {
            DATABASE: DatabaseSearcher(repo, full_text=True),
            DATABASE_NON_FULL_TEXT: DatabaseSearcher(repo, full_text=False),
        }
        self.indexer = Indexer(settings, fs, locks, bus)
        self._repo = repo
        self._storages = storages
        self._fs = fs
        settings.guard(MODE_KEY, self._check_mode)

    async def start(self) -> None:
        await self.indexer.start()

    async def stop(self) -> None:
        await self.indexer.close()
        self._repo.close()

    @property
    def rows_read(self) -> int:
        """Index rows the searches have read so far: what a search costs."""
        return self._repo.rows_read

    def searcher(self) -> Searcher:
        """The searcher the setting names; ``search not available`` when there is none."""
        searcher = self._searchers.get(self._settings.get(MODE_KEY))
        if searcher is None:
            raise SearchNotAvailable()
        return searcher

    def _check_mode(self, value: str) -> None:
        if value in UNSUPPORTED:
            raise BadRequest(
                f"search index {value} is not available in Manifold; "
                f"choose {DATABASE}, {DATABASE_NON_FULL_TEXT} or {NONE}"
            )
        if self.indexer.running:
            raise IndexRunning()

    # -- queries -----------------------------------------------------------------

    async def search(self, caller: Caller, request: SearchRequest) -> tuple[list[Node], int]:
        searcher = self.searcher()
        if request.page < 1:
            raise BadRequest("page can't < 1")
        if request.per_page < 1:
            raise BadRequest("per_page can't < 1")
        try:
            parent = join_base(caller.user.base_path, request.parent)
        except RelativePath as exc:
            raise BadRequest(exc.message) from exc
        view = Visibility(caller.user, request.password, self._metas.nearest)
        if not view.folder(parent):
            return [], 0
        excluded, check_names = view.plan(parent, self._metas.all())
        query = NodeQuery(parent, tuple(request.keywords.split()), request.scope, excluded)
        if self._fs.links_confine(caller):
            confined = _Confined(view, lambda paths: self._fs.escaping(caller, paths))
            total = await _shown_total(searcher, query, view) if check_names else None
            return await _confined(searcher, query, confined, total, request)
        if not check_names:
            found, total = await searcher.search(query, request.page, request.per_page)
            return [n for n in found if view.shows(n)], total
        return await _filtered(searcher, query, view, request.page, request.per_page)

    # -- index administration --------------------------------------------------------

    def build_index(self) -> None:
        self.indexer.build(self.searcher())

    def update_index(self, paths: list[str], max_depth: int) -> None:
        self.indexer.update(self.searcher(), paths, max_depth)

    def stop_index(self) -> None:
        self.searcher()
        self.indexer.stop()

    def stop_here(self) -> None:
        """Another process asked to stop the build: stop it if it runs here."""
        self.indexer.stop_here()

    async def clear_index(self) -> None:
        await self.indexer.clear(self.searcher())

    def index_progress(self) -> Progress:
        """The stored progress, whatever the search setting: the Indexes page asks on
        every visit, and shows the last build even while search is off."""
        return self.indexer.progress()

    # -- tree listener -----------------------------------------------------------------

    def _active(self) -> Searcher | None:
        return self._searchers.get(self._settings.get(MODE_KEY))

    async def created(self, path: str, obj: Obj) -> None:
        searcher = self._active()
        if searcher is not None:
            await self.indexer.created(searcher, path, obj)

    async def removed(self, path: str) -> None:
        searcher = self._active()
        if searcher is not None:
            await self.indexer.removed(searcher, path)

    async def moved(self, src: str, dst: str) -> None:
        searcher = self._active()
        if searcher is not None:
            await self.indexer.moved(searcher, src, dst)

    async def listed(self, path: str, objs: list[Obj]) -> None:
        """AList's ``auto_update_index``: bring a folder's nodes in line with a fresh listing.

        Vanished names are removed (mount points and the folders leading to them
        excepted), new or changed ones indexed, new folders walked in the background.
        Only once a build has completed and none is running, as AList.
        """
        searcher = self._active()
        if searcher is None or not self._settings.get_bool(AUTO_UPDATE_KEY):
            return
        if self.indexer.running or not self.indexer.progress().is_done:
            return
        known = {node.name: node for node in await searcher.children(path)}
        now = {obj.name: obj for obj in objs}
        mounts = set(self._storages.virtual_children(path))
        # A node of a name no folder can hold (indexed before listings left such names
        # out) names no path: a rebuild of the index clears it.
        for name in sorted(n for n in known.keys() - now.keys() - mounts if is_tree_name(n)):
            await self.indexer.removed(searcher, child_path(path, name))
        for name, obj in now.items():
            node = known.get(name)
            if (
                node is None
                or node.is_dir != obj.is_dir
                or (not obj.is_dir and node.size != obj.size)
            ):
                await self.indexer.created(searcher, child_path(path, name), obj)


async def _filtered(
    searcher: Searcher, query: NodeQuery, view: Visibility, page: int, per_page: int
) -> tuple[list[Node], int]:
    """A page of the hits ``view`` shows, and how many it shows in all."""
    total = await _shown_total(searcher, query, view)
    start = (page - 1) * per_page
    if start >= total:
        return [], total
    shown, _, _ = await _shown_prefix(searcher, query, _showing(view), start + per_page)
    return shown[start : start + per_page], total


def _showing(view: Visibility) -> Keep:
    async def keep(found: list[Node]) -> list[Node]:
        return [node for node in found if view.shows(node)]

    return keep


async def _shown_total(searcher: Searcher, query: NodeQuery, view: Visibility) -> int:
    """Folders that show all their matches or none count from the database's counts;
    in folders with hide rules the database counts the names plain rules hide, and only
    the matches under other rules are read, to test their names."""
    total = 0
    counts: dict[str, int] = {}  # shown folders with hide rules -> their matches
    for parent, count in await searcher.parents(query):
        shown, patterns = view.entries(parent)
        if shown and patterns:
            counts[parent] = count
        elif shown:
            total += count
    plain: dict[str, tuple[tuple[NameMatch, ...], list[str]]] = {}  # by meta path
    other = []
    for folder in counts:
        meta = view.nearest(folder)
        matches = name_matches(meta.hide) if meta is not None else None
        if meta is None or matches is None:
            other.append(folder)
        else:
            plain.setdefault(meta.path, (matches, []))[1].append(folder)
    for meta_path, (matches, folders) in plain.items():
        below = meta_path if is_sub_path(query.parent, meta_path) else query.parent
        hiding = replace(query, parent=below, names=matches)
        hidden = dict(await searcher.parents(hiding))
        total += sum(counts[folder] - hidden.get(folder, 0) for folder in folders)
    return total + await _shown_in(searcher, query, view, other)


async def _shown_in(
    searcher: Searcher, query: NodeQuery, view: Visibility, folders: list[str]
) -> int:
    """How many matches directly in ``folders`` ``view`` shows, by reading them."""
    shown = 0
    for first in range(0, len(folders), FOLDERS_PER_QUERY):
        chunk = folders[first : first + FOLDERS_PER_QUERY]
        padded = chunk + chunk[-1:] * ((1 << (len(chunk) - 1).bit_length()) - len(chunk))
        found, _ = await searcher.search(replace(query, folders=tuple(padded)), 1, 0)
        shown += sum(1 for node in found if view.shows(node))
    return shown


def name_matches(hide: str) -> tuple[NameMatch, ...] | None:
    """The names a meta's hide lines hide, as plain matches the database can test; None
    when a line is a pattern beyond plain text with ``^`` and ``$`` at its ends."""
    matches = []
    for line in hide.split("\n"):
        match = _name_match(line)
        if match is None:
            return None
        matches.append(match)
    return tuple(matches)


_SPECIAL = frozenset(".+*?()|[]{}^$\\")


def _name_match(line: str) -> NameMatch | None:
    at_start = line.startswith("^")
    body = line[1:] if at_start else line
    at_end = body.endswith("$") and not _escaped_at(body, len(body) - 1)
    body = body[:-1] if at_end else body
    text: list[str] = []
    escaped = False
    for char in body:
        if escaped:
            if char.isascii() and char.isalnum():
                return None  # a class such as \d or an assertion such as \b
            text.append(char)
            escaped = False
        elif char == "\\":
            escaped = True
        elif char in _SPECIAL:
            return None
        else:
            text.append(char)
    return None if escaped else NameMatch("".join(text), at_start, at_end)


def _escaped_at(text: str, index: int) -> bool:
    """Whether the character at ``index`` follows an odd run of backslashes."""
    run = len(text[:index]) - len(text[:index].rstrip("\\"))
    return run % 2 == 1


async def _shown_prefix(
    searcher: Searcher, query: NodeQuery, keep: Keep, wanted: int
) -> tuple[list[Node], int, bool]:
    """The hits ``keep`` keeps, read in chunks of about ``wanted`` until there are
    ``wanted`` or more; how many matches there are in all, and whether all were read."""
    size = max(wanted, CHUNK_MIN)
    shown: list[Node] = []
    page = 1
    while True:
        found, total = await searcher.search(query, page, size)
        shown += await keep(found)
        read_all = not found or page * size >= total
        if read_all or len(shown) >= wanted:
            return shown, total, read_all
        page += 1


async def _confined(
    searcher: Searcher,
    query: NodeQuery,
    confined: _Confined,
    shown_total: int | None,
    request: SearchRequest,
) -> tuple[list[Node], int]:
    """A page of the hits shown that no link takes out of the base path, read a chunk at
    a time until full; and the total.

    ``shown_total``: the hits shown, links aside (None: every match). The total takes
    away the hits that links take out among those read, so it is exact once a page
    reaches the last match; before that it still counts the ones not read yet, as
    AList's total counts every hit.
    """
    start = (request.page - 1) * request.per_page
    shown, matches, read_all = await _shown_prefix(
        searcher, query, confined, start + request.per_page
    )
    if read_all:
        total = len(shown)
    else:
        total = max(
            (matches if shown_total is None else shown_total) - confined.dropped, len(shown)
        )
    return shown[start : start + request.per_page], total


class _Confined:
    """Keeps the hits ``view`` shows that no link takes out of the base path, and
    counts those the links took out."""

    def __init__(
        self, view: Visibility, escaping: Callable[[list[str]], Awaitable[set[str]]]
    ) -> None:
        self._view = view
        self._escaping = escaping
        self.dropped = 0

    async def __call__(self, found: list[Node]) -> list[Node]:
        shown = [node for node in found if self._view.shows(node)]
        out = await self._escaping([node.path for node in shown]) if shown else set()
        kept = [node for node in shown if node.path not in out]
        self.dropped += len(shown) - len(kept)
        return kept


class Visibility:
    """Which index nodes one caller may see with one password, remembered per folder."""

    def __init__(self, user: User, password: str, nearest: Callable[[str], Meta | None]) -> None:
        self._user = user
        self._base = clean_path(user.base_path)
        self._password = password
        self._nearest = nearest
        self._folders: dict[str, bool] = {}
        self._entries: dict[str, tuple[bool, access.Hides]] = {}

    def shows(self, node: Node) -> bool:
        """Whether the listing of the node's folder, reachable by the caller, shows it."""
        shown, hides = self.entries(node.parent)
        return shown and not (hides and access.is_hidden(node.name, hides))

    def nearest(self, folder: str) -> Meta | None:
        """The meta whose rules hold for ``folder``'s entries."""
        return self._nearest(folder)

    def entries(self, folder: str) -> tuple[bool, access.Hides]:
        """What holds for every entry of ``folder``: whether the caller sees them at all,
        and the hide patterns their names are tested against."""
        rule = self._entries.get(folder)
        if rule is None:
            rule = self._entries[folder] = self._entry_rule(folder)
        return rule

    def _entry_rule(self, folder: str) -> tuple[bool, access.Hides]:
        """``can_access`` for every entry of ``folder``, split into what holds for them
        all (the folder opens; its meta's password, carried down or not) and the hide
        patterns."""
        meta = self._nearest(folder)
        # The meta is the folder's or above it, never an entry's: only a password
        # carried down (``p_sub``) guards the entries themselves.
        guarded = meta is not None and bool(meta.password) and meta.p_sub
        unlocked = not guarded or (
            meta is not None and access.unlocks(self._user, meta, self._password)
        )
        return self.folder(folder) and unlocked, access.hides(meta, folder, self._user)

    def folder(self, path: str) -> bool:
        """Whether the caller can list ``path``, opening every folder from the base down."""
        known = self._folders.get(path)
        if known is None:
            known = self._folders[path] = self._reachable(path)
        return known

    def _reachable(self, path: str) -> bool:
        if not is_sub_path(self._base, path):
            return False
        if path != self._base:
            parent, name = split_path(path)
            if not self.shows(Node(parent, name, True, 0)):
                return False
        return access.can_access(self._user, self._nearest(path), path, self._password)

    def plan(self, parent: str, metas: list[Meta]) -> tuple[tuple[str, ...], bool]:
        """What the database can leave out below ``parent``: the folders whose password the
        caller lacks; and whether hide rules apply there, so names must be checked here."""
        excluded = tuple(
            m.path
            for m in metas
            if m.path != parent and is_sub_path(parent, m.path) and self._locked(m)
        )
        check_names = not self._user.can(Perm.SEE_HIDDEN) and any(
            m.hide and (is_sub_path(parent, m.path) or (m.h_sub and is_sub_path(m.path, parent)))
            for m in metas
        )
        return excluded, check_names

    def _locked(self, meta: Meta) -> bool:
        return not access.unlocks(self._user, meta, self._password)
