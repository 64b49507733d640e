"""Schema 14: runs.slurm becomes runs.executor_detail, what a run's kind of host records
of it in its own terms (a Slurm job's id, partition, nodes and state): one column for
every kind, not one per kind (issue 44). The values are kept.

Revision ID: v14
Revises: v13
"""

from alembic import op

revision = "v14"
down_revision = "v13"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # SQLite (3.25 and later) and PostgreSQL both rename a column in place.
    op.execute("ALTER TABLE runs RENAME COLUMN slurm TO executor_detail")
