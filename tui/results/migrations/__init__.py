"""Alembic revisions of the results store (tui/results/storedb.py runs them)."""
