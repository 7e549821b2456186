"""Plain data shared by every layer. No behaviour beyond small derived properties."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass, field, fields
from datetime import datetime
from enum import IntEnum, IntFlag
from typing import Any

# Opens ``(offset, length)`` of one file as a byte stream (see ``Link``).
RangeReader = Callable[[int, int | None], AsyncIterator[bytes]]


class Role(IntEnum):
    GENERAL = 0
    GUEST = 1
    ADMIN = 2


class Perm(IntFlag):
    """User permission bits, numbered as AList v3.45 numbers them."""

    SEE_HIDDEN = 1 << 0
    ACCESS_WITHOUT_PASSWORD = 1 << 1
    OFFLINE_DOWNLOAD = 1 << 2
    WRITE = 1 << 3
    RENAME = 1 << 4
    MOVE = 1 << 5
    COPY = 1 << 6
    REMOVE = 1 << 7
    WEBDAV_READ = 1 << 8
    WEBDAV_MANAGE = 1 << 9
    FTP_READ = 1 << 10
    FTP_MANAGE = 1 << 11
    READ_ARCHIVES = 1 << 12
    DECOMPRESS = 1 << 13
    # OpenList v4's bits: make share links, and choose a share link's id.
    SHARE = 1 << 14
    SHARE_CUSTOM_ID = 1 << 15


ADMIN_DEFAULT_PERMISSION = 0x30FF
# The protocol servers' login bits (WebDAV 8/9, FTP/SFTP 10/11) stay the admin's to tick,
# as in AList since v3.41, so an admin can keep its password off those servers.
PROTOCOL_BITS = Perm.WEBDAV_READ | Perm.WEBDAV_MANAGE | Perm.FTP_READ | Perm.FTP_MANAGE
# Every other bit the admin role implies, whatever its stored bits say: a new admin can
# share, as OpenList's admin can, without ticking it on its own user first.
ADMIN_RIGHTS = sum(int(p) for p in Perm) & ~PROTOCOL_BITS


@dataclass(frozen=True, slots=True)
class SsoIdentity:
    """An account at a single sign-on provider: for OpenID Connect the issuer and the
    ``sub`` it gives, for the other platforms no issuer and the platform's user id."""

    issuer: str
    subject: str


@dataclass(slots=True)
class User:
    id: int
    username: str
    pwd_hash: str = field(repr=False)
    pwd_ts: int
    base_path: str
    role: int
    disabled: bool
    permission: int
    otp_secret: str = field(repr=False)
    sso_id: str
    # Random, replaced on every password change; login tokens carry it (services/auth/tokens.py).
    token_gen: str = field(default="", repr=False)
    # The OIDC issuer of ``sso_id`` (then the provider's ``sub``); empty otherwise.
    sso_issuer: str = ""

    @property
    def sso(self) -> SsoIdentity:
        return SsoIdentity(self.sso_issuer, self.sso_id)

    @property
    def is_admin(self) -> bool:
        return self.role == Role.ADMIN

    @property
    def is_guest(self) -> bool:
        return self.role == Role.GUEST

    def can(self, perm: Perm) -> bool:
        return bool(self.permission & perm)


def with_role_rights(user: User) -> User:
    """``user`` holding what its role implies (``ADMIN_RIGHTS`` for the admin); every
    user read from the database passes here, so the page, the API and the protocols see
    the same bits. (Applied on reading, not in ``can``: a user narrowed from the admin,
    an S3 key holder or a share's visitor, keeps the bits it was narrowed to.)"""
    if user.role == Role.ADMIN:
        user.permission |= ADMIN_RIGHTS
    return user


@dataclass(slots=True)
class Meta:
    id: int
    path: str
    password: str = field(repr=False)
    p_sub: bool = False
    write: bool = False
    w_sub: bool = False
    hide: str = ""
    h_sub: bool = False
    readme: str = ""
    r_sub: bool = False
    header: str = ""
    header_sub: bool = False


@dataclass(slots=True)
class SettingItem:
    key: str
    value: str
    help: str
    type: str
    options: str
    group: int
    flag: int
    index: int = 0


