"""Schema 10: runs and metrics as fleetperf's hand migrations left them (PRAGMA
user_version 10). A new store is made by this revision; an older SQLite store is migrated
by hand to 10 and then stamped with it (tui/results/storedb.py). The tables are written
out here, not imported from storedb: a revision stays what it was when the tables change.

Revision ID: v10
Revises:
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "v10"
down_revision = None
branch_labels = None
depends_on = None

# Byte-wise order on PostgreSQL too, as SQLite sorts: run ids and ISO times.
SORTED_TEXT = sa.Text().with_variant(postgresql.TEXT(collation="C"), "postgresql")


def upgrade() -> None:
    op.create_table(
        "runs",
        sa.Column("run_id", SORTED_TEXT, primary_key=True),
        sa.Column("batch_id", sa.Text),
        sa.Column("case_name", sa.Text, nullable=False),
        sa.Column("vendor", sa.Text, nullable=False),
        sa.Column("config", sa.Text, nullable=False),
        sa.Column("chip", sa.Text, nullable=False),
        sa.Column("nnodes", sa.Integer, nullable=False),
        sa.Column("nproc_per_node", sa.Integer, nullable=False),
        sa.Column("hosts", sa.Text, nullable=False),
        sa.Column("status", sa.Text, nullable=False),
        sa.Column("error", sa.Text),
        sa.Column("started", SORTED_TEXT, nullable=False),
        sa.Column("finished", SORTED_TEXT),
        sa.Column("precision", sa.Text),
        sa.Column("fix_hp", sa.Text, nullable=False),
        sa.Column("hp", sa.Text, nullable=False, server_default="{}"),
        sa.Column("config_env", sa.Text, nullable=False, server_default="{}"),
        sa.Column("notes", sa.Text, nullable=False),
        sa.Column("environment", sa.Text, nullable=False),
        sa.Column("executor", sa.Text),
        sa.Column("image", sa.Text),
        sa.Column("slurm", sa.Text, nullable=False, server_default="null"),
        sa.Column("load_per_cpu", sa.Float),
        sa.Column("synthetic_data", sa.Integer),
        sa.Column("smoke", sa.Integer, nullable=False, server_default="0"),
        sa.Column("case_metrics", sa.Text, nullable=False),
        sa.Column("report_columns", sa.Text, nullable=False),
        sa.Column("short_names", sa.Text, nullable=False),
        sa.Column("run_dir", sa.Text),
        sa.Column("inventory", sa.Text),
        sa.Column("controller", sa.Text),
        sa.Column("cleaned", sa.Integer, nullable=False, server_default="0"),
        sa.Column("verdict", sa.Text, nullable=False, server_default="null"),
        sa.Column("peak", sa.Text, nullable=False, server_default="null"),
        sa.Column("monitoring", sa.Text, nullable=False, server_default="null"),
        sa.CheckConstraint(
            "status IN ('passed', 'failed', 'aborted', 'running', 'interrupted')",
            name="runs_status",
        ),
    )
    op.create_table(
        "metrics",
        sa.Column(
            "run_id",
            SORTED_TEXT,
            sa.ForeignKey("runs.run_id", ondelete="CASCADE"),
            primary_key=True,
        ),
        sa.Column("name", sa.Text, primary_key=True),
        sa.Column("value", sa.Float, nullable=False),
    )
    op.create_index("runs_by_case", "runs", ["case_name", "started"])
    op.create_index("runs_by_batch", "runs", ["batch_id"])
    op.create_index("runs_by_status", "runs", ["status"])
    op.create_index("metrics_by_name", "metrics", ["name", "run_id"])
