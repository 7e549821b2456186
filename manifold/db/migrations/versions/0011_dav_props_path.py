"""An index on the paths of ``dav_props``: besides WebDAV's dead properties the table
holds the notes the S3 server keeps on objects (an ETag, metadata), one row for most
objects it writes, and every request for an object looks its path up.

MySQL indexes a text column by a prefix of it (the first 255 characters); the other
databases by the whole path.

Revision ID: 0011
Revises: 0010
"""

from __future__ import annotations

from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index("ix_dav_props_path", "dav_props", ["path"], mysql_length={"path": 255})


def downgrade() -> None:
    op.drop_index("ix_dav_props_path", "dav_props")
