"""Downloads (``/d``, ``/p``): the sign check and which way each request's bytes go.

``/d`` redirects to a driver's URL unless the storage must be proxied; ``/p``
streams through this server and is refused (``proxy not allowed``) unless the
storage or the file's extension allows it. The rules are AList v3.45's
(``server/handles/down.go``, ``server/common/proxy.go``):

* should proxy (``/d``): the driver must proxy (``only_local``/``only_proxy``), or the
  storage has ``web_proxy``, or the extension is in ``proxy_types``;
* can proxy (``/p``): any of those, or ``webdav_policy`` is ``use_proxy_url``, or the
  extension is in ``text_types``.

No user login applies to these routes: the sign alone protects them. A request's path
is resolved once (``resolve``), and the place found serves the sign check, the rules
and the link.

``way`` writes these rules once for every route that serves a file's bytes: ``/d``,
``/p``, and the protocol servers (WebDAV's GET), which follow the storage's
``webdav_policy`` as AList does: ``302_redirect`` sends the client to the driver's
URL, ``use_proxy_url`` with a ``down_proxy_url`` to that proxy, anything else (and a
driver that must proxy) streams through this server.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Literal
from urllib.parse import parse_qsl, quote, urlencode

from manifold.drivers.base import DriverConfig
from manifold.errors import Forbidden, ServerError
from manifold.models import Link, LinkArgs, Obj, Storage
from manifold.paths import split_path
from manifold.services.admin.metas import MetaService
from manifold.services.admin.settings import SettingsService
from manifold.services.auth.sign import Signer
from manifold.services.fs.read import GuardedReader
from manifold.services.fs.tree import Place

# Never sent upstream from the client's request: they describe this connection.
_HOP_HEADERS = frozenset(
    {
        "host",
        "connection",
        "keep-alive",
        "proxy-connection",
        "proxy-authorization",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
        "content-length",
    }
)


# Which route asks: ``/d``, ``/p``, or a protocol server (WebDAV, by ``webdav_policy``).
Route = Literal["d", "p", "dav"]
# How the bytes go: a redirect to the driver's link URL, a redirect to the storage's
# download proxy, or streamed by this server.
Way = Literal["link", "proxy_url", "stream"]


@dataclass(frozen=True, slots=True)
class Target:
    """A download path resolved: its place, the storage serving it and its driver's
    static config."""

    place: Place
    storage: Storage
    config: DriverConfig

    @property
    def path(self) -> str:
        return self.place.path


def extension(name: str) -> str:
    """AList's ``utils.Ext``: lower-cased text after the last dot of the base name."""
    dot = name.rfind(".")
    return name[dot + 1 :].lower() if dot >= 0 else ""


