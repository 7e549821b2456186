"""The database schema as SQLAlchemy Core tables. Migrations in ``migrations/`` create it."""

from __future__ import annotations

from sqlalchemy import (
    BigInteger,
    Boolean,
    Column,
    DateTime,
    Double,
    Float,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    UniqueConstraint,
)

metadata = MetaData()

users = Table(
    "users",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("username", String(255), nullable=False, unique=True),
    Column("pwd_hash", String(255), nullable=False, default=""),
    Column("pwd_ts", BigInteger, nullable=False, default=0),
    Column("base_path", Text, nullable=False, default="/"),
    Column("role", Integer, nullable=False, default=0),
    Column("disabled", Boolean, nullable=False, default=False),
    Column("permission", Integer, nullable=False, default=0),
    Column("otp_secret", String(255), nullable=False, default=""),
    Column("sso_id", String(255), nullable=False, default=""),
    # Migration 0013: the OIDC provider that issued ``sso_id`` (its ``sub``); empty for
    # the other platforms' ids and for bindings made before.
    Column("sso_issuer", String(255), nullable=False, default=""),
    Column("token_gen", String(32), nullable=False),
)

settings = Table(
    "settings",
    metadata,
    Column("key", String(255), primary_key=True),
    Column("value", Text, nullable=False, default=""),
    Column("help", Text, nullable=False, default=""),
    Column("type", String(32), nullable=False, default="string"),
    Column("options", Text, nullable=False, default=""),
    Column("group", Integer, nullable=False, default=0),
    Column("flag", Integer, nullable=False, default=0),
    Column("index", Integer, nullable=False, default=0),
)

metas = Table(
    "metas",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("path", String(768), nullable=False, unique=True),
    Column("password", Text, nullable=False, default=""),
    Column("p_sub", Boolean, nullable=False, default=False),
    Column("write", Boolean, nullable=False, default=False),
    Column("w_sub", Boolean, nullable=False, default=False),
    Column("hide", Text, nullable=False, default=""),
    Column("h_sub", Boolean, nullable=False, default=False),
    Column("readme", Text, nullable=False, default=""),
    Column("r_sub", Boolean, nullable=False, default=False),
    Column("header", Text, nullable=False, default=""),
    Column("header_sub", Boolean, nullable=False, default=False),
)

ssh_keys = Table(
    "ssh_keys",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("user_id", Integer, nullable=False, index=True),
    Column("title", String(255), nullable=False),
    Column("fingerprint", String(255), nullable=False),
    Column("key_str", Text, nullable=False),
    Column("added_time", DateTime(timezone=True), nullable=False),
    Column("last_used_time", DateTime(timezone=True), nullable=False),
    UniqueConstraint("user_id", "title", name="uq_ssh_keys_user_title"),
)

storages = Table(
    "storages",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("mount_path", String(768), nullable=False, unique=True),
    Column("order", Integer, nullable=False, default=0),
    Column("driver", String(64), nullable=False),
    Column("cache_expiration", Integer, nullable=False, default=30),
    Column("status", Text, nullable=False, default=""),
    Column("addition", Text, nullable=False, default="{}"),
    Column("remark", Text, nullable=False, default=""),
    Column("modified", DateTime(timezone=True), nullable=True),
    Column("disabled", Boolean, nullable=False, default=False),
    Column("disable_index", Boolean, nullable=False, default=False),
    Column("enable_sign", Boolean, nullable=False, default=False),
    Column("order_by", String(64), nullable=False, default=""),
    Column("order_direction", String(16), nullable=False, default=""),
    Column("extract_folder", String(16), nullable=False, default=""),
    Column("web_proxy", Boolean, nullable=False, default=False),
    Column("webdav_policy", String(32), nullable=False, default="native_proxy"),
    Column("proxy_range", Boolean, nullable=False, default=False),
    Column("down_proxy_url", Text, nullable=False, default=""),
)

# A logged-out token stays refused until it would have expired anyway.
revoked_tokens = Table(
    "revoked_tokens",
    metadata,
    Column("jti", String(64), primary_key=True),
    Column("expires_at", BigInteger, nullable=False, index=True),
)

# Single sign-on flows whose callback came back (migration 0013), by a digest of their
# state, until they would have expired: a flow is accepted once on every instance.
sso_flows = Table(
    "sso_flows",
    metadata,
    Column("flow", String(64), primary_key=True),
    Column("expires", BigInteger, nullable=False, index=True),
)

