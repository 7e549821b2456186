"""Which part store holds a multipart upload's chunks (``store``): the staging folder,
or the destination storage's own multipart upload, whose token is then ``staging``.

Revision ID: 0016
Revises: 0015
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0016"
down_revision = "0015"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column(
        "multipart_uploads",
        sa.Column("store", sa.String(16), nullable=False, server_default="staging"),
    )


def downgrade() -> None:
    with op.batch_alter_table("multipart_uploads") as batch:
        batch.drop_column("store")
