"""Schema 12: runs.rank_times, base-interconnect all_reduce's own seconds per iteration of
each rank (fleetperf qualify's stragglers); null for every run before it.

Revision ID: v12
Revises: v11
"""

import sqlalchemy as sa
from alembic import op

revision = "v12"
down_revision = "v11"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("runs", sa.Column("rank_times", sa.Text, nullable=False, server_default="null"))
