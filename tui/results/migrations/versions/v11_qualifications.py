"""Schema 11: the qualifications table, fleetperf qualify's verdicts per host, device and
metric (tui/qualify/keep.py); the runs stay in runs and metrics, by their batch ids.

Revision ID: v11
Revises: v10
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "v11"
down_revision = "v10"
branch_labels = None
depends_on = None

# Byte-wise order on PostgreSQL too, as SQLite sorts: ids and ISO times.
SORTED_TEXT = sa.Text().with_variant(postgresql.TEXT(collation="C"), "postgresql")


def upgrade() -> None:
    op.create_table(
        "qualifications",
        sa.Column("qualification_id", SORTED_TEXT, primary_key=True),
        sa.Column("host", sa.Text, primary_key=True),
        sa.Column("device", sa.Text, primary_key=True),
        sa.Column("metric", sa.Text, primary_key=True),
        sa.Column("started", SORTED_TEXT, nullable=False),
        sa.Column("grp", sa.Text, nullable=False),
        sa.Column("n", sa.Integer, nullable=False),
        sa.Column("median", sa.Float),
        sa.Column("lo", sa.Float),
        sa.Column("hi", sa.Float),
        sa.Column("peer_median", sa.Float),
        sa.Column("ratio", sa.Float),
        sa.Column("verdict", sa.Text, nullable=False),
        sa.Column("reason", sa.Text, nullable=False),
        sa.Column("batch_ids", sa.Text, nullable=False),
    )
    op.create_index("qualifications_by_host", "qualifications", ["host", "started"])
