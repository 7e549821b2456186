"""The driver contract every storage back end implements.

A driver is a folder under ``manifold/drivers/`` holding ``meta.py`` (the static
``DriverConfig`` named ``CONFIG`` and the per-storage options model named
``Addition``) and ``driver.py`` (the ``Driver`` subclass, exported as ``DRIVER``).
``meta.py`` never imports a third-party library, so a driver whose library is
missing can still describe itself. ``_template/`` is a commented skeleton to copy.

Four methods are mandatory (``init``, ``drop``, ``list``, ``link``). The others are
optional: the base implementation raises ``NotSupported`` and a driver declares a
capability by overriding the method (see ``Driver.capabilities``).
``move_over`` is one of them: a move or rename that replaces a file in one step,
for back ends whose rename replaces atomically (Local, SFTP, SMB).

Every method raises only classes from ``manifold.errors``; a driver translates its
library's exceptions at the edge and keeps the cause (``raise ... from exc``).
``Obj.path`` is driver-internal: callers pass back the objects a driver returned
and never build paths themselves.

The contract is four modules; this one re-exports what a driver imports from the
others, so a driver's imports from the package fit on one line:

* ``base`` (this one): ``Driver``, ``DriverConfig``, ``option``, ``RootPath``,
  ``RootID``, ``Upload``, ``ArchiveEntry``/``ArchiveMeta`` (what a back end that
  reads archives itself answers), and the promises ``EXCLUSIVE_CREATE``,
  ``FOLDER_MOVE``, ``ATOMIC_REPLACE``, ``FOLDER_TIMES``;
* ``resources``: ``Resources``, what the server shares with drivers (HTTP pools);
* ``helpers``: ``translating``/``translate`` with an ``ErrorTable``,
  ``run_blocking``, ``FileSource``, ``check_size``, ``gathered`` (a listing's pages
  joined within the server's bound) and ``too_many_entries``;
* ``temporaries``: ``Temporaries``, data in progress under a ``temporary_name``
  (discarded on failure, swept when stale);
* ``trees``: ``VirtualTree``/``WritableTree``, the server's tree as Alias sees it;
* ``progress``: ``made_progress``, said after each step of a call as long as its
  data (a folder removed entry by entry), which is watched for steps, not timed;
  ``waited`` for such a call made of one long request;
* ``options``: ``describe_options``, the storage form's items, which only the
  registry reads.
"""

from __future__ import annotations

import builtins
from abc import ABC, abstractmethod
from collections.abc import (
    AsyncGenerator,
    AsyncIterator,
    Awaitable,
    Callable,
    Mapping,
    Sequence,
)
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from typing import Any, ClassVar, Generic, Literal, TypeVar

from pydantic import BaseModel, Field, JsonValue

from manifold.concurrency import Pool, run_in
from manifold.drivers.helpers import (
    ErrorTable,
    FileSource,
    check_size,
    gathered,
    run_blocking,
    too_many_entries,
    translate,
    translating,
)
from manifold.drivers.progress import made_progress, waited
from manifold.drivers.resources import Resources
from manifold.drivers.temporaries import (
    Seen,
    Temporaries,
    Temporary,
    is_temporary,
    temporary_name,
)
from manifold.drivers.trees import VirtualTree, WritableTree
from manifold.errors import NotSupported, PermissionDenied
from manifold.models import DiskUsage, Link, LinkArgs, Obj, OtherArgs, Storage
from manifold.paths import RESERVED_PREFIX, parking_name, validate_name

# The contract defined here, and what a driver imports from the other three modules.
__all__ = [
    "ATOMIC_REPLACE",
    "EXCLUSIVE_CREATE",
    "FOLDER_MOVE",
    "FOLDER_TIMES",
    "RESERVED_PREFIX",
    "ArchiveEntry",
    "ArchiveMeta",
    "Driver",
    "DriverConfig",
    "ErrorTable",
    "FileSource",
    "LinkArgs",
    "NativeParts",
    "OtherArgs",
    "Resources",
    "RootID",
    "RootPath",
    "Seen",
    "Temporaries",
    "Temporary",
    "Upload",
    "VirtualTree",
    "WritableTree",
    "check_size",
    "gathered",
    "is_temporary",
    "made_progress",
    "option",
    "parking_name",
    "run_blocking",
    "temporary_name",
    "too_many_entries",
    "translate",
    "translating",
    "validate_name",
    "waited",
]

