"""Schema 13: runs.points, a sweep's points (llm-serving: each load point's hp and
metrics, docs/cases/serving.md); null for every run before it.

Revision ID: v13
Revises: v12
"""

import sqlalchemy as sa
from alembic import op

revision = "v13"
down_revision = "v12"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("runs", sa.Column("points", sa.Text, nullable=False, server_default="null"))
