"""What the protocol servers share between instances: WebDAV locks and the S3
server's multipart uploads.

A WebDAV lock is a row until it is unlocked or its ``expires`` (seconds since the
epoch) passes. A multipart upload is a row naming the instance (``holder``) whose
disk keeps its parts.

Revision ID: 0008
Revises: 0007
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "dav_locks",
        sa.Column("token", sa.String(64), primary_key=True),
        sa.Column("path", sa.Text, nullable=False),
        sa.Column("infinite", sa.Boolean, nullable=False),
        sa.Column("exclusive", sa.Boolean, nullable=False),
        sa.Column("owner", sa.Text, nullable=False),
        sa.Column("timeout", sa.Integer, nullable=False),
        sa.Column("expires", sa.Double, nullable=False),
    )
    op.create_table(
        "s3_uploads",
        sa.Column("upload_id", sa.String(32), primary_key=True),
        sa.Column("bucket", sa.Text, nullable=False),
        sa.Column("key", sa.Text, nullable=False),
        sa.Column("initiated", sa.Double, nullable=False),
        sa.Column("holder", sa.String(191), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("s3_uploads")
    op.drop_table("dav_locks")
