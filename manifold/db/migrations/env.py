"""Alembic environment: migrations always run on a connection handed over by the server."""

from __future__ import annotations

from alembic import context

from manifold.db.tables import metadata

connection = context.config.attributes["connection"]
context.configure(connection=connection, target_metadata=metadata, render_as_batch=True)
with context.begin_transaction():
    context.run_migrations()
