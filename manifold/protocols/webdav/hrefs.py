"""Request paths and hrefs: the one place that knows where ``/dav`` is mounted.

A request's path (already percent-decoded by the server) less the mount prefix is a
path relative to the caller's base path, which ``GuardedOps`` joins onto it. Hrefs
in answers are the same paths encoded segment by segment under the prefix.
"""

from __future__ import annotations

from urllib.parse import quote, unquote, urlsplit

from manifold.paths import clean_path

MOUNT = "/dav"
# Everything but unreserved characters and "/" is encoded: "#", "?", "%", "&", "+"
# and spaces in names must come back as the same names.
_SAFE = "/-._~"


class OutsideMount(ValueError):
    """A Destination that does not name a path under this server's ``/dav``."""


class Hrefs:
    def __init__(self, site_base: str) -> None:
        # ``/files`` when the site is served under a path, else "".
        self.prefix = site_base.rstrip("/") + MOUNT
        self._quoted = quote(self.prefix, safe=_SAFE)

    def path_of(self, request_path: str) -> str:
        """The user-relative path of a request path that starts with ``MOUNT``
        (the site's base path already taken off by the app)."""
        return clean_path(request_path[len(MOUNT) :] or "/")

    def href(self, path: str, is_dir: bool) -> str:
        quoted = self._quoted + quote(path, safe=_SAFE)
        if is_dir and not quoted.endswith("/"):
            quoted += "/"
        return quoted

    def folder_href(self, path: str) -> str:
        """The href of a folder, ending in "/", that its entries' names are appended to."""
        return self.href(path, True)

    def destination(self, header: str, host: str) -> str:
        """The user-relative path a ``Destination`` header names: an absolute URL on
        this host or an absolute path, percent-encoded or not, with or without a
        trailing slash."""
        parts = urlsplit(header.strip())
        if parts.scheme and parts.netloc and host and parts.netloc.lower() != host.lower():
            raise OutsideMount(header)
        raw = parts.path if parts.scheme or header.startswith("/") else ""
        path = unquote(raw)
        if path != self.prefix and not path.startswith(self.prefix + "/"):
            raise OutsideMount(header)
        return clean_path(path[len(self.prefix) :] or "/")
