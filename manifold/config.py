"""The server's configuration: a JSON file in the data folder, overridden by the environment.

On first start the file is written with defaults and a freshly generated JWT secret,
so the secret survives restarts. Every key may be overridden by an environment
variable named ``MANIFOLD_`` + the key in upper case (``MANIFOLD_PORT=8080``).

The data folder holds that secret and the database (with the admin token that keys
every download sign), so it is the owner's alone: the folder is made (or tightened
to) ``0700`` and what Manifold keeps in it to ``0600``, whatever the umask.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import secrets
import stat
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

CONFIG_FILE = "config.json"
ENV_PREFIX = "MANIFOLD_"
PRIVATE_MASK = 0o077  # the group's and others' permission bits


class ConfigError(Exception):
    """The configuration cannot be read or used; the message is one line for the user."""


class Secret:
    """A string that never shows itself in a repr, a log line or an f-string."""

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        self._value = value

    def reveal(self) -> str:
        return self._value

    def __repr__(self) -> str:
        return "Secret('**********')"

    __str__ = __repr__

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Secret) and secrets.compare_digest(self._value, other._value)

    def __hash__(self) -> int:
        return hash(self._value)


@dataclass(slots=True)
class Config:
    data_dir: Path
    address: str = "0.0.0.0"  # noqa: S104 - a file server listens on every interface by default
    port: int = 5244
    site_url: str = ""
    database_url: str = ""
    jwt_secret: Secret = field(default_factory=lambda: Secret(""))
    token_expires_in: int = 48
    cors_origins: list[str] = field(default_factory=lambda: ["*"])
    trusted_proxies: list[str] = field(default_factory=list)
    log_level: str = "info"
    max_login_failures: int = 5
    login_lockout_seconds: int = 300
    max_request_body: int = 4 << 20
    # Entries one folder's listing from a back end may hold; a bigger one is refused
    # with an error naming the folder instead of growing the server's memory.
    max_listing_entries: int = 500_000
    # The web interface: on unless turned off; its files from ``dist_dir`` when set,
    # else from where the install step puts them (``web/dist`` beside the package).
    ui: bool = True
    dist_dir: str = ""
    # The WebDAV server at ``<site path>/dav`` on the main port.
    webdav: bool = True
    # The FTP server's own port (AList's ``ftp.listen``, 5221 there); 0 leaves it off.
    ftp_port: int = 0
    # The S3 server's own port (AList's ``s3.port``); 0 leaves it off.
    s3_port: int = 0
    # A multipart upload of the S3 server idle for this long is dropped with its parts.
    s3_upload_expiry_seconds: int = 86_400
    # The SFTP server's own port (AList's ``sftp.listen``, there ``:5222``); 0 leaves it off.
    sftp_port: int = 0
    # Processes on this machine sharing the port; ``cluster``: other instances share the
    # database (needs a server database and ``redis_url``).
    workers: int = 1
    cluster: bool = False
    # How long a stop waits for requests under way (downloads, uploads) to end.
    shutdown_seconds: int = 30
    # ``/metrics``: "" off, else a bearer token or a list of client addresses ("127.0.0.1,::1").
    metrics: str = ""
    log_format: str = "text"
    # Redis (``redis://host:6379/0``) for what several processes share: login failure
    # counters, the change bus and run-once locks. "" keeps them in this process.
    redis_url: str = ""
    # This instance's name in task leases and change messages; "" is host:pid.
    instance_id: str = ""
    # A task whose instance stopped renewing its lease for this long is run by another.
    task_lease_seconds: int = 30
    # Where the chunks of resumable multipart uploads wait; "" is ``multipart`` in the
    # data folder. Instances behind one balancer continue each other's uploads when it
    # is a folder they share.
    multipart_staging_dir: str = ""

    @property
    def multipart_staging(self) -> Path:
        if self.multipart_staging_dir:
            return Path(self.multipart_staging_dir)
        return self.data_dir / "multipart"

    @property
    def effective_database_url(self) -> str:
        if self.database_url:
            return self.database_url
        return f"sqlite+aiosqlite:///{self.data_dir / 'data.db'}"

    @property
    def config_path(self) -> Path:
        return self.data_dir / CONFIG_FILE


_FILE_KEYS = (
    "address",
    "port",
    "site_url",
    "database_url",
    "jwt_secret",
    "token_expires_in",
    "cors_origins",
    "trusted_proxies",
    "log_level",
    "max_login_failures",
    "login_lockout_seconds",
    "max_request_body",
    "max_listing_entries",
    "ui",
    "dist_dir",
    "webdav",
    "ftp_port",
    "s3_port",
    "s3_upload_expiry_seconds",
    "sftp_port",
    "workers",
    "cluster",
    "shutdown_seconds",
    "metrics",
    "log_format",
    "redis_url",
    "instance_id",
    "task_lease_seconds",
    "multipart_staging_dir",
)
_INT_KEYS = {
    "port",
    "token_expires_in",
    "max_login_failures",
    "login_lockout_seconds",
    "max_request_body",
    "max_listing_entries",
    "ftp_port",
    "s3_port",
    "s3_upload_expiry_seconds",
    "sftp_port",
    "workers",
    "shutdown_seconds",
    "task_lease_seconds",
}
_LIST_KEYS = {"cors_origins", "trusted_proxies"}
_BOOL_KEYS = {"ui", "webdav", "cluster"}
_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}


def load_config(data_dir: Path, env: Mapping[str, str] | None = None) -> Config:
    """Read (or create) the config file in ``data_dir`` and apply environment overrides."""
    env = os.environ if env is None else env
    data_dir = data_dir.resolve()
    _ensure_data_dir(data_dir)
    path = data_dir / CONFIG_FILE
    stored = _read_file(path) if path.exists() else {}
    if not stored.get("jwt_secret"):
        stored["jwt_secret"] = secrets.token_urlsafe(32)
    config = Config(data_dir=data_dir)
    _apply(config, stored, source=str(path))
    _write_file(path, config)
    overrides = {
        k: env[ENV_PREFIX + k.upper()] for k in _FILE_KEYS if ENV_PREFIX + k.upper() in env
    }
    _apply(config, overrides, source="environment")
    return config


def make_private(path: Path | str) -> None:
    """Take every permission of the group and of others away from ``path``, if it exists."""
    try:
        mode = stat.S_IMODE(os.stat(path).st_mode)
    except FileNotFoundError:
        return
    if mode & PRIVATE_MASK:
        os.chmod(path, mode & ~PRIVATE_MASK)


def _ensure_data_dir(data_dir: Path) -> None:
    try:
        data_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        make_private(data_dir)
        probe = data_dir / ".write-probe"
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as exc:
        raise ConfigError(f"data folder {data_dir} is not writable: {exc.strerror}") from exc


def _read_file(path: Path) -> dict[str, Any]:
    try:
        loaded = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ConfigError(f"cannot read config file {path}: {exc}") from exc
    if not isinstance(loaded, dict):
        raise ConfigError(f"config file {path} must hold a JSON object")
    return loaded


def _apply(config: Config, values: Mapping[str, Any], source: str) -> None:
    for key, raw in values.items():
        if key not in _FILE_KEYS:
            continue
        setattr(config, key, _coerce(key, raw, source))


def _coerce(key: str, raw: Any, source: str) -> Any:
    if key == "jwt_secret":
        if not isinstance(raw, str) or len(raw) < 16:
            raise ConfigError(f"{source}: jwt_secret must be a string of at least 16 characters")
        return Secret(raw)
    if key in _INT_KEYS:
        if isinstance(raw, int) and not isinstance(raw, bool):
            return raw
        if isinstance(raw, str) and re.fullmatch(r"-?\d+", raw.strip()):
            return int(raw)
        raise ConfigError(f"{source}: {key} must be a whole number, got {raw!r}")
    if key in _BOOL_KEYS:
        if isinstance(raw, bool):
            return raw
        if isinstance(raw, str) and raw.strip().lower() in _TRUE | _FALSE:
            return raw.strip().lower() in _TRUE
        raise ConfigError(f"{source}: {key} must be true or false, got {raw!r}")
    if key in _LIST_KEYS:
        if isinstance(raw, str):
            return [part.strip() for part in raw.split(",") if part.strip()]
        if isinstance(raw, list) and all(isinstance(x, str) for x in raw):
            return list(raw)
        raise ConfigError(f"{source}: {key} must be a list of strings")
    if not isinstance(raw, str):
        raise ConfigError(f"{source}: {key} must be a string")
    if key == "log_format" and raw not in ("text", "json"):
        raise ConfigError(f"{source}: log_format must be text or json, got {raw!r}")
    return raw


def _write_file(path: Path, config: Config) -> None:
    values = {k: getattr(config, k) for k in _FILE_KEYS}
    values["jwt_secret"] = config.jwt_secret.reveal()
    text = json.dumps(values, indent=2) + "\n"
    if path.exists() and path.read_text(encoding="utf-8") == text:
        make_private(path)  # written by an older version, or copied in by hand
        return
    temp = path.with_suffix(".json.tmp")
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(text)
    os.replace(temp, path)


def describe(config: Config) -> dict[str, Any]:
    """The configuration as it may be shown to a person: secrets masked."""
    shown = dataclasses.asdict(config)
    shown["jwt_secret"] = "**********"  # noqa: S105 - the mask, not a secret
    if config.metrics and not looks_like_addresses(config.metrics):
        shown["metrics"] = "**********"  # a bearer token
    shown["data_dir"] = str(config.data_dir)
    if "@" in config.database_url:
        shown["database_url"] = _mask_url_password(config.database_url)
    if "@" in config.redis_url:
        shown["redis_url"] = _mask_url_password(config.redis_url)
    return shown


def _mask_url_password(url: str) -> str:
    scheme, _, rest = url.partition("://")
    creds, _, host = rest.rpartition("@")
    user = creds.split(":", 1)[0]
    return f"{scheme}://{user}:***@{host}"


def looks_like_addresses(value: str) -> bool:
    """Whether ``metrics`` lists client addresses (else it is a bearer token)."""
    import ipaddress

    parts = [part.strip() for part in value.split(",") if part.strip()]
    try:
        for part in parts:
            ipaddress.ip_network(part, strict=False)
    except ValueError:
        return False
    return bool(parts)
