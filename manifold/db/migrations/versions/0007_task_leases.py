"""Task owners and leases, so several instances share one task table.

An unfinished task is run by the instance named in ``owner`` until ``lease_until``;
the owner renews the lease by heartbeat, and another instance takes the task over
only once the lease has run out. ``cancel`` is a cancel asked on another instance.
Rows from before this revision have no owner: any instance may claim them.

Revision ID: 0007
Revises: 0006
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("tasks") as batch:
        batch.add_column(sa.Column("owner", sa.String(128), nullable=True))
        batch.add_column(sa.Column("lease_until", sa.DateTime(timezone=True), nullable=True))
        batch.add_column(sa.Column("heartbeat", sa.DateTime(timezone=True), nullable=True))
        batch.add_column(sa.Column("cancel", sa.Boolean, nullable=False, server_default=sa.false()))
    op.create_index("ix_tasks_claim", "tasks", ["state", "lease_until"])


def downgrade() -> None:
    op.drop_index("ix_tasks_claim", table_name="tasks")
    with op.batch_alter_table("tasks") as batch:
        batch.drop_column("cancel")
        batch.drop_column("heartbeat")
        batch.drop_column("lease_until")
        batch.drop_column("owner")
