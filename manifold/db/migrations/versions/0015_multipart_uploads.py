"""Resumable multipart uploads of the API (``multipart_uploads``) and the chunks each
has received (``multipart_chunks``), so that a restart or another instance continues
them.

Revision ID: 0015
Revises: 0014
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "multipart_uploads",
        sa.Column("id", sa.String(32), primary_key=True),
        sa.Column("user_id", sa.Integer, nullable=False),
        sa.Column("path", sa.Text, nullable=False),
        sa.Column("size", sa.BigInteger, nullable=False),
        sa.Column("chunk_size", sa.BigInteger, nullable=False),
        sa.Column("hashes", sa.Text, nullable=False),
        sa.Column("password", sa.Text, nullable=False),
        sa.Column("overwrite", sa.Boolean, nullable=False),
        sa.Column("modified", sa.DateTime(timezone=True), nullable=True),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("staging", sa.Text, nullable=False),
        sa.Column("created", sa.DateTime(timezone=True), nullable=False),
        sa.Column("last_active", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_index("ix_multipart_uploads_user_id", "multipart_uploads", ["user_id"])
    op.create_index("ix_multipart_uploads_last_active", "multipart_uploads", ["last_active"])
    op.create_table(
        "multipart_chunks",
        sa.Column("upload_id", sa.String(32), primary_key=True),
        sa.Column("idx", sa.Integer, primary_key=True),
        sa.Column("size", sa.BigInteger, nullable=False),
        sa.Column("done", sa.Boolean, nullable=False),
        sa.Column("started", sa.DateTime(timezone=True), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("multipart_chunks")
    op.drop_index("ix_multipart_uploads_last_active", "multipart_uploads")
    op.drop_index("ix_multipart_uploads_user_id", "multipart_uploads")
    op.drop_table("multipart_uploads")