# Long-running work (copies between storages, uploads run as tasks). ``payload`` is the
# JSON a task kind needs to run again, so a restart can offer a retry.
tasks = Table(
    "tasks",
    metadata,
    Column("id", String(32), primary_key=True),
    Column("kind", String(32), nullable=False, index=True),
    Column("name", Text, nullable=False, default=""),
    Column("creator", String(255), nullable=False, default=""),
    # Who may see the task is decided by id: a name can be changed or reused.
    Column("creator_id", Integer, nullable=False, default=0),
    Column("creator_role", Integer, nullable=False, default=-1),
    Column("state", Integer, nullable=False, default=0),
    Column("status", Text, nullable=False, default=""),
    Column("progress", Float, nullable=False, default=0.0),
    Column("total_bytes", BigInteger, nullable=False, default=0),
    Column("error", Text, nullable=False, default=""),
    Column("retry", Integer, nullable=False, default=0),
    Column("payload", Text, nullable=False, default="{}"),
    Column("created", DateTime(timezone=True), nullable=False),
    Column("start_time", DateTime(timezone=True), nullable=True),
    Column("end_time", DateTime(timezone=True), nullable=True),
    # The instance running the task and until when it holds it (migration 0007): another
    # instance claims an unfinished task only when it has no owner or its lease ran out.
    Column("owner", String(128), nullable=True),
    Column("lease_until", DateTime(timezone=True), nullable=True),
    Column("heartbeat", DateTime(timezone=True), nullable=True),
    # Set by a cancel on any instance; the owner sees it at its next heartbeat.
    Column("cancel", Boolean, nullable=False, default=False),
    Index("ix_tasks_claim", "state", "lease_until"),
)

# The search index: one row per object, keyed by its folder and name.
search_nodes = Table(
    "search_nodes",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("parent", String(768), nullable=False, index=True),
    Column("name", String(512), nullable=False),
    Column("is_dir", Boolean, nullable=False, default=False),
    Column("size", BigInteger, nullable=False, default=0),
    # The name case-folded, which keywords are matched against (migration 0003).
    Column("name_key", String(1024), nullable=False, default=""),
)

# WebDAV dead properties (PROPPATCH): per full virtual path, name "{namespace}local";
# and the S3 server's notes on objects, name "manifold:object" (path index: 0011).
dav_props = Table(
    "dav_props",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("path", Text, nullable=False),
    Column("name", Text, nullable=False),
    Column("value", Text, nullable=False, default=""),
    Index("ix_dav_props_path", "path", mysql_length={"path": 255}),
)

# What several processes on one database share (migration 0006). ``changes`` is the
# change bus: each process inserts what it changed and polls for the others' rows,
# which are pruned after a minute. The id is a 64-bit counter where the database has
# one (SQLite's integer primary key is already 64-bit).
changes = Table(
    "changes",
    metadata,
    Column(
        "id", BigInteger().with_variant(Integer, "sqlite"), primary_key=True, autoincrement=True
    ),
    Column("created", Double, nullable=False),
    Column("origin", String(64), nullable=False),
    Column("topic", String(64), nullable=False),
    Column("data", Text, nullable=False),
)

# Run-once locks: held by ``owner`` until ``expires`` (seconds since the epoch).
leases = Table(
    "leases",
    metadata,
    Column("name", String(191), primary_key=True),
    Column("owner", String(64), nullable=False),
    Column("expires", Double, nullable=False),
)

# Login failure counters: one row per (limiter, side, key, other half of the pair),
# found by ``pair`` (a digest of all four) and grouped by ``bucket`` (of the first three).
login_failures = Table(
    "login_failures",
    metadata,
    Column("pair", String(64), primary_key=True),
    Column("bucket", String(64), nullable=False, index=True),
    Column("other", Text, nullable=False),
    Column("count", Integer, nullable=False),
    Column("last", Double, nullable=False),
)

# What the protocol servers share (migration 0008). A WebDAV lock until it is
# unlocked or ``expires`` (seconds since the epoch) passes; ``holder`` is the id of the
# user who took it (migration 0012).
dav_locks = Table(
    "dav_locks",
    metadata,
    Column("token", String(64), primary_key=True),
    Column("path", Text, nullable=False),
    Column("infinite", Boolean, nullable=False),
    Column("exclusive", Boolean, nullable=False),
    Column("owner", Text, nullable=False),
    Column("timeout", Integer, nullable=False),
    Column("expires", Double, nullable=False),
    Column("holder", Integer, nullable=False),
)

# An S3 multipart upload in progress; its parts are on the disk of ``holder``.
s3_uploads = Table(
    "s3_uploads",
    metadata,
    Column("upload_id", String(32), primary_key=True),
    Column("bucket", Text, nullable=False),
    Column("key", Text, nullable=False),
    Column("initiated", Double, nullable=False),
    Column("holder", String(191), nullable=False),
)

