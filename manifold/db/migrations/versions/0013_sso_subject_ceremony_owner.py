"""Who signs in: a single sign-on identity keyed by its issuer, single sign-on flows
used once, and passkey ceremonies counted per client.

* ``users.sso_issuer``: with ``sso_id`` it names an identity; for OpenID Connect
  they hold the provider's issuer and the account's ``sub`` (the name claim, which
  anyone may share, no longer keys anything). Bindings made before keep an empty
  issuer: an OIDC sign-in never matches them, and one whose name claim equals such
  an ``sso_id`` is refused until the account is connected again (see README).
* ``sso_flows``: the flows whose callback came back, until they would have expired,
  so that no instance accepts a flow twice.
* ``webauthn_challenges.owner``: the client address (or signed-in user) a ceremony
  counts against. Ceremonies in progress last minutes and are ended.

Revision ID: 0013
Revises: 0012
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None

challenges = sa.table("webauthn_challenges")


def upgrade() -> None:
    op.add_column(
        "users", sa.Column("sso_issuer", sa.String(255), nullable=False, server_default="")
    )
    op.create_table(
        "sso_flows",
        sa.Column("flow", sa.String(64), primary_key=True),
        sa.Column("expires", sa.BigInteger, nullable=False, index=True),
    )
    op.execute(challenges.delete())
    # The default only fills the (now empty) table's rows; every ceremony names its owner.
    op.add_column(
        "webauthn_challenges",
        sa.Column("owner", sa.String(80), nullable=False, server_default=""),
    )
    op.create_index("ix_webauthn_challenges_owner", "webauthn_challenges", ["owner"])


def downgrade() -> None:
    op.drop_index("ix_webauthn_challenges_owner", "webauthn_challenges")
    with op.batch_alter_table("webauthn_challenges") as batch:
        batch.drop_column("owner")
    op.drop_table("sso_flows")
    with op.batch_alter_table("users") as batch:
        batch.drop_column("sso_issuer")
