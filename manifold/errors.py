"""The one exception tree of Manifold.

Every error a client can see is an instance of a class below. Each class carries
the envelope ``code`` and the message text AList v3.45 uses, because clients
match on both (401 means "log in again", 402 "2FA code needed", 403 "ask for the
folder password", and messages ending in "object not found" mean a missing path).

    ManifoldError (500)
    ├── BadRequest (400)
    │   ├── InvalidRequest              request body or query failed validation
    │   │   └── InvalidName             a new name that cannot be a name (slash, NUL, control)
    │   │       └── NameTooLong         a new name over 255 bytes (UTF-8)
    │   ├── IndexRunning                a search index build or update is under way
    │   └── IndexNotRunning
    ├── Unauthorized (401)
    ├── WrongArchivePassword (202)      an archive's password is missing or wrong
    ├── TwoFactorRequired (402)         "Invalid 2FA code" at login
    ├── Forbidden (403)
    │   ├── PermissionDenied            "permission denied"
    │   ├── RelativePath                "access using relative path is not allowed"
    │   ├── PasswordRequired            meta password missing or wrong
    │   ├── WrongShareCode              a share link's password missing or wrong
    │   └── FileExists                  "file [<name>] exists": a taken name, no overwrite
    ├── NotFound (404)
    │   ├── TaskNotFound                "task not found"
    │   └── ShareNotFound               no share link has the id
    ├── ShareInvalid (410)              disabled, expired, used up or out of its creator's reach
    ├── TooManyAttempts (429)
    ├── UploadBusy (429)                a multipart upload's staging is full: send later
    ├── ChunkInFlight (409)             the same chunk is being received on another request
    └── ServerError (500)
        ├── ObjectNotFound              "object not found"
        │   └── ParentNotFound          a strict write under a missing folder
        ├── NotAFolder / NotAFile
        ├── ObjectExists
        ├── Overlapping                 a destination that is its source, inside it or holds it
        ├── StorageNotFound
        ├── NotSupported                the driver lacks the capability
        ├── AliasLoop                   an Alias reached again through its own target
        ├── UnknownArchiveFormat        no archive format recognised in the file
        ├── SearchNotAvailable          the search_index setting is none (or unknown)
        ├── TemporaryFailure            a back end is unreachable; worth retrying
        └── UpstreamStatus              a relayed URL answered an HTTP error

Protocol front ends (WebDAV, SFTP, FTP, S3) map these classes onto their own
status codes from this same tree.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Self


class ManifoldError(Exception):
    """Base of every error that reaches a client."""

    code: int = 500
    default_message: str = "internal error"
    # The envelope's ``data`` (AList sends some errors with data, e.g. a new id).
    data: Any = None

    def __init__(self, message: str | None = None, data: Any = None) -> None:
        self.message = message if message is not None else self.default_message
        self.data = data
        super().__init__(self.message)

    def with_context(self, context: str) -> ManifoldError:
        """Return a copy whose message is prefixed, AList style: ``context: inner``."""
        clone = type(self).__new__(type(self))
        ManifoldError.__init__(clone, f"{context}: {self.message}")
        return clone


class BadRequest(ManifoldError):
    code = 400
    default_message = "bad request"


class InvalidRequest(BadRequest):
    default_message = "request invalid"


class InvalidName(InvalidRequest):
    """A name a client gives to something new that cannot be a name here: empty, ``/``,
    ``\\`` or NUL in it, a reserved prefix, a control or text-reordering character.
    Every protocol answers it as its own "bad name", never as a failure to retry."""


class NameTooLong(InvalidName):
    """A new name longer than file systems keep (255 bytes in UTF-8): refused before
    any back end sees it, since its "name too long" reads as a failure worth retrying."""

    default_message = "file name too long"

    def __init__(self, name: str = "") -> None:
        size = len(name.encode("utf-8", "surrogatepass"))
        super().__init__(f"file name too long: {size} bytes, at most 255" if name else None)


class IndexRunning(BadRequest):
    default_message = "index is running"


class IndexNotRunning(BadRequest):
    default_message = "index is not running"


class Unauthorized(ManifoldError):
    code = 401
    default_message = "unauthorized"


class TwoFactorRequired(ManifoldError):
    code = 402
    default_message = "Invalid 2FA code"


class Forbidden(ManifoldError):
    code = 403
    default_message = "forbidden"


class PermissionDenied(Forbidden):
    default_message = "permission denied"


class RelativePath(Forbidden):
    default_message = "access using relative path is not allowed"


class PasswordRequired(Forbidden):
    default_message = "password is incorrect or you have no permission"


class WrongShareCode(Forbidden):
    default_message = "wrong share code"


class FileExists(Forbidden):
    """A name is taken and the request did not ask to overwrite it."""

    def __init__(self, name: str | None = None) -> None:
        super().__init__("file exists" if name is None else f"file [{name}] exists")


class NotFound(ManifoldError):
    code = 404
    default_message = "not found"


class TaskNotFound(NotFound):
    default_message = "task not found"


class TooManyAttempts(ManifoldError):
    code = 429
    default_message = (
        "Too many unsuccessful sign-in attempts have been made using an incorrect "
        "username or password, Try again later."
    )


class UploadBusy(ManifoldError):
    """OpenList's flow-control answer to a chunk that cannot be taken now."""

    code = 429
    default_message = "multipart staging is full, send the chunk again later"