# Passkeys (migration 0009): a user's WebAuthn credentials, found at login by
# ``credential_key`` (the SHA-256 of the credential id, which may be up to 1023 bytes
# long: too long for a unique index everywhere). ``sign_count`` only ever grows.
passkeys = Table(
    "passkeys",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("user_id", Integer, nullable=False, index=True),
    Column("credential_key", String(64), nullable=False, unique=True),
    Column("credential_id", Text, nullable=False),
    Column("public_key", Text, nullable=False),
    Column("sign_count", BigInteger, nullable=False, default=0),
    Column("aaguid", String(36), nullable=False, default=""),
    Column("transports", Text, nullable=False, default=""),
    Column("created", Double, nullable=False),
    Column("last_used", Double, nullable=False, default=0.0),
)

# A WebAuthn ceremony begun and not yet finished: the challenge the browser must sign,
# kept here rather than handed to the client, until it is taken once or ``expires``.
webauthn_challenges = Table(
    "webauthn_challenges",
    metadata,
    Column("session", String(64), primary_key=True),
    Column("purpose", String(16), nullable=False),
    Column("user_id", Integer, nullable=False),
    Column("challenge", String(128), nullable=False),
    Column("rp_id", String(255), nullable=False),
    Column("origin", Text, nullable=False),
    Column("expires", Double, nullable=False, index=True),
    # Migration 0013: what the ceremony counts against, a client address or a user.
    Column("owner", String(80), nullable=False, default="", index=True),
)


# Share links (migration 0010): ``files`` is a JSON list of full virtual paths,
# ``expires`` seconds since the epoch (NULL: never).
shares = Table(
    "shares",
    metadata,
    Column("id", String(64), primary_key=True),
    Column("files", Text, nullable=False),
    Column("creator_id", Integer, nullable=False, index=True),
    Column("expires", Double, nullable=True),
    Column("pwd", Text, nullable=False, default=""),
    Column("accessed", Integer, nullable=False, default=0),
    Column("max_accessed", Integer, nullable=False, default=0),
    Column("disabled", Boolean, nullable=False, default=False),
    Column("remark", Text, nullable=False, default=""),
    Column("readme", Text, nullable=False, default=""),
    Column("header", Text, nullable=False, default=""),
    Column("order_by", String(16), nullable=False, default=""),
    Column("order_direction", String(16), nullable=False, default=""),
    Column("extract_folder", String(16), nullable=False, default=""),
    Column("allow_preview", Boolean, nullable=False, default=True),
    Column("allow_download", Boolean, nullable=False, default=True),
)

# An object parked while a replace or move runs (migration 0014), recorded before the
# step that parks it and removed when the operation ends: ``path`` is where it lies in
# storage ``storage_id``, ``home`` the name it must get back in that folder (empty: a
# folder that only held a copy), ``garbage`` whether it may go once ``home`` is taken
# (else it is the only copy of a user's data). ``owner`` (a task service's owner id)
# renews ``lease_until`` while the operation runs; a record nobody renews is recovered.
parkings = Table(
    "parkings",
    metadata,
    Column("id", String(32), primary_key=True),
    Column("storage_id", Integer, nullable=False),
    Column("path", Text, nullable=False),
    Column("home", Text, nullable=False),
    Column("garbage", Boolean, nullable=False),
    Column("owner", String(128), nullable=True, index=True),
    Column("lease_until", DateTime(timezone=True), nullable=True, index=True),
    Column("created", DateTime(timezone=True), nullable=False),
)

# Resumable multipart uploads of the API (OpenList's ``/api/fs/multipart/*``): one row
# per session, one per chunk received or being received (``done`` false, since
# ``started``). A chunk is its own row so that two instances receiving chunks of one
# session at once never lose each other's (no read-modify-write), and so that a chunk
# being received anywhere is known everywhere (the same one again answers 409, and its
# bytes count against the staging budget before they are all there).
# ``path`` is the path as the user sent it; ``hashes`` is JSON ({"md5": hex, ...}).
multipart_uploads = Table(
    "multipart_uploads",
    metadata,
    Column("id", String(32), primary_key=True),
    Column("user_id", Integer, nullable=False, index=True),
    Column("path", Text, nullable=False),
    Column("size", BigInteger, nullable=False),
    Column("chunk_size", BigInteger, nullable=False),
    Column("hashes", Text, nullable=False),
    Column("password", Text, nullable=False),
    Column("overwrite", Boolean, nullable=False),
    Column("modified", DateTime(timezone=True), nullable=True),
    Column("state", String(16), nullable=False),
    Column("staging", Text, nullable=False),
    Column("created", DateTime(timezone=True), nullable=False),
    Column("last_active", DateTime(timezone=True), nullable=False, index=True),
)

multipart_chunks = Table(
    "multipart_chunks",
    metadata,
    Column("upload_id", String(32), primary_key=True),
    Column("idx", Integer, primary_key=True),
    Column("size", BigInteger, nullable=False),
    Column("done", Boolean, nullable=False),
    Column("started", DateTime(timezone=True), nullable=False),
)
