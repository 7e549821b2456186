"""Passkeys: WebAuthn credentials in a table of their own, and the challenges of
ceremonies in progress.

A credential belongs to one user and is found by the SHA-256 of its id. A challenge
is a row from the ceremony's start until it is finished once or expires, so any
instance may finish what another began.

Revision ID: 0009
Revises: 0008
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "passkeys",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("user_id", sa.Integer, nullable=False, index=True),
        sa.Column("credential_key", sa.String(64), nullable=False, unique=True),
        sa.Column("credential_id", sa.Text, nullable=False),
        sa.Column("public_key", sa.Text, nullable=False),
        sa.Column("sign_count", sa.BigInteger, nullable=False),
        sa.Column("aaguid", sa.String(36), nullable=False),
        sa.Column("transports", sa.Text, nullable=False),
        sa.Column("created", sa.Double, nullable=False),
        sa.Column("last_used", sa.Double, nullable=False),
    )
    op.create_table(
        "webauthn_challenges",
        sa.Column("session", sa.String(64), primary_key=True),
        sa.Column("purpose", sa.String(16), nullable=False),
        sa.Column("user_id", sa.Integer, nullable=False),
        sa.Column("challenge", sa.String(128), nullable=False),
        sa.Column("rp_id", sa.String(255), nullable=False),
        sa.Column("origin", sa.Text, nullable=False),
        sa.Column("expires", sa.Double, nullable=False, index=True),
    )


def downgrade() -> None:
    op.drop_table("webauthn_challenges")
    op.drop_table("passkeys")