ItemType = Literal["string", "text", "number", "bool", "select"]

OptionsT = TypeVar("OptionsT", bound=BaseModel)
T = TypeVar("T")

# Where ``option`` keeps a field's form metadata; ``options.describe_options`` reads it.
ITEM_KEY = "driver_item"
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
# Threads of a storage's own pool (``Driver.run_blocking``) when its driver sets no
# ``max_concurrency``.
STORAGE_THREADS = 4

# Promises a back end may make beyond its methods (``Driver.promises``). The
# conformance suite holds a driver to each one it makes, and checks the weaker outcome
# where it makes none; the services emulate what they can for a driver that does not.
#
# A put or copy that must not replace (``overwrite`` false) is decided by the back end
# at the moment the file takes its name: of racing calls for one free name exactly
# one succeeds (Local's link-no-replace, S3's ``If-None-Match: *``). FTP's RNTO and
# WebDAV's MOVE replace what is there, so those drivers cannot promise it.
EXCLUSIVE_CREATE = "exclusive_create"
# Folders carry a real modification time (S3's prefixes have none).
FOLDER_TIMES = "folder_times"
# A put that replaces a file does it in one step: at no moment is the name free or
# the file half there (Local's ``os.replace``). A copy over a file is then made by
# such a put, instead of setting the old file aside and removing it after.
ATOMIC_REPLACE = "atomic_replace"
# A folder is moved or renamed in one step on the server, whatever it holds, so the
# services wait for ``move``/``rename`` of a folder in the request. A back end that
# moves a folder key by key (S3: a copy of each, then the deletes) leaves it out, and
# the services move such a folder as a task, one file after another, with progress.
FOLDER_MOVE = "folder_move"


@dataclass(frozen=True, slots=True)
class DriverConfig:
    """A driver's static configuration, as AList's ``driver.Config``.

    The first nine fields are what ``/api/admin/driver/info`` shows; the rest
    steer the server but are never serialised.
    """

    name: str
    local_sort: bool = False
    only_local: bool = False
    only_proxy: bool = False
    no_cache: bool = False
    no_upload: bool = False
    need_ms: bool = False
    default_root: str = ""
    alert: str = ""
    check_status: bool = False
    no_overwrite_upload: bool = False
    proxy_range_option: bool = False
    # A driver that fronts another server with its own index (AList V3): walking it
    # would index a whole remote site, so the search index never does.
    never_indexed: bool = False
    # Layers the server wraps around the driver (``vfs.layers``); 0 means none.
    # Seconds a metadata call may take before it fails as temporary:
    call_timeout: float = 0.0
    # Attempts of an idempotent call that failed as temporary (2 or more retries):
    retries: int = 0
    # Calls under way at once against one storage's back end; a download's reader and
    # an upload hold their call's slot until their last byte:
    max_concurrency: int = 0
    # Seconds a download's reader or an upload may go without a byte before it fails
    # as temporary (a server that stopped answering mid-transfer):
    idle_timeout: float = 0.0
    # Seconds ``init`` may take (connect and log in); a storage slower than that is
    # marked failed and tried again later, never holding the rest of the tree:
    init_timeout: float = 30.0

    @property
    def must_proxy(self) -> bool:
        """Whether downloads always go through this server rather than a redirect."""
        return self.only_local or self.only_proxy

    def to_json(self) -> dict[str, Any]:
        """The ``config`` object of the driver info endpoint, in AList's key order."""
        hidden = {
            "check_status",
            "no_overwrite_upload",
            "proxy_range_option",
            "never_indexed",
            "call_timeout",
            "retries",
            "max_concurrency",
            "idle_timeout",
            "init_timeout",
        }
        return {k: v for k, v in asdict(self).items() if k not in hidden}


def option(
    default: Any = ...,
    *,
    type: ItemType | None = None,
    options: str = "",
    required: bool = False,
    help: str = "",
    shown_default: str | None = None,
    secret: bool = False,
) -> Any:
    """A field of a driver's options model carrying AList's item metadata.

    ``default`` is the value used when the stored addition lacks the key (``...``
    makes the key mandatory). ``type`` defaults to one derived from the annotation.
    ``required`` is the admin form's flag only; ``shown_default`` overrides the
    default text the form shows. ``secret``: the admin API shows the value masked
    (``options.secret_options``), and keeps it when an edit sends the mask back.
    """
    item: dict[str, JsonValue] = {
        "type": type,
        "options": options,
        "required": required,
        "help": help,
        "shown_default": shown_default,
        "secret": secret,
    }
    return Field(default, json_schema_extra={ITEM_KEY: item})