class DownloadService:
    def __init__(
        self,
        fs: GuardedReader,
        metas: MetaService,
        settings: SettingsService,
        signer: Signer,
    ) -> None:
        self._fs = fs
        self._metas = metas
        self._settings = settings
        self._signer = signer
        # Settings split into sets, kept while the setting's text stays the same.
        self._lists: dict[str, tuple[str, frozenset[str]]] = {}

    def resolve(self, path: str, sign: str) -> Target:
        """The place serving ``path``, once ``sign`` is checked: ``Unauthorized`` (AList's
        texts) first, then AList's "storage not found" or "not initialised" errors."""
        place = self._fs.tree.find(path)
        meta = self._metas.nearest(path)
        if self._signer.needed(self._fs.needs_sign(path, meta, place)):
            self._signer.verify(path, sign.removesuffix("/"))
        if place is None:
            raise self._fs.tree.missing(path)
        return self.target_at(place)

    def sign_for(self, path: str, always: bool = False) -> str:
        """The sign a ``/d`` link of ``path`` carries: the one ``resolve`` asks for, or
        one in any case with ``always``; "" when none is asked (drivers that write
        ``/d`` links, Strm, get this as ``Resources.download_sign``)."""
        meta = self._metas.nearest(path)
        if always or self._signer.needed(self._fs.needs_sign(path, meta)):
            return self._signer.sign(path)
        return ""

    @staticmethod
    def target_at(place: Place) -> Target:
        """The target of a place already resolved (and allowed: no sign is checked)."""
        mounted = place.mounted
        if mounted.ops is None or mounted.config is None:
            raise ServerError.not_init(mounted.storage.status)
        return Target(place, mounted.storage, mounted.config)

    def way(self, target: Target, route: Route, proxy_url: bool = True) -> Way:
        """How ``route`` serves ``target``'s bytes; ``Forbidden`` ("proxy not allowed")
        where ``/p`` may not stream them. ``proxy_url`` False: never the download proxy
        (``/p?d``, asked by the proxy itself)."""
        if route == "dav":
            return self._dav_way(target, proxy_url)
        if route == "d" and not self.should_proxy(target):
            return "link"
        if not self.can_proxy(target):
            raise Forbidden("proxy not allowed")
        return "proxy_url" if proxy_url and self.down_proxy_url(target) else "stream"

    def _dav_way(self, target: Target, proxy_url: bool) -> Way:
        """AList's WebDAV GET: the policy alone decides, except that a driver that must
        proxy has no URL to send a client to (its storage form offers no redirect)."""
        policy = target.storage.webdav_policy
        if policy == "302_redirect" and not target.config.must_proxy:
            return "link"
        if policy == "use_proxy_url" and proxy_url and self.down_proxy_url(target):
            return "proxy_url"
        return "stream"

    def should_proxy(self, target: Target) -> bool:
        """Whether ``/d`` streams the file itself instead of redirecting."""
        if target.config.must_proxy or target.storage.web_proxy:
            return True
        return self._listed(extension(split_path(target.path)[1]), "proxy_types")

    def can_proxy(self, target: Target) -> bool:
        """Whether ``/p`` may stream the file at all."""
        if self.should_proxy(target) or target.storage.webdav_policy == "use_proxy_url":
            return True
        return self._listed(extension(split_path(target.path)[1]), "text_types")

    def down_proxy_url(self, target: Target) -> str:
        """The external download proxy's URL for the target, or ``""`` when none is set."""
        lines = target.storage.down_proxy_url.split("\n")
        base = lines[0].strip()
        if not base:
            return ""
        return f"{base}{quote(target.path)}?sign={self._signer.sign(target.path)}"

    async def link(self, target: Target, args: LinkArgs) -> tuple[Obj, Link]:
        """How to fetch the target's bytes, from the place resolved for the request."""
        return await self._fs.link_at(target.place, args)

    def direct_link_url(self, url: str, query: Iterable[tuple[str, str]]) -> str:
        """``url`` with the request's query added when ``forward_direct_link_params`` is on."""
        if not self._settings.get_bool("forward_direct_link_params"):
            return url
        ignored = set(self._settings.get("ignore_direct_link_params").split(","))
        kept = [(k, v) for k, v in query if k not in ignored]
        if not kept:
            return url
        return url + ("&" if "?" in url else "?") + urlencode(kept)

    def upstream_headers(
        self, client: Iterable[tuple[str, str]], link: Mapping[str, str]
    ) -> list[tuple[str, str]]:
        """The client's headers minus ``proxy_ignore_headers``, then the link's on top."""
        ignored = set(self._settings.get("proxy_ignore_headers").lower().split(","))
        overridden = {name.lower() for name in link}
        headers = [
            (name, value)
            for name, value in client
            if (lower := name.lower()) not in ignored
            and lower not in _HOP_HEADERS
            and lower not in overridden
        ]
        headers.extend(link.items())
        if not any(name.lower() == "accept-encoding" for name, _ in headers):
            # The body is passed on as it arrives: never ask for an encoding the
            # client did not ask for.
            headers.append(("Accept-Encoding", "identity"))
        return headers

    def _listed(self, ext: str, setting: str) -> bool:
        text = self._settings.get(setting)
        kept = self._lists.get(setting)
        if kept is None or kept[0] != text:
            # Split without trimming, as AList does: "a, b" lists " b", not "b".
            kept = self._lists[setting] = (text, frozenset(text.split(",")))
        return ext in kept[1]


def query_pairs(query_string: bytes) -> list[tuple[str, str]]:
    return parse_qsl(query_string.decode("latin-1"), keep_blank_values=True)