@dataclass(slots=True)
class SshKey:
    id: int
    user_id: int
    title: str
    fingerprint: str
    key_str: str
    added_time: datetime
    last_used_time: datetime


@dataclass(slots=True)
class Passkey:
    """A user's WebAuthn credential; ids and keys are as the authenticator gave them."""

    id: int
    user_id: int
    credential_id: bytes
    public_key: bytes
    sign_count: int
    aaguid: str
    transports: list[str]
    created: float
    last_used: float


@dataclass(frozen=True, slots=True)
class Challenge:
    """A WebAuthn ceremony begun: what the browser must sign, for whom and where.

    ``user_id`` is 0 for a login that lets the authenticator say who it is. ``owner``
    is what the ceremony counts against: the client's address, or the signed-in user."""

    purpose: str
    user_id: int
    challenge: bytes
    rp_id: str
    origin: str
    expires: float
    owner: str = ""


# ``Obj.thumb`` of an object whose thumbnail this server makes (the driver's ``link``
# with ``LinkArgs.type == "thumb"``); the API turns it into a signed ``/d`` URL.
THUMB_SELF = "self"


@dataclass(frozen=True, slots=True)
class Obj:
    """One file or folder as a driver reports it. ``path`` is driver-internal.

    Frozen: listings are shared between callers and cached, so an object is never
    changed, only replaced (``dataclasses.replace``). ``thumb`` is an absolute URL
    (a back end's own), ``THUMB_SELF``, or empty.
    """

    name: str
    size: int
    is_dir: bool
    modified: datetime
    created: datetime | None = None
    path: str = ""
    id: str = ""
    thumb: str = ""
    hash_info: dict[str, str] | None = None


def _obj_builder() -> Callable[[str, int, bool, datetime, datetime | None, str, str], Obj]:
    """``Obj(name, size, is_dir, modified, created, path, thumb=thumb)`` at about half
    the cost: a frozen dataclass sets each field through ``object.__setattr__``, this
    stores them straight into the slots. For drivers that build a listing of tens of
    thousands of objects; every field not taken keeps its default."""
    slots = {name: Obj.__dict__[name].__set__ for name in Obj.__slots__}
    if list(slots) != [f.name for f in fields(Obj)]:
        raise TypeError("Obj's slots and fields differ")  # caught at import
    name_, size_, dir_, modified_ = slots["name"], slots["size"], slots["is_dir"], slots["modified"]
    created_, path_, id_, thumb_, hash_ = (
        slots["created"],
        slots["path"],
        slots["id"],
        slots["thumb"],
        slots["hash_info"],
    )
    new = object.__new__

    def build(
        name: str,
        size: int,
        is_dir: bool,
        modified: datetime,
        created: datetime | None,
        path: str,
        thumb: str,
    ) -> Obj:
        obj = new(Obj)
        name_(obj, name)
        size_(obj, size)
        dir_(obj, is_dir)
        modified_(obj, modified)
        created_(obj, created)
        path_(obj, path)
        id_(obj, "")
        thumb_(obj, thumb)
        hash_(obj, None)
        return obj

    return build


new_obj = _obj_builder()


@dataclass(slots=True)
class Link:
    """How to fetch a file's bytes: a local file, a URL, or a range reader.

    ``reader`` is for back ends with neither a local path nor a public URL (SFTP,
    FTP, SMB, WebDAV behind a login): ``reader(offset, length)`` opens bytes
    ``[offset, offset + length)`` (``length`` None: to the end) as a stream that
    releases its connection when closed early. Whoever reads a link goes through
    ``services.fs.streams.open_range``, which serves all three kinds alike.

    ``verify`` False: fetch ``url`` without checking its TLS certificate. Only a driver
    whose storage's admin turned verification off (an explicit, unsafe option) says so.
    ``idle_timeout``: seconds a fetch of ``url`` may wait for its next byte before it
    fails as temporary (0: the server's own default); the storage's layers set it.
    """

    file_path: str = ""
    url: str = ""
    headers: dict[str, str] = field(default_factory=dict)
    expires_in: float | None = None
    reader: RangeReader | None = None
    verify: bool = True
    idle_timeout: float = 0.0
    # The reader's own key when it can splice its bytes into the client's socket
    # (``manifold.splice``): a link made anew over this one has none.
    relay: object | None = None


