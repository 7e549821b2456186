"""What several processes on one database share: the change bus, leases, login failures.

Revision ID: 0006
Revises: 0005
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "changes",
        sa.Column(
            "id",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            primary_key=True,
            autoincrement=True,
        ),
        sa.Column("created", sa.Double, nullable=False),
        sa.Column("origin", sa.String(64), nullable=False),
        sa.Column("topic", sa.String(64), nullable=False),
        sa.Column("data", sa.Text, nullable=False),
    )
    op.create_table(
        "leases",
        sa.Column("name", sa.String(191), primary_key=True),
        sa.Column("owner", sa.String(64), nullable=False),
        sa.Column("expires", sa.Double, nullable=False),
    )
    op.create_table(
        "login_failures",
        sa.Column("pair", sa.String(64), primary_key=True),
        sa.Column("bucket", sa.String(64), nullable=False),
        sa.Column("other", sa.Text, nullable=False),
        sa.Column("count", sa.Integer, nullable=False),
        sa.Column("last", sa.Double, nullable=False),
    )
    op.create_index("ix_login_failures_bucket", "login_failures", ["bucket"])


def downgrade() -> None:
    op.drop_index("ix_login_failures_bucket", "login_failures")
    op.drop_table("login_failures")
    op.drop_table("leases")
    op.drop_table("changes")
