"""Share links: one row per share, its files as a JSON list of full virtual paths.

Revision ID: 0010
Revises: 0009
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "shares",
        sa.Column("id", sa.String(64), primary_key=True),
        sa.Column("files", sa.Text, nullable=False),
        sa.Column("creator_id", sa.Integer, nullable=False, index=True),
        sa.Column("expires", sa.Double, nullable=True),
        sa.Column("pwd", sa.Text, nullable=False),
        sa.Column("accessed", sa.Integer, nullable=False),
        sa.Column("max_accessed", sa.Integer, nullable=False),
        sa.Column("disabled", sa.Boolean, nullable=False),
        sa.Column("remark", sa.Text, nullable=False),
        sa.Column("readme", sa.Text, nullable=False),
        sa.Column("header", sa.Text, nullable=False),
        sa.Column("order_by", sa.String(16), nullable=False),
        sa.Column("order_direction", sa.String(16), nullable=False),
        sa.Column("extract_folder", sa.String(16), nullable=False),
        sa.Column("allow_preview", sa.Boolean, nullable=False),
        sa.Column("allow_download", sa.Boolean, nullable=False),
    )


def downgrade() -> None:
    op.drop_table("shares")
