"""Tasks and the search index.

Revision ID: 0002
Revises: 0001
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "tasks",
        sa.Column("id", sa.String(32), primary_key=True),
        sa.Column("kind", sa.String(32), nullable=False, index=True),
        sa.Column("name", sa.Text, nullable=False),
        sa.Column("creator", sa.String(255), nullable=False),
        sa.Column("creator_id", sa.Integer, nullable=False),
        sa.Column("creator_role", sa.Integer, nullable=False),
        sa.Column("state", sa.Integer, nullable=False),
        sa.Column("status", sa.Text, nullable=False),
        sa.Column("progress", sa.Float, nullable=False),
        sa.Column("total_bytes", sa.BigInteger, nullable=False),
        sa.Column("error", sa.Text, nullable=False),
        sa.Column("retry", sa.Integer, nullable=False),
        sa.Column("payload", sa.Text, nullable=False),
        sa.Column("created", sa.DateTime(timezone=True), nullable=False),
        sa.Column("start_time", sa.DateTime(timezone=True), nullable=True),
        sa.Column("end_time", sa.DateTime(timezone=True), nullable=True),
    )
    op.create_table(
        "search_nodes",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("parent", sa.String(768), nullable=False, index=True),
        sa.Column("name", sa.String(512), nullable=False),
        sa.Column("is_dir", sa.Boolean, nullable=False),
        sa.Column("size", sa.BigInteger, nullable=False),
    )


def downgrade() -> None:
    op.drop_table("search_nodes")
    op.drop_table("tasks")
