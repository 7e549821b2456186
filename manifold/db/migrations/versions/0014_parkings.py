"""Objects parked by a replace or a move in progress (``parkings``), so that one a
killed process left under a hidden parking name is found and put back.

Revision ID: 0014
Revises: 0013
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "parkings",
        sa.Column("id", sa.String(32), primary_key=True),
        sa.Column("storage_id", sa.Integer, nullable=False),
        sa.Column("path", sa.Text, nullable=False),
        sa.Column("home", sa.Text, nullable=False),
        sa.Column("garbage", sa.Boolean, nullable=False),
        sa.Column("owner", sa.String(128), nullable=True),
        sa.Column("lease_until", sa.DateTime(timezone=True), nullable=True),
        sa.Column("created", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_index("ix_parkings_owner", "parkings", ["owner"])
    op.create_index("ix_parkings_lease_until", "parkings", ["lease_until"])


def downgrade() -> None:
    op.drop_index("ix_parkings_lease_until", "parkings")
    op.drop_index("ix_parkings_owner", "parkings")
    op.drop_table("parkings")