class RootPath(BaseModel):
    """Options of a driver rooted at a path of its back end (AList's ``RootPath``).

    Mandatory: a missing key must never silently serve a back end's whole tree.
    """

    root_folder_path: str = option()


class RootID(BaseModel):
    """Options of a driver rooted at an object id of its back end (AList's ``RootID``)."""

    root_folder_id: str = option("")


@dataclass(frozen=True, slots=True)
class NativeParts:
    """The bytes of an ``Upload`` already in the store, as the parts of a native
    multipart upload (``Driver.multipart_begin``): ``count`` parts under ``token``.
    ``expected`` maps md5/sha1/sha256 to the hex digests the whole file must have;
    with any, the upload was begun ``hidden`` and the driver checks them before the
    file takes its name."""

    token: str
    count: int
    expected: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Upload:
    """A file for ``Driver.put``: its name in the target folder, its bytes, and what
    the sender said of them.

    One value rather than loose arguments, so that what an upload carries grows in
    one place, and the file tree, the storage operations and the layers between them
    and the driver pass it on untouched.
    ``size`` is None when the sender did not say (a multipart form); ``modified``
    None leaves the time to the back end. A driver that holds bytes back before they
    go out (S3's parts) calls ``progress`` with each piece as it is sent, when it is
    set, so that a transfer under way is not taken for a stalled one.
    """

    name: str
    stream: AsyncIterator[bytes]
    size: int | None
    modified: datetime | None
    overwrite: bool = True
    progress: Callable[[int], None] | None = None
    # Set: the bytes are the parts of a native multipart upload (``stream`` is empty),
    # which ``put`` finishes into place, by the same rules as any other upload.
    native: NativeParts | None = None


@dataclass(frozen=True, slots=True)
class ArchiveEntry:
    """A member of an archive as a back end that reads archives itself shows it;
    ``children`` is a folder's members when the back end sent them (None otherwise)."""

    name: str
    is_dir: bool
    size: int = 0
    modified: datetime = _EPOCH
    children: tuple[ArchiveEntry, ...] | None = None


@dataclass(frozen=True, slots=True)
class ArchiveMeta:
    """What an archive holds, as such a back end answers (AList's archive meta):
    ``tree`` None when it sends no member tree (the archive is listed a folder at a
    time instead)."""

    comment: str
    encrypted: bool
    tree: tuple[ArchiveEntry, ...] | None