class ChunkInFlight(ManifoldError):
    """OpenList's answer to a chunk another connection is sending at this moment."""

    code = 409
    default_message = "this chunk is already being received"


class ServerError(ManifoldError):
    code = 500
    default_message = "internal error"

    @classmethod
    def root_removal(cls) -> Self:
        return cls(
            "delete root folder is not allowed, please goto the manage page to "
            "delete the storage instead"
        )

    @classmethod
    def root_change(cls, action: str) -> Self:
        return cls(f"can't {action} a storage's root folder; edit the storage instead")

    @classmethod
    def across_storages(cls) -> Self:
        return cls("can't move files between two storages, try to copy")

    @classmethod
    def not_init(cls, status: str) -> Self:
        return cls(f"storage not init: {status}")


class WrongArchivePassword(ManifoldError):
    """AList answers code 202 here, so that the page asks for the archive's password."""

    code = 202
    default_message = "wrong archive password"


class AliasLoop(ServerError):
    """An Alias reached again through its own target: its tree holds itself."""

    default_message = "alias loop"

    @classmethod
    def through(cls, mounts: Sequence[str]) -> Self:
        return cls(f"{cls.default_message}: {' -> '.join(mounts)}")


class UnknownArchiveFormat(ServerError):
    default_message = "unknown archive format"


class ObjectNotFound(ServerError):
    default_message = "object not found"


class ParentNotFound(ObjectNotFound):
    """A protocol's strict write (``strict=True``) under a folder that is not there: the
    JSON API makes missing folders instead; WebDAV answers 409 Conflict."""

    default_message = "parent folder not found"


class NotAFolder(ServerError):
    default_message = "not a folder"


class NotAFile(ServerError):
    default_message = "not a file"


class ObjectExists(ServerError):
    default_message = "object already exists"


class Overlapping(ServerError):
    """A move, copy or replace whose destination is its source, lies inside it or holds
    it: refused before anything is touched (the API keeps AList's 500)."""


class StorageNotFound(ServerError):
    default_message = "storage not found"

    @classmethod
    def at(cls, path: str) -> Self:
        """No storage holds ``path`` (AList's text names the path)."""
        return cls(f"failed get storage: {cls.default_message}; rawPath: {path}")

    @classmethod
    def none_added(cls) -> Self:
        return cls(f"{cls.default_message}; please add a storage first")


class NotSupported(ServerError):
    default_message = "not support"


class SearchNotAvailable(ServerError):
    default_message = "search not available"


class TemporaryFailure(ServerError):
    default_message = "temporary failure, try again later"


class LeaseLost(TemporaryFailure):
    """A run-once lock's lease could not be renewed (``state.locks``): the work under
    it was stopped, since another process may hold the lock now."""

    default_message = "the lock was lost before the work ended"


class UpstreamStatus(ServerError):
    """A URL a download relays answered an HTTP error; ``status`` is what it answered."""

    def __init__(self, status: int) -> None:
        super().__init__(f"http request failure, status: {status}")
        self.status = status


class ShareNotFound(NotFound):
    default_message = "the share does not exist"


class ShareInvalid(ManifoldError):
    """A share that was there and is not any more: gone (410), never 403, which the
    page takes as "ask for the password"."""

    code = 410
    default_message = "the share has expired or is no longer valid"
