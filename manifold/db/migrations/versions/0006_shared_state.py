"""Stands for the shared state's revision (issue 22, part A), which 0007 follows.

The merge keeps part A's ``0006`` in place of this one.

Revision ID: 0006
Revises: 0005
"""

from __future__ import annotations

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    pass


def downgrade() -> None:
    pass