class Driver(ABC, Generic[OptionsT]):
    """One mounted storage. Methods appear in the fixed driver order.

    Errors: only ``manifold.errors`` classes. ``ObjectNotFound`` for a missing
    object, ``NotAFolder``/``NotAFile`` for the wrong kind, ``ObjectExists`` for a
    taken name, ``PermissionDenied`` when the back end refuses, ``TemporaryFailure``
    when it is unreachable, ``NotSupported`` for a missing capability.
    """

    OPTIONAL_METHODS: ClassVar[tuple[str, ...]] = (
        "get",
        "make_dir",
        "move",
        "rename",
        "copy",
        "remove",
        "put",
        "move_over",
        "other",
        "fingerprint",
        "details",
        "list_pages",
        "list_refreshed",
        "archive_meta",
        "archive_list",
        "archive_link",
        "archive_decompress",
        "multipart_begin",
    )
    # What this back end promises beyond its methods (see ``EXCLUSIVE_CREATE``); a
    # driver that cannot keep one leaves it out, and says why in a comment.
    PROMISES: ClassVar[frozenset[str]] = frozenset({EXCLUSIVE_CREATE, FOLDER_MOVE, FOLDER_TIMES})

    def __init__(self, storage: Storage, options: OptionsT) -> None:
        self.storage = storage
        self.options = options
        # Set by the server before ``init`` for drivers that read other mounts; a
        # ``WritableTree`` when the server also lets them change other mounts.
        self.tree: VirtualTree | None = None
        # This storage's own threads for ``run_blocking``; the server sizes them by
        # the driver's ``max_concurrency`` when it mounts the storage.
        self.threads = Pool(f"manifold-storage{storage.mount_path}", STORAGE_THREADS)
        # What the server shares with its drivers (HTTP pools); the server hands over
        # its own before ``init``, a driver built on its own keeps this one.
        self.resources = Resources()
        # Set by the server: saves the storage's options (``addition()``) at once.
        self.options_saver: Callable[[str], Awaitable[None]] | None = None
        # Set by the server: the storage's options as saved now (another process on the
        # same database may have saved newer ones since this driver started).
        self.options_loader: Callable[[], Awaitable[str | None]] | None = None

    async def run_blocking(self, func: Callable[..., T], *args: Any) -> T:
        """``func(*args)``, a blocking library call, in this storage's own threads.

        A back end that hangs holds only its own storage's threads, never another
        storage's or those every request shares. Cancelling the caller stops the
        wait, not the call (see ``helpers.run_blocking``).
        """
        return await run_in(self.threads, func, *args)

    _capabilities: ClassVar[frozenset[str]] = frozenset()

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        # Worked out once per class: the services ask on every lookup.
        cls._capabilities = frozenset(
            name for name in cls.OPTIONAL_METHODS if getattr(cls, name) is not getattr(Driver, name)
        )

    @classmethod
    def capabilities(cls) -> frozenset[str]:
        """The optional methods this driver class overrides."""
        return cls._capabilities

    def promises(self) -> frozenset[str]:
        """What this storage promises beyond its methods (``EXCLUSIVE_CREATE``, ...)."""
        return self.PROMISES

    def addition(self) -> str:
        """The options as JSON text, saved back to the storage after ``init``."""
        return self.options.model_dump_json(by_alias=True)

    async def save_options(self) -> None:
        """Save ``self.options`` now: a driver that renews something at run time (a
        refreshed token, as AList's drivers do) keeps it across restarts. Saving
        happens after ``init`` anyway; this is for changes made later."""
        if self.options_saver is not None:
            await self.options_saver(self.addition())

    async def saved_options(self) -> str | None:
        """The storage's options as saved now (None outside a server)."""
        if self.options_loader is None:
            return None
        return await self.options_loader()

    def options_to_save(self, stored: str, addition: str) -> str:
        """What to save when this driver saves ``addition`` and the database holds
        ``stored`` (another process's save may lie between): its own, by default. A
        driver whose renewed values another process renews too (a rotated token) keeps
        the newer of each."""
        return addition

    async def options_saved(self, addition: str) -> None:
        """The storage's options as saved now, by another process (or merged with
        another's save, ``options_to_save``). A driver that renews values at run time
        takes the newer ones here; the others have nothing to do."""
        return None

    async def root_obj(self) -> Obj:
        """The storage's root folder.

        The default builds it from the ``RootPath`` or ``RootID`` options; drivers
        with neither override this.
        """
        options = self.options
        path = options.root_folder_path if isinstance(options, RootPath) else ""
        root_id = options.root_folder_id if isinstance(options, RootID) else ""
        path = path or "/"
        modified = self.storage.modified or _EPOCH
        return Obj(name="", size=0, is_dir=True, modified=modified, path=path, id=root_id)

    def folder_at(self, path: str) -> Obj | None:
        """The folder at ``path`` (clean and absolute, ``/`` excepted) made from the
        path alone, for ``list`` and ``list_pages``, without asking the back end.

        Offered by a driver whose listing of such a folder itself raises
        ``ObjectNotFound`` when nothing is there and ``NotAFolder`` at a file (asking
        the back end only when the listing alone cannot tell, as an empty prefix of an
        object store), so a listing is one round trip instead of a lookup and then a
        listing. ``None`` (the default): the services look the folder up first.
        """
        return None

    async def real_path(self, path: str) -> str:
        """Where ``path`` (inside the storage) ends up once links are followed.

        Back ends without links return it unchanged; the services use this to keep
        a user whose base path lies inside the storage from leaving it through a
        link that points elsewhere in the storage.
        """
        return path

    async def real_paths(self, paths: Sequence[str]) -> builtins.list[str | None]:
        """``real_path`` of each path, ``None`` where links lead out of the storage.

        Walks check many entries at once; a back end with links answers them all in
        one call instead of one round trip each.
        """
        found: builtins.list[str | None] = []
        for path in paths:
            try:
                found.append(await self.real_path(path))
            except PermissionDenied:
                found.append(None)
        return found

    async def served_from(
        self, anchor: str, paths: Sequence[str]
    ) -> builtins.list[tuple[str, str] | None] | None:
        """For a driver that serves other mounts (Alias): where each of ``paths`` is
        served from in the server's tree, paired with where ``anchor`` (a folder of this
        storage above them all) lies in the same target.

        The services carry a base path through it this way, so that links in the
        target are held below the anchor there as they are on the target's own storage.
        A pair is ``None`` for a folder the driver makes itself (an Alias root listing
        its names). Back ends of their own answer ``None``: ``real_paths`` is theirs.
        """
        return None

    @abstractmethod
    async def init(self) -> None:
        """Connect, log in and validate the options; may normalise ``self.options``.

        Raises any ``manifold.errors`` class; its message becomes the storage status.
        """

    @abstractmethod
    async def drop(self) -> None:
        """Release connections and other resources. Never raises; safe to call twice."""

    @abstractmethod
    async def list(self, dir: Obj) -> builtins.list[Obj]:
        """The children of folder ``dir``, in the back end's order.

        An object's ``thumb`` is an absolute URL (a cloud drive's), or
        ``/d<escaped virtual path>?type=thumb`` for a thumbnail this server makes
        through ``link`` with ``LinkArgs.type == "thumb"``; the API makes that one
        absolute and signs it. Raises ``ObjectNotFound`` when ``dir`` is gone,
        ``NotAFolder`` when it is a file.
        """

    @abstractmethod
    async def link(self, file: Obj, args: LinkArgs) -> Link:
        """How to fetch ``file``'s bytes: one ``Link`` of three kinds.

        * ``file_path``: a file on this machine (Local); the server reads it itself.
        * ``url``: where the bytes can be fetched (an S3 presigned URL, another
          AList's link), with ``expires_in``, the seconds it stays valid. ``/d``
          redirects the client there; ``/p`` fetches it, sending ``headers`` too (a
          redirect cannot carry them: a back end that needs them sets ``only_proxy``),
          and fetches it without checking its TLS certificate only when ``verify`` is
          False (set by a driver whose storage turned checks off, labelled unsafe),
          waiting no longer than ``idle_timeout`` for a byte (the storage's own).
        * ``reader``: a range reader, for back ends with neither (SFTP, FTP, SMB,
          WebDAV behind a login); the server streams the bytes through it, opening a
          range at a time and closing it early when the client goes. A reader whose
          bytes arrive on a plain socket may set ``relay`` to a key of its own (the
          driver) and, when its read finds ``manifold.splice.claim(key, offset,
          length)`` offers a sink, hand that socket to it: the kernel then splices the
          bytes into the client's socket (FTP, Rclone). A link made anew over another
          (crypt, chunk) leaves ``relay`` unset, so transformed bytes are never relayed.

        Raises ``ObjectNotFound`` when the file is gone and ``NotAFile`` for a folder
        (a ``reader`` may raise them when it opens instead).
        """

    async def list_pages(self, dir: Obj) -> AsyncGenerator[builtins.list[Obj], None]:
        """The children of ``dir`` a page at a time, in the back end's pages (S3's
        continuation tokens, as rclone's ``ListP``): a big folder never waits on one
        call, and the time limit applies to each page. A driver that has it still
        implements ``list`` (all pages joined). Errors as ``list``.
        """
        raise NotSupported()
        yield []  # an async generator, like the drivers' own

    async def list_refreshed(self, dir: Obj) -> builtins.list[Obj]:
        """``list``, the back end first told to drop any listing of ``dir`` it keeps
        itself (another AList's cache: AList's ``refresh``). Called instead of ``list``
        when a client asks for a refreshed listing; a back end that keeps none has no
        need of it. Errors as ``list``.
        """
        raise NotSupported()

    async def get(self, path: str) -> Obj:
        """Look an object up by its path inside the storage (``/`` is the root).

        ``path`` is clean and absolute. Raises ``ObjectNotFound`` when nothing is there.
        """
        raise NotSupported()

    async def make_dir(self, parent: Obj, name: str) -> Obj:
        """Create folder ``name`` in ``parent`` and return it.

        Idempotent: an existing folder of that name is returned unchanged. Raises
        ``ObjectExists`` when a file holds the name, ``ObjectNotFound`` when
        ``parent`` is gone, ``InvalidRequest``/``RelativePath`` for a bad name.
        """
        raise NotSupported()

    async def move(self, src: Obj, dst_dir: Obj) -> Obj:
        """Move ``src`` (a file or a whole folder) into ``dst_dir``; return it there.

        Raises ``ObjectExists`` when ``dst_dir`` already holds the name (the caller
        removes it first to overwrite), ``ObjectNotFound`` when either is gone, and an
        error when ``dst_dir`` lies inside ``src``. Moving into the current folder
        returns ``src`` unchanged.
        """
        raise NotSupported()

    async def rename(self, src: Obj, new_name: str) -> Obj:
        """Give ``src`` a new name in the same folder; return the renamed object.

        Raises ``ObjectExists`` when the name is taken, ``ObjectNotFound`` when
        ``src`` is gone, ``InvalidRequest``/``RelativePath`` for a bad name.
        """
        raise NotSupported()

    async def copy(self, src: Obj, dst_dir: Obj) -> Obj:
        """Copy ``src`` (a file or a whole folder) into ``dst_dir``; return the copy.

        The copy never aliases the source: changing one leaves the other intact.
        Raises ``ObjectExists`` when the name is taken (also when it is taken while
        the copy is being made: of racing copies to one name exactly one succeeds)
        and ``ObjectNotFound`` when either side is gone; a failed copy leaves nothing
        at the destination.
        """
        raise NotSupported()

    async def remove(self, obj: Obj) -> None:
        """Delete a file or a folder with everything in it.

        Not idempotent: removing a missing object raises ``ObjectNotFound``.
        """
        raise NotSupported()

    async def put(self, dst_dir: Obj, upload: Upload) -> Obj:
        """Store ``upload`` as a file in ``dst_dir``, replacing a file of its name.

        Nothing is visible at the destination until every byte has arrived and their
        count equals ``upload.size`` (when given). How is the back end's: a temporary
        name renamed into place (Local, SFTP), a multipart upload completed only after
        its last part (S3), or anything else with that outcome. An aborted stream, a
        cancelled call or a wrong count leaves nothing behind: neither the file nor any
        part of it. An exception raised by the stream propagates unchanged; a wrong
        count raises ``InvalidRequest``. Raises ``ObjectExists`` when a folder holds the
        name. ``upload.modified`` becomes the file's modification time where the back
        end allows it.

        With ``upload.overwrite`` false an existing file is kept and ``ObjectExists``
        raised instead, decided when the file is put in place, not by an earlier look:
        of several such puts racing for one free name exactly one succeeds.
        """
        raise NotSupported()

    async def move_over(self, src: Obj, dst_dir: Obj, name: str, replaced: Obj) -> Obj:
        """Give the file ``src`` the name ``name`` in ``dst_dir``, replacing the file
        ``replaced`` that holds that name there, in one step; return the file there.

        At no moment is the name free, and nothing is left under another name: a
        move or rename over a file that needs neither a parking name nor a removal
        after. ``dst_dir`` may be ``src``'s own folder (a rename over a file);
        ``replaced`` is the file as the caller found it, for a back end that addresses
        objects by id (one that goes by path checks the name itself). Only
        a file replaces, and only a file is replaced: ``NotAFile`` when ``src`` is a
        folder, ``ObjectExists`` when a folder holds ``name`` (whatever ``replaced``
        said). ``ObjectNotFound`` when ``src`` or ``dst_dir`` is gone; a name freed
        meanwhile is simply taken. Once it returns the old file's bytes are gone
        from the storage (a recycle bin may keep them, as it keeps removed files).

        Implemented only where the back end replaces in one step (a POSIX rename).
        ``NotSupported`` when it cannot after all (a server without the extension):
        the services then set the old file aside and remove it after, as they do
        for a driver without this method.
        """
        raise NotSupported()

    async def other(self, args: OtherArgs) -> Any:
        """A driver-specific operation; its result is returned to the client as is."""
        raise NotSupported()

    async def fingerprint(self, dir: Obj) -> str | None:
        """A cheap token that changes whenever the listing of folder ``dir`` does.

        A modification time (Local: one ``stat``) or an ETag. The server checks a
        kept listing against it instead of trusting it blindly for a while, so a
        change made behind its back shows at once while paging stays on one scan.
        ``None`` when the back end cannot tell right now (the listing is rescanned).
        """
        raise NotSupported()

    # --- archives the back end reads itself (AList's ArchiveReader) ---------------
    # Each raises ``NotSupported`` where this storage does not read archives itself
    # (an option turned off): the server then reads the archive by ranges through
    # ``link``, as it reads any other. ``inner`` is a clean absolute member path;
    # ``password`` the archive's; a wrong one raises ``WrongArchivePassword``.

    async def archive_meta(self, file: Obj, password: str) -> ArchiveMeta:
        """What archive ``file`` holds. Errors as ``link``."""
        raise NotSupported()

    async def archive_list(
        self, file: Obj, password: str, inner: str
    ) -> builtins.list[ArchiveEntry]:
        """The members of folder ``inner`` of archive ``file``; ``ObjectNotFound`` when
        there is no such folder."""
        raise NotSupported()

    async def archive_link(self, file: Obj, password: str, inner: str) -> Link:
        """How to fetch the bytes of member ``inner`` of archive ``file`` (a URL or a
        reader, as ``link``)."""
        raise NotSupported()

    async def archive_decompress(
        self,
        file: Obj,
        dst_dir: Obj,
        password: str,
        inner: str,
        into_new_dir: bool,
        overwrite: bool,
    ) -> None:
        """Extract member ``inner`` (a file or a folder, ``/`` the whole archive) of
        archive ``file`` into ``dst_dir`` of this storage, inside a new folder named
        after the archive when ``into_new_dir``, replacing files there only when
        ``overwrite`` (where the back end can tell; an AList remote replaces). Returns
        once the back end has taken the work on (it may still be extracting), or
        raises what it refused with."""
        raise NotSupported()

    # --- uploads the browser sends to the back end itself (OpenList's DirectUploader)

    def direct_upload_tools(self) -> builtins.list[str]:
        """The names of the ways a browser may upload straight to this storage
        (``HttpDirect``: one request to a signed URL); empty when there is none."""
        return []

    async def direct_upload_info(self, dir: Obj, name: str, size: int) -> dict[str, Any]:
        """What a browser needs to upload file ``name`` of ``size`` bytes into folder
        ``dir`` straight to the back end: ``upload_url``, ``method``, ``headers`` and
        ``chunk_size`` (0: one request), signed for that one object only."""
        raise NotSupported("not implement")

    # --- native multipart uploads (S3's, Azure's blocks) ---------------------------
    # Chunks of an API multipart upload go straight into the store, in any order and
    # from any instance, and ``put`` with ``Upload.native`` finishes them into place.
    # A driver offers it by overriding ``multipart_begin`` and the three below.

    MULTIPART_MIN_PART: ClassVar[int] = 1
    MULTIPART_MAX_PARTS: ClassVar[int] = 10_000

    def multipart_limits(self) -> tuple[int, int]:
        """The smallest part the store takes (the last may be smaller) and the most
        parts one upload may have."""
        return self.MULTIPART_MIN_PART, self.MULTIPART_MAX_PARTS

    async def multipart_begin(self, dst_dir: Obj, name: str, hidden: bool) -> str:
        """Begin a native upload of the file ``name`` in ``dst_dir``; a token (text,
        kept in the database) that reaches it from any instance. ``hidden``: finish
        it under a temporary key first (its hashes are checked before it takes the
        name). Nothing is visible under ``name`` until ``put`` finishes it."""
        raise NotSupported()

    async def multipart_part(
        self, token: str, index: int, length: int, stream: AsyncIterator[bytes]
    ) -> None:
        """Store part ``index`` (from 0) of ``length`` bytes; sent again, it replaces
        itself. ``InvalidRequest`` when the stream is not ``length`` bytes long."""
        raise NotSupported()

    async def multipart_abort(self, token: str) -> None:
        """Give up the upload and what the store holds of it; one already gone is
        not an error."""
        raise NotSupported()

    async def details(self) -> DiskUsage:
        """The back end's total and free space (OpenList's ``GetDetails``), shown in the
        storages table; implemented only where the back end knows them."""
        raise NotSupported()
