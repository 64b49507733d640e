"""Alembic's environment for the results store: the store hands it the connection, inside
its own write transaction (tui/results/storedb.py _migrate); there is no alembic.ini."""

from alembic import context

context.configure(connection=context.config.attributes["connection"])
with context.begin_transaction():
    context.run_migrations()
