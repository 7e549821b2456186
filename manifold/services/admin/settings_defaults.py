"""The built-in settings table, in the order AList v3.45 ships it.

The position of an item in ``DEFAULT_SETTINGS`` is its ``index`` column: the web
UI sorts a settings group by it, so the order is part of the compatible surface.
Values are stored as strings whatever their ``type``, exactly as the clients
expect them back from ``/api/public/settings`` and ``/api/admin/setting/*``.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum

VERSION_KEY = "version"
MANIFOLD_VERSION_KEY = "manifold_version"
# The name of the setting that holds the admin token, not a credential itself.
TOKEN_KEY = "token"  # noqa: S105


class Group(IntEnum):
    """Which settings page an item belongs to (``group`` column)."""

    SINGLE = 0
    SITE = 1
    STYLE = 2
    PREVIEW = 3
    GLOBAL = 4
    OFFLINE_DOWNLOAD = 5
    INDEX = 6
    SSO = 7
    LDAP = 8
    S3 = 9
    FTP = 10
    TRAFFIC = 11


class Flag(IntEnum):
    """Visibility of an item (``flag`` column)."""

    PUBLIC = 0
    PRIVATE = 1
    READONLY = 2
    DEPRECATED = 3


@dataclass(frozen=True, slots=True)
class SettingDefault:
    """One row of the default table.

    ``pre_default`` is the value an older release shipped: a stored value equal
    to it was never chosen by the admin, so start-up replaces it with ``value``.
    """

    key: str
    value: str
    type: str
    group: int
    flag: int
    options: str = ""
    help: str = ""
    pre_default: str | None = None


def _iframe_previews_json(
    viewers: tuple[tuple[str, tuple[tuple[str, str], ...]], ...],
) -> str:
    """Lay out the viewer map the way the web UI's settings editor shows it.

    The uneven spacing (a space after outer colons, none after inner ones) is
    kept byte for byte so the public settings response matches AList's own.
    """
    lines = ["{"]
    for outer_pos, (extensions, entries) in enumerate(viewers):
        lines.append(f'\t"{extensions}": {{')
        for inner_pos, (name, url) in enumerate(entries):
            comma = "," if inner_pos < len(entries) - 1 else ""
            lines.append(f'\t\t"{name}":"{url}"{comma}')
        lines.append("\t}," if outer_pos < len(viewers) - 1 else "\t}")
    lines.append("}")
    return "\n".join(lines)


_IFRAME_PREVIEWS = _iframe_previews_json(
    (
        (
            "doc,docx,xls,xlsx,ppt,pptx",
            (
                ("Microsoft", "https://view.officeapps.live.com/op/view.aspx?src=$e_url"),
                ("Google", "https://docs.google.com/gview?url=$e_url&embedded=true"),
            ),
        ),
        ("pdf", (("PDF.js", "https://alist-org.github.io/pdf.js/web/viewer.html?file=$e_url"),)),
        (
            "epub",
            (("EPUB.js", "https://alist-org.github.io/static/epub.js/viewer.html?url=$e_url"),),
        ),
    )
)

# Go regexp syntax on purpose: these strings are stored and shown as AList
# stores them, and are translated to Python syntax only when compiled.
_IPV4_PATTERN = (
    r"(?:(?:\d|[1-9]\d|1\d\d|2[0-4]\d|25[0-5])\.){3}(?:\d|[1-9]\d|1\d\d|2[0-4]\d|25[0-5])"
)
_IPV6_PATTERN = (
    r"([[:xdigit:]]{1,4}(?::[[:xdigit:]]{1,4}){7}|::|:(?::[[:xdigit:]]{1,4}){1,6}"
    r"|[[:xdigit:]]{1,4}:(?::[[:xdigit:]]{1,4}){1,5}"
    r"|(?:[[:xdigit:]]{1,4}:){2}(?::[[:xdigit:]]{1,4}){1,4}"
    r"|(?:[[:xdigit:]]{1,4}:){3}(?::[[:xdigit:]]{1,4}){1,3}"
    r"|(?:[[:xdigit:]]{1,4}:){4}(?::[[:xdigit:]]{1,4}){1,2}"
    r"|(?:[[:xdigit:]]{1,4}:){5}:[[:xdigit:]]{1,4}"
    r"|(?:[[:xdigit:]]{1,4}:){1,6}:)"
)
_ACCESS_TOKEN_PATTERN = r"(?U)access_token=(.*)&"  # noqa: S105 -- a redaction pattern, not a secret
_PRIVACY_REGS = "\n".join((_IPV4_PATTERN, _IPV6_PATTERN, _ACCESS_TOKEN_PATTERN))

# Shipped by earlier releases; installs still carrying it get the new empty default.
_OLD_CUSTOMIZE_HEAD = (
    '<script src="https://cdnjs.cloudflare.com/polyfill/v3/polyfill.min.js'
    '?features=String.prototype.replaceAll"></script>'
)

_LOGO_URL = "https://cdn.jsdelivr.net/gh/alist-org/logo@main/logo.svg"
_TEXT_TYPES = (
    "txt,htm,html,xml,java,properties,sql,js,md,json,conf,ini,vue,php,py,bat,gitignore,"
    "yml,go,sh,c,cpp,h,hpp,tsx,vtt,srt,ass,rs,lrc"
)
_FTP_USER_AGENT = (
    "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 "
    "(KHTML, like Gecko) Chrome/87.0.4280.88 Safari/537.36"
)
# Worker counts come from the config file at run time; 5 is its default.
_DEFAULT_WORKERS = "5"

_S, _T, _N, _B, _SEL = "string", "text", "number", "bool", "select"
_PUB, _PRIV, _RO = Flag.PUBLIC, Flag.PRIVATE, Flag.READONLY

# The text the page shows (and copies) once a share link is made: a Handlebars
# template the page fills in.
_SHARE_SUMMARY = (
    '{{creator}} shares {{#each files}}{{#if @first}}"{{filename this}}"{{/if}}'
    "{{#if @last}}{{#unless (eq @index 0)}} and {{@index}} more{{/unless}}{{/if}}"
    "{{/each}} on {{site_title}}: {{base_url}}/@s/{{id}}"
    "{{#if pwd}} (password: {{pwd}}){{/if}}"
    "{{#if expires}}, open until {{dateLocaleString expires}}{{/if}}"
)

_SITE_ITEMS = (
    # Filled with the running version at start; never taken from the database.
    SettingDefault(VERSION_KEY, "", _S, Group.SITE, _RO),
    SettingDefault("site_title", "Manifold", _S, Group.SITE, _PUB),
    SettingDefault(
        "announcement", "### repo\nhttps://github.com/alist-org/alist", _T, Group.SITE, _PUB
    ),
    SettingDefault(
        "pagination_type",
        "all",
        _SEL,
        Group.SITE,
        _PUB,
        options="all,pagination,load_more,auto_load_more",
    ),
    SettingDefault("default_page_size", "30", _N, Group.SITE, _PUB),
    SettingDefault("allow_indexed", "false", _B, Group.SITE, _PUB),
    SettingDefault("allow_mounted", "true", _B, Group.SITE, _PUB),
    SettingDefault("robots_txt", "User-agent: *\nAllow: /", _T, Group.SITE, _PUB),
)

_STYLE_ITEMS = (
    SettingDefault("logo", _LOGO_URL, _T, Group.STYLE, _PUB),
    SettingDefault("favicon", _LOGO_URL, _S, Group.STYLE, _PUB),
    SettingDefault("main_color", "#1890ff", _S, Group.STYLE, _PUB),
    SettingDefault("home_icon", "\U0001f3e0", _S, Group.STYLE, _PUB),
    SettingDefault(
        "home_container",
        "max_980px",
        _SEL,
        Group.STYLE,
        _PUB,
        options="max_980px,hope_container",
    ),
    SettingDefault("settings_layout", "list", _SEL, Group.STYLE, _PUB, options="list,responsive"),
)

_PREVIEW_ITEMS = (
    SettingDefault("text_types", _TEXT_TYPES, _T, Group.PREVIEW, _PRIV),
    SettingDefault("audio_types", "mp3,flac,ogg,m4a,wav,opus,wma", _T, Group.PREVIEW, _PRIV),
    SettingDefault("video_types", "mp4,mkv,avi,mov,rmvb,webm,flv,m3u8", _T, Group.PREVIEW, _PRIV),
    SettingDefault(
        "image_types", "jpg,tiff,jpeg,png,gif,bmp,svg,ico,swf,webp", _T, Group.PREVIEW, _PRIV
    ),
    SettingDefault("proxy_types", "m3u8,url", _T, Group.PREVIEW, _PRIV),
    SettingDefault("proxy_ignore_headers", "authorization,referer", _T, Group.PREVIEW, _PRIV),
    SettingDefault("external_previews", "{}", _T, Group.PREVIEW, _PUB),
    SettingDefault("iframe_previews", _IFRAME_PREVIEWS, _T, Group.PREVIEW, _PUB),
    SettingDefault(
        "audio_cover",
        "https://jsd.nn.ci/gh/alist-org/logo@main/logo.svg",
        _S,
        Group.PREVIEW,
        _PUB,
    ),
    SettingDefault("audio_autoplay", "true", _B, Group.PREVIEW, _PUB),
    SettingDefault("video_autoplay", "true", _B, Group.PREVIEW, _PUB),
    SettingDefault("preview_archives_by_default", "true", _B, Group.PREVIEW, _PUB),
    SettingDefault("readme_autorender", "true", _B, Group.PREVIEW, _PUB),
    SettingDefault("filter_readme_scripts", "true", _B, Group.PREVIEW, _PUB),
)

_GLOBAL_ITEMS = (
    SettingDefault("hide_files", r"/\/README.md/i", _T, Group.GLOBAL, _PUB),
    SettingDefault("package_download", "true", _B, Group.GLOBAL, _PUB),
    SettingDefault("customize_head", "", _T, Group.GLOBAL, _PRIV, pre_default=_OLD_CUSTOMIZE_HEAD),
    SettingDefault("customize_body", "", _T, Group.GLOBAL, _PRIV),
    SettingDefault(
        "link_expiration",
        "0",
        _N,
        Group.GLOBAL,
        _PRIV,
        help="hours; 0 means signatures never expire",
    ),
    SettingDefault("sign_all", "true", _B, Group.GLOBAL, _PRIV),
    SettingDefault("privacy_regs", _PRIVACY_REGS, _T, Group.GLOBAL, _PRIV),
    SettingDefault("ocr_api", "https://api.nn.ci/ocr/file/json", _S, Group.GLOBAL, _PUB),
    SettingDefault("filename_char_mapping", '{"/": "|"}', _T, Group.GLOBAL, _PUB),
    SettingDefault("forward_direct_link_params", "false", _B, Group.GLOBAL, _PUB),
    SettingDefault("ignore_direct_link_params", "sign,alist_ts", _S, Group.GLOBAL, _PUB),
    SettingDefault("webauthn_login_enabled", "false", _B, Group.GLOBAL, _PUB),
)

_INDEX_ITEMS = (
    # Generated at first start when empty, so the shipped value is blank.
    SettingDefault(TOKEN_KEY, "", _S, Group.SINGLE, _PRIV),
    SettingDefault(
        "search_index",
        "none",
        _SEL,
        Group.INDEX,
        _PUB,
        options="database,database_non_full_text,bleve,meilisearch,none",
    ),
    SettingDefault("auto_update_index", "false", _B, Group.INDEX, _PUB),
    SettingDefault("ignore_paths", "", _T, Group.INDEX, _PRIV, help="one path per line"),
    SettingDefault("max_index_depth", "20", _N, Group.INDEX, _PRIV, help="max depth of index"),
    SettingDefault("index_progress", "{}", _T, Group.SINGLE, _PRIV),
)

_SSO_ITEMS = (
    SettingDefault("sso_login_enabled", "false", _B, Group.SSO, _PUB),
    SettingDefault(
        "sso_login_platform",
        "",
        _SEL,
        Group.SSO,
        _PUB,
        options="Casdoor,Github,Microsoft,Google,Dingtalk,OIDC",
    ),
    SettingDefault("sso_client_id", "", _S, Group.SSO, _PRIV),
    SettingDefault("sso_client_secret", "", _S, Group.SSO, _PRIV),
    SettingDefault("sso_oidc_username_key", "name", _S, Group.SSO, _PRIV),
    SettingDefault("sso_organization_name", "", _S, Group.SSO, _PRIV),
    SettingDefault("sso_application_name", "", _S, Group.SSO, _PRIV),
    SettingDefault("sso_endpoint_name", "", _S, Group.SSO, _PRIV),
    SettingDefault("sso_jwt_public_key", "", _S, Group.SSO, _PRIV),
    SettingDefault("sso_extra_scopes", "", _S, Group.SSO, _PRIV),
    SettingDefault("sso_auto_register", "false", _B, Group.SSO, _PRIV),
    SettingDefault("sso_default_dir", "/", _S, Group.SSO, _PRIV),
    SettingDefault("sso_default_permission", "0", _N, Group.SSO, _PRIV),
    SettingDefault("sso_compatibility_mode", "false", _B, Group.SSO, _PUB),
)

_LDAP_ITEMS = (
    SettingDefault("ldap_login_enabled", "false", _B, Group.LDAP, _PUB),
    SettingDefault("ldap_server", "", _S, Group.LDAP, _PRIV),
    SettingDefault("ldap_manager_dn", "", _S, Group.LDAP, _PRIV),
    SettingDefault("ldap_manager_password", "", _S, Group.LDAP, _PRIV),
    SettingDefault("ldap_user_search_base", "", _S, Group.LDAP, _PRIV),
    SettingDefault("ldap_user_search_filter", "(uid=%s)", _S, Group.LDAP, _PRIV),
    SettingDefault("ldap_default_dir", "/", _S, Group.LDAP, _PRIV),
    SettingDefault("ldap_default_permission", "0", _N, Group.LDAP, _PRIV),
    SettingDefault("ldap_login_tips", "login with ldap", _S, Group.LDAP, _PUB),
)

_S3_ITEMS = (
    SettingDefault("s3_access_key_id", "", _S, Group.S3, _PRIV),
    SettingDefault("s3_secret_access_key", "", _S, Group.S3, _PRIV),
    SettingDefault("s3_buckets", "[]", _S, Group.S3, _PRIV),
)

_FTP_ITEMS = (
    SettingDefault("ftp_public_host", "127.0.0.1", _S, Group.FTP, _PRIV),
    SettingDefault("ftp_pasv_port_map", "", _T, Group.FTP, _PRIV),
    SettingDefault("ftp_proxy_user_agent", _FTP_USER_AGENT, _S, Group.FTP, _PRIV),
    SettingDefault("ftp_mandatory_tls", "false", _B, Group.FTP, _PRIV),
    SettingDefault("ftp_implicit_tls", "false", _B, Group.FTP, _PRIV),
    SettingDefault("ftp_tls_private_key_path", "", _S, Group.FTP, _PRIV),
    SettingDefault("ftp_tls_public_cert_path", "", _S, Group.FTP, _PRIV),
)

_TASK_THREAD_KEYS = (
    "offline_download_task_threads_num",
    "offline_download_transfer_task_threads_num",
    "upload_task_threads_num",
    "copy_task_threads_num",
    "decompress_download_task_threads_num",
    "decompress_upload_task_threads_num",
)
_SPEED_LIMIT_KEYS = (
    "max_client_download_speed",
    "max_client_upload_speed",
    "max_server_download_speed",
    "max_server_upload_speed",
)
# A speed limit of -1 means unlimited.
_TRAFFIC_ITEMS = tuple(
    SettingDefault(key, _DEFAULT_WORKERS, _N, Group.TRAFFIC, _PRIV) for key in _TASK_THREAD_KEYS
) + tuple(SettingDefault(key, "-1", _N, Group.TRAFFIC, _PRIV) for key in _SPEED_LIMIT_KEYS)

# AList appends these in a random tool order per start; a fixed order keeps the
# index column stable across restarts without breaking any client.
_OFFLINE_TOOL_ITEMS = (
    SettingDefault("aria2_uri", "http://localhost:6800/jsonrpc", _S, Group.OFFLINE_DOWNLOAD, _PRIV),
    SettingDefault("aria2_secret", "", _S, Group.OFFLINE_DOWNLOAD, _PRIV),
    SettingDefault(
        "qbittorrent_url",
        "http://admin:adminadmin@localhost:8080/",
        _S,
        Group.OFFLINE_DOWNLOAD,
        _PRIV,
    ),
    SettingDefault("qbittorrent_seedtime", "0", _N, Group.OFFLINE_DOWNLOAD, _PRIV),
    SettingDefault(
        "transmission_uri",
        "http://localhost:9091/transmission/rpc",
        _S,
        Group.OFFLINE_DOWNLOAD,
        _PRIV,
    ),
    SettingDefault("transmission_seedtime", "0", _N, Group.OFFLINE_DOWNLOAD, _PRIV),
)

# OpenList v4's settings for share links that its page reads (public, as there).
SHARE_SETTINGS: tuple[SettingDefault, ...] = (
    SettingDefault("share_preview_download_by_default", "true", _B, Group.PREVIEW, _PUB),
    SettingDefault("share_preview_archives_by_default", "false", _B, Group.PREVIEW, _PUB),
    SettingDefault("share_archive_preview", "false", _B, Group.GLOBAL, _PUB),
    SettingDefault("share_summary_content", _SHARE_SUMMARY, _T, Group.GLOBAL, _PUB),
)

# AList v3.45's settings, in its order.
ALIST_SETTINGS: tuple[SettingDefault, ...] = (
    *_SITE_ITEMS,
    *_STYLE_ITEMS,
    *_PREVIEW_ITEMS,
    *_GLOBAL_ITEMS,
    *_INDEX_ITEMS,
    *_SSO_ITEMS,
    *_LDAP_ITEMS,
    *_S3_ITEMS,
    *_FTP_ITEMS,
    *_TRAFFIC_ITEMS,
    *_OFFLINE_TOOL_ITEMS,
)
# Then Manifold's own, after every AList setting so that each of those keeps its place:
# its version, beside AList's ``version`` which clients parse (filled at start alike).
DEFAULT_SETTINGS: tuple[SettingDefault, ...] = (
    *ALIST_SETTINGS,
    SettingDefault(MANIFOLD_VERSION_KEY, "", _S, Group.SITE, _RO),
    # SimpleHttp: whether loopback and private addresses may be fetched (no SSRF by
    # default), and the largest file it fetches in bytes (0: no limit). In the Traffic
    # group, beside the offline download threads: the page shows no other group of
    # free settings for offline downloads (its tab for group 5 shows only the tools).
    SettingDefault(
        "offline_download_allow_private",
        "false",
        _B,
        Group.TRAFFIC,
        _PRIV,
        help="Offline downloads may fetch loopback, private and link-local addresses",
    ),
    SettingDefault(
        "offline_download_max_size",
        "0",
        _N,
        Group.TRAFFIC,
        _PRIV,
        help="Largest file an offline download with SimpleHttp fetches, in bytes (0: no limit)",
    ),
    # Links this server fetches (``/p``, proxied ``/d``, copies): whether a storage's
    # redirect to another host is followed when all its addresses are public
    # (``services.fs.redirects``); off, only to the storage's own host.
    SettingDefault(
        "link_redirect_public",
        "false",
        _B,
        Group.TRAFFIC,
        _PRIV,
        help="Downloads fetched through this server follow a storage's redirect to "
        "another host whose addresses are all public (off: only to the storage's own host)",
    ),
    # Archives: the most one listing or one extraction may decompress (bytes), the
    # most it may expand relative to the archive's size, and the most entries it
    # reads (each 0: no limit).
    SettingDefault("archive_list_max_size", str(4 << 30), _N, Group.TRAFFIC, _PRIV),
    SettingDefault("archive_extract_max_size", str(64 << 30), _N, Group.TRAFFIC, _PRIV),
    SettingDefault("archive_max_ratio", "250", _N, Group.TRAFFIC, _PRIV),
    SettingDefault("archive_max_entries", "200000", _N, Group.TRAFFIC, _PRIV),
    # Move tasks (OpenList's kind and setting): how many run at once.
    SettingDefault("move_task_threads_num", _DEFAULT_WORKERS, _N, Group.TRAFFIC, _PRIV),
    # LDAP: upgrade an ldap:// connection with StartTLS (ldaps:// is TLS from the start).
    SettingDefault(
        "ldap_start_tls",
        "false",
        _B,
        Group.LDAP,
        _PRIV,
        help="Upgrade ldap:// connections with StartTLS; the certificate is verified",
    ),
    # OpenList v4's share link settings, which its page reads.
    *SHARE_SETTINGS,
    # OpenList's resumable multipart uploads: offered to the page, and the chunk size
    # in MB it cuts files into (public: the page reads both before uploading).
    SettingDefault("multipart_enabled", "true", _B, Group.GLOBAL, _PUB),
    SettingDefault("multipart_chunk_size", "10", _N, Group.GLOBAL, _PUB),
    # Manifold's bounds on them: open sessions per user, the MB of chunks staged on
    # disk at once (every user), and the seconds after which an idle session goes.
    SettingDefault("multipart_max_sessions", "16", _N, Group.GLOBAL, _PRIV),
    SettingDefault("multipart_staging_budget", "10240", _N, Group.GLOBAL, _PRIV),
    SettingDefault("multipart_idle_seconds", "86400", _N, Group.GLOBAL, _PRIV),
)


def public_keys() -> frozenset[str]:
    """Keys served without login by ``/api/public/settings`` (read-only ones included)."""
    visible = (Flag.PUBLIC, Flag.READONLY)
    return frozenset(item.key for item in DEFAULT_SETTINGS if item.flag in visible)
