"""Users, settings, metas, SSH keys, storages and revoked tokens.

Revision ID: 0001
Revises:
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "users",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("username", sa.String(255), nullable=False, unique=True),
        sa.Column("pwd_hash", sa.String(255), nullable=False),
        sa.Column("pwd_ts", sa.BigInteger, nullable=False),
        sa.Column("base_path", sa.Text, nullable=False),
        sa.Column("role", sa.Integer, nullable=False),
        sa.Column("disabled", sa.Boolean, nullable=False),
        sa.Column("permission", sa.Integer, nullable=False),
        sa.Column("otp_secret", sa.String(255), nullable=False),
        sa.Column("sso_id", sa.String(255), nullable=False),
    )
    op.create_table(
        "settings",
        sa.Column("key", sa.String(255), primary_key=True),
        sa.Column("value", sa.Text, nullable=False),
        sa.Column("help", sa.Text, nullable=False),
        sa.Column("type", sa.String(32), nullable=False),
        sa.Column("options", sa.Text, nullable=False),
        sa.Column("group", sa.Integer, nullable=False),
        sa.Column("flag", sa.Integer, nullable=False),
        sa.Column("index", sa.Integer, nullable=False),
    )
    op.create_table(
        "metas",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("path", sa.String(768), nullable=False, unique=True),
        sa.Column("password", sa.Text, nullable=False),
        sa.Column("p_sub", sa.Boolean, nullable=False),
        sa.Column("write", sa.Boolean, nullable=False),
        sa.Column("w_sub", sa.Boolean, nullable=False),
        sa.Column("hide", sa.Text, nullable=False),
        sa.Column("h_sub", sa.Boolean, nullable=False),
        sa.Column("readme", sa.Text, nullable=False),
        sa.Column("r_sub", sa.Boolean, nullable=False),
        sa.Column("header", sa.Text, nullable=False),
        sa.Column("header_sub", sa.Boolean, nullable=False),
    )
    op.create_table(
        "ssh_keys",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("user_id", sa.Integer, nullable=False, index=True),
        sa.Column("title", sa.String(255), nullable=False),
        sa.Column("fingerprint", sa.String(255), nullable=False),
        sa.Column("key_str", sa.Text, nullable=False),
        sa.Column("added_time", sa.DateTime(timezone=True), nullable=False),
        sa.Column("last_used_time", sa.DateTime(timezone=True), nullable=False),
        sa.UniqueConstraint("user_id", "title", name="uq_ssh_keys_user_title"),
    )
    op.create_table(
        "storages",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("mount_path", sa.String(768), nullable=False, unique=True),
        sa.Column("order", sa.Integer, nullable=False),
        sa.Column("driver", sa.String(64), nullable=False),
        sa.Column("cache_expiration", sa.Integer, nullable=False),
        sa.Column("status", sa.Text, nullable=False),
        sa.Column("addition", sa.Text, nullable=False),
        sa.Column("remark", sa.Text, nullable=False),
        sa.Column("modified", sa.DateTime(timezone=True), nullable=True),
        sa.Column("disabled", sa.Boolean, nullable=False),
        sa.Column("disable_index", sa.Boolean, nullable=False),
        sa.Column("enable_sign", sa.Boolean, nullable=False),
        sa.Column("order_by", sa.String(64), nullable=False),
        sa.Column("order_direction", sa.String(16), nullable=False),
        sa.Column("extract_folder", sa.String(16), nullable=False),
        sa.Column("web_proxy", sa.Boolean, nullable=False),
        sa.Column("webdav_policy", sa.String(32), nullable=False),
        sa.Column("proxy_range", sa.Boolean, nullable=False),
        sa.Column("down_proxy_url", sa.Text, nullable=False),
    )
    op.create_table(
        "revoked_tokens",
        sa.Column("jti", sa.String(64), primary_key=True),
        sa.Column("expires_at", sa.BigInteger, nullable=False, index=True),
    )