@dataclass(frozen=True, slots=True)
class DiskUsage:
    """A back end's space in bytes: ``total`` and ``free`` as ``df`` counts them (its
    Size and Avail: ``free`` is what a writer may still use), and ``used`` everything
    else, ``total - free``, blocks kept for root included (OpenList's figures, where
    free is total minus used). One rule for every back end: an SMB server (Samba)
    tells the space a writer may use and nothing of the blocks kept for root, so a
    disk shows the same through SMB as on Local. ``total`` is 0 where the back end
    tells the free space alone (FTP's ``AVBL``)."""

    @classmethod
    def of(cls, total: int, free: int) -> DiskUsage:
        """The usage of a back end with ``total`` bytes of which ``free`` are usable."""
        return cls(total, max(total - free, 0), free)

    total: int
    used: int
    free: int


@dataclass(slots=True)
class Storage:
    id: int
    mount_path: str
    driver: str
    order: int = 0
    cache_expiration: int = 30
    status: str = ""
    addition: str = "{}"
    remark: str = ""
    modified: datetime | None = None
    disabled: bool = False
    disable_index: bool = False
    enable_sign: bool = False
    order_by: str = ""
    order_direction: str = ""
    extract_folder: str = ""
    web_proxy: bool = False
    webdav_policy: str = "native_proxy"
    proxy_range: bool = False
    down_proxy_url: str = ""


class TaskState(IntEnum):
    """A task's state, numbered as AList's task library numbers them."""

    PENDING = 0
    RUNNING = 1
    SUCCEEDED = 2
    CANCELING = 3
    CANCELED = 4
    ERRORED = 5
    FAILING = 6
    FAILED = 7
    WAITING_RETRY = 8
    BEFORE_RETRY = 9


DONE_STATES = frozenset({TaskState.SUCCEEDED, TaskState.CANCELED, TaskState.FAILED})


@dataclass(slots=True)
class Task:
    """One unit of background work. ``payload`` is what a run (and a retry) gets."""

    id: str
    kind: str
    name: str
    created: datetime
    creator: str = ""
    creator_id: int = 0
    creator_role: int = -1
    state: int = TaskState.PENDING
    status: str = ""
    progress: float = 0.0
    total_bytes: int = 0
    error: str = ""
    retry: int = 0
    payload: dict[str, Any] = field(default_factory=dict)
    start_time: datetime | None = None
    end_time: datetime | None = None

    @property
    def done(self) -> bool:
        return self.state in DONE_STATES


@dataclass(frozen=True, slots=True)
class LinkArgs:
    """What the caller of ``Driver.link`` knows about the request."""

    ip: str = ""
    headers: Mapping[str, str] = field(default_factory=dict)
    type: str = ""
    redirect: bool = False


@dataclass(frozen=True, slots=True)
class OtherArgs:
    """A driver-specific operation on ``obj`` (``/api/fs/other``)."""

    obj: Obj
    method: str
    data: Any = None


@dataclass(slots=True)
class Share:
    """A share link: a window onto ``files`` (full virtual paths) that its creator
    opens to anyone holding the id (and ``pwd``, when set)."""

    id: str
    files: list[str]
    creator_id: int
    # Seconds since the epoch; None never expires.
    expires: float | None = None
    pwd: str = field(default="", repr=False)
    accessed: int = 0
    # 0 for no limit.
    max_accessed: int = 0
    disabled: bool = False
    remark: str = ""
    readme: str = ""
    header: str = ""
    order_by: str = ""
    order_direction: str = ""
    extract_folder: str = ""
    # What a visitor may do: see names and details (preview), fetch the bytes (download).
    allow_preview: bool = True
    allow_download: bool = True
