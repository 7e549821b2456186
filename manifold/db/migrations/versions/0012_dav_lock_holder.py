"""A WebDAV lock names the user who took it (``holder``, the user's id): only that
user may submit its token or see it.

The locks held before have no known holder and are ended: a lock lasts minutes to
hours, and a client whose lock is gone takes a new one, as after a restart of a
server that keeps its locks in memory.

Revision ID: 0012
Revises: 0011
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None


dav_locks = sa.table("dav_locks")


def upgrade() -> None:
    op.execute(dav_locks.delete())
    # The default only fills the (now empty) table's rows; every lock names its holder.
    op.add_column("dav_locks", sa.Column("holder", sa.Integer, nullable=False, server_default="0"))


def downgrade() -> None:
    with op.batch_alter_table("dav_locks") as batch:
        batch.drop_column("holder")
