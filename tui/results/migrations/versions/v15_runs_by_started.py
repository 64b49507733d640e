"""Schema 15: an index on runs (started, run_id), the order every listing reads the runs
in: the newest page of a store of 10,000 runs (the Results screen's first read, and the
Cases screen's newest run) no longer sorts them all (55 ms here). A store migrated by hand
from a legacy schema got every index of the runs table already: IF NOT EXISTS.

Revision ID: v15
Revises: v14
"""

from alembic import op

revision = "v15"
down_revision = "v14"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index("runs_by_started", "runs", ["started", "run_id"], if_not_exists=True)
