"""Each user's token generation, the random value login tokens are bound to.

Existing users get a random generation each, so tokens issued before this revision
(bound to the name and the password timestamp only) are refused from now on.

Revision ID: 0004
Revises: 0003
"""

from __future__ import annotations

import secrets

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None

users = sa.table("users", sa.column("id", sa.Integer), sa.column("token_gen", sa.String))


def upgrade() -> None:
    op.add_column("users", sa.Column("token_gen", sa.String(32), nullable=False, server_default=""))
    bind = op.get_bind()
    for user_id in bind.execute(sa.select(users.c.id)).scalars().all():
        update = users.update().where(users.c.id == user_id)
        bind.execute(update.values(token_gen=secrets.token_hex(16)))
    # Every new user is given a generation by the application; none may be left empty.
    with op.batch_alter_table("users") as batch:
        batch.alter_column(
            "token_gen",
            existing_type=sa.String(32),
            existing_nullable=False,
            server_default=None,
        )


def downgrade() -> None:
    with op.batch_alter_table("users") as batch:
        batch.drop_column("token_gen")
