"""The results store's database: where it is (a SQLite file or a PostgreSQL URL), its
tables (SQLAlchemy Core), the engine with each backend's settings, and bringing a database
to this fleetperf's schema (Alembic; the hand migrations of SQLite stores before it).

docs/store.md says what each backend promises. Controller code: no torch, no textual.
"""

from __future__ import annotations

import os
import sqlite3
import time
from contextlib import suppress
from pathlib import Path
from typing import Any

import sqlalchemy as sa

from tui.core import safefile
from tui.core.errors import StoreError

# PRAGMA user_version of a SQLite store: 1..10 were the schemas earlier fleetperfs migrated
# by hand; 11 marks a store whose schema Alembic keeps (its alembic_version table), so that
# an earlier fleetperf refuses it as newer instead of misreading it.
SCHEMA_VERSION = 11
BASELINE = "v10"  # the Alembic revision that is schema 10 (migrations/versions/v10_baseline.py)
HEAD = "v15"  # the newest revision: a store at it opens without Alembic (a test checks it)
BUSY_TIMEOUT_S = 60.0  # how long one controller waits for another's write
CONNECT_TIMEOUT_S = 10  # an unreachable PostgreSQL: refused after this long
MIGRATIONS = Path(__file__).with_name("migrations")
# Two controllers bringing one new PostgreSQL store to the schema at once: one waits.
_PG_MIGRATION_LOCK = 0x666C7065  # "flpe", any constant all fleetperfs share

# Text PostgreSQL sorts byte-wise, as SQLite does ("C"): run ids and times order the same
# on both, whatever the database's locale.
_SORTED_TEXT = sa.Text().with_variant(sa.Text(collation="C"), "postgresql")

metadata = sa.MetaData()
# JSON fields are kept as JSON text on both backends (the store reads them whole).
runs = sa.Table(
    "runs",
    metadata,
    sa.Column("run_id", _SORTED_TEXT, primary_key=True),
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
    sa.Column("started", _SORTED_TEXT, nullable=False),  # ISO-8601 UTC, ...Z: sorts as text
    sa.Column("finished", _SORTED_TEXT),
    sa.Column("precision", sa.Text),
    sa.Column("fix_hp", sa.Text, nullable=False),
    sa.Column("hp", sa.Text, nullable=False, server_default="{}"),
    sa.Column("config_env", sa.Text, nullable=False, server_default="{}"),
    sa.Column("notes", sa.Text, nullable=False),
    sa.Column("environment", sa.Text, nullable=False),
    sa.Column("executor", sa.Text),
    sa.Column("image", sa.Text),
    sa.Column("executor_detail", sa.Text, nullable=False, server_default="null"),
    sa.Column("load_per_cpu", sa.Float),
    sa.Column("synthetic_data", sa.Integer),  # 1, 0, or NULL: not known
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
    sa.Column("rank_times", sa.Text, nullable=False, server_default="null"),
    sa.Column("points", sa.Text, nullable=False, server_default="null"),
    sa.CheckConstraint(
        "status IN ('passed', 'failed', 'aborted', 'running', 'interrupted')",
        name="runs_status",
    ),
    sa.Index("runs_by_case", "case_name", "started"),
    sa.Index("runs_by_started", "started", "run_id"),  # listings' order: newest first
    sa.Index("runs_by_batch", "batch_id"),
    sa.Index("runs_by_status", "status"),
)
metrics = sa.Table(
    "metrics",
    metadata,
    sa.Column(
        "run_id",
        _SORTED_TEXT,
        sa.ForeignKey("runs.run_id", ondelete="CASCADE"),
        primary_key=True,
    ),
    sa.Column("name", sa.Text, primary_key=True),
    sa.Column("value", sa.Float, nullable=False),
    sa.Index("metrics_by_name", "name", "run_id"),
)
# fleetperf qualify's verdicts (tui/qualify/keep.py): one row per qualification, host,
# device ('' for the host as a whole) and metric; the runs it judged share its batch ids.
qualifications = sa.Table(
    "qualifications",
    metadata,
    sa.Column("qualification_id", _SORTED_TEXT, primary_key=True),
    sa.Column("host", sa.Text, primary_key=True),
    sa.Column("device", sa.Text, primary_key=True),
    sa.Column("metric", sa.Text, primary_key=True),
    sa.Column("started", _SORTED_TEXT, nullable=False),  # ISO-8601 UTC: sorts as text
    sa.Column("grp", sa.Text, nullable=False),  # the inventory group qualified
    sa.Column("n", sa.Integer, nullable=False),
    sa.Column("median", sa.Float),
    sa.Column("lo", sa.Float),
    sa.Column("hi", sa.Float),
    sa.Column("peer_median", sa.Float),
    sa.Column("ratio", sa.Float),
    sa.Column("verdict", sa.Text, nullable=False),
    sa.Column("reason", sa.Text, nullable=False),
    sa.Column("batch_ids", sa.Text, nullable=False),  # JSON list: the runs' batches
    sa.Index("qualifications_by_host", "host", "started"),
)


class Target:
    """Where a store is: a SQLite file (a path or sqlite:///path) or a PostgreSQL URL
    (postgresql://, postgres:// or postgresql+psycopg://; psycopg 3 drives it).
    ``shown`` is the form every message uses: the password masked."""

    def __init__(self, where: str | Path) -> None:
        text = str(where)
        if isinstance(where, Path) or "://" not in text:
            self.url = sa.URL.create("sqlite", database=text)
        else:
            try:
                self.url = sa.make_url(text)
            except (sa.exc.ArgumentError, ValueError):  # ValueError: a port not a number
                raise StoreError(f"{_mask(text)}: not a store URL") from None
        scheme, _, driver = self.url.drivername.partition("+")
        if scheme in ("postgresql", "postgres") and driver in ("", "psycopg"):
            self.url = self.url.set(drivername="postgresql+psycopg")  # psycopg 3
        elif scheme != "sqlite" or driver:
            raise StoreError(
                f"{self.shown}: a store is a SQLite file (sqlite:///PATH) or PostgreSQL"
                " (postgresql://USER@HOST/DB)"
            )
        elif self.url.database in (None, "", ":memory:"):
            raise StoreError(f"{self.shown}: a SQLite store needs a file (sqlite:///PATH)")
        self.sqlite = scheme == "sqlite"

    @property
    def shown(self) -> str:
        if self.url.drivername == "sqlite" and self.url.database:
            return self.url.database
        return self.url.render_as_string(hide_password=True)

    @property
    def path(self) -> Path | None:
        """The SQLite file; None for PostgreSQL."""
        return Path(self.url.database) if self.sqlite and self.url.database else None


def _mask(text: str) -> str:
    """A URL that did not parse, its password (between ':' and '@' after '//') masked."""
    scheme, sep, rest = text.partition("://")
    userinfo, at, host = rest.rpartition("@")
    if not at or ":" not in userinfo:
        return text
    return f"{scheme}{sep}{userinfo.split(':', 1)[0]}:***@{host}"


def open_engine(target: Target) -> sa.Engine:
    """The engine for ``target``, its database reachable and at this fleetperf's schema;
    StoreError, one line naming the masked URL, when it is not."""
    if target.sqlite:
        engine = _sqlite_engine(target)
    else:
        engine = sa.create_engine(
            target.url,
            pool_pre_ping=True,  # a database restarted between two writes: reconnect
            connect_args={"connect_timeout": CONNECT_TIMEOUT_S, "application_name": "fleetperf"},
        )
    try:
        _migrate(engine, target)
    except sa.exc.DBAPIError as exc:
        engine.dispose()
        why = reason(exc, target)
        raise StoreError(f"{target.shown}: cannot open the results store ({why})") from None
    except BaseException:
        engine.dispose()
        raise
    return engine


def reason(exc: sa.exc.DBAPIError, target: Target) -> str:
    """The driver's own words, on one line, without SQLAlchemy's SQL and links, and
    without the password (a driver may echo its connection string)."""
    text = " ".join(str(exc.orig).split()) or type(exc.orig).__name__
    password = target.url.password
    return text.replace(str(password), "***") if password else text


def _sqlite_engine(target: Target) -> sa.Engine:
    path = target.path
    assert path is not None
    safefile.make_dirs(path.parent)  # the results directory: 0700 when new
    with suppress(FileExistsError):  # 0600 before SQLite makes it (its -wal and -shm copy it)
        os.close(safefile.create(path))
    engine = sa.create_engine(
        target.url,
        connect_args={"timeout": BUSY_TIMEOUT_S, "check_same_thread": False},
    )

    @sa.event.listens_for(engine, "connect")
    def _connect(dbapi: sqlite3.Connection, _record: Any) -> None:
        dbapi.isolation_level = None  # transactions are begun below, not by the driver
        _use_wal(dbapi)

    @sa.event.listens_for(engine, "begin")
    def _begin(conn: sa.Connection) -> None:
        # Writes: IMMEDIATE takes the write lock up front, so two writers wait for each
        # other instead of failing late. Foreign keys can only change outside a
        # transaction; the migrations keep them off (rebuilding runs must not cascade).
        options = conn.get_execution_options()
        keys = "OFF" if options.get("fleetperf_migrating") else "ON"
        conn.exec_driver_sql(f"PRAGMA foreign_keys = {keys}")
        conn.exec_driver_sql("BEGIN IMMEDIATE" if options.get("fleetperf_write") else "BEGIN")

    return engine


def _use_wal(dbapi: sqlite3.Connection) -> None:
    # Two controllers opening a new file at once both switch it to WAL; SQLite answers
    # one of them "database is locked" at once, without its busy wait (waiting could
    # deadlock there), so the wait is ours.
    deadline = time.monotonic() + BUSY_TIMEOUT_S
    while True:
        try:
            dbapi.execute("PRAGMA journal_mode = WAL")
            return
        except sqlite3.OperationalError as exc:
            if exc.sqlite_errorcode != sqlite3.SQLITE_BUSY or time.monotonic() > deadline:
                raise
            time.sleep(0.01)


def _migrate(engine: sa.Engine, target: Target) -> None:
    """Bring the database to the newest revision, in one write transaction."""
    with engine.connect() as conn:
        conn.execution_options(fleetperf_write=True, fleetperf_migrating=True)
        with conn.begin():
            if not target.sqlite:
                conn.execute(sa.select(sa.func.pg_advisory_xact_lock(_PG_MIGRATION_LOCK)))
            legacy = _legacy_version(conn, target) if target.sqlite else 0
            current = _revisions(conn)
            if legacy or current != {HEAD}:
                _upgrade(conn, target, current, legacy)
            if target.sqlite:
                conn.exec_driver_sql(f"PRAGMA user_version = {SCHEMA_VERSION}")


def _revisions(conn: sa.Connection) -> set[str]:
    """The revisions Alembic recorded in the database; none in a new one."""
    if not sa.inspect(conn).has_table("alembic_version"):
        return set()
    return set(conn.execute(sa.text("SELECT version_num FROM alembic_version")).scalars())


def _upgrade(conn: sa.Connection, target: Target, current: set[str], legacy: int) -> None:
    """Alembic's upgrade to the newest revision (after the hand migrations of a legacy
    store). Alembic is imported only here: most opens find the store up to date."""
    from alembic import command
    from alembic.config import Config
    from alembic.script import ScriptDirectory

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    config.attributes["connection"] = conn
    known = {revision.revision for revision in ScriptDirectory.from_config(config).walk_revisions()}
    if current - known:
        raise StoreError(
            f"{target.shown}: schema revision {', '.join(sorted(current - known))} is"
            " newer than this fleetperf's; upgrade fleetperf"
        )
    if legacy:
        _migrate_by_hand(conn, legacy)
        command.stamp(config, BASELINE, purge=True)
    command.upgrade(config, "head")


def _legacy_version(conn: sa.Connection, target: Target) -> int:
    """A SQLite store's hand-migrated schema version (1..10), 0 for a new store or one
    Alembic keeps; StoreError for one newer than this fleetperf."""
    version = conn.exec_driver_sql("PRAGMA user_version").scalar_one()
    if version > SCHEMA_VERSION:
        raise StoreError(
            f"{target.shown}: schema version {version} is newer than this fleetperf "
            f"({SCHEMA_VERSION}); upgrade fleetperf"
        )
    return 0 if version == SCHEMA_VERSION else version


# Columns of runs that revisions after the baseline add (v12: rank_times, v13: points),
# and rename (v14: slurm -> executor_detail), new name first.
_AFTER_BASELINE = ("rank_times", "points")
_RENAMED_AFTER_BASELINE = (("executor_detail", "slurm"),)
# Version 1 columns (a v1 store is rebuilt).
_V1_COLUMNS = (
    "run_id, batch_id, case_name, vendor, config, chip, nnodes, nproc_per_node, hosts, "
    "status, error, started, finished, precision, fix_hp, report_columns, short_names, "
    "notes, run_dir"
)


def _migrate_by_hand(conn: sa.Connection, version: int) -> None:
    """A SQLite store of schema 1..9 -> 10, as earlier fleetperfs did (then Alembic's
    baseline revision is stamped on it). Foreign keys are off: rebuilding runs must not
    cascade into metrics."""
    sql = conn.exec_driver_sql
    if version == 1:  # new columns, and a status check that knows 'running'
        new_runs = runs.to_metadata(sa.MetaData(), name="runs_new")
        sql(str(sa.schema.CreateTable(new_runs).compile(dialect=conn.dialect)))
        sql(
            f"INSERT INTO runs_new ({_V1_COLUMNS}, environment, case_metrics) "
            f"SELECT {_V1_COLUMNS}, '{{}}', '[]' FROM runs"
        )
        sql("DROP TABLE runs")
        sql("ALTER TABLE runs_new RENAME TO runs")
        for column in _AFTER_BASELINE:  # schema 10's runs: Alembic's revisions add these
            sql(f"ALTER TABLE runs DROP COLUMN {column}")
        for new, old in _RENAMED_AFTER_BASELINE:  # and rename these
            sql(f"ALTER TABLE runs RENAME COLUMN {new} TO {old}")
    else:
        if version == 2:  # hp added; the raw load average became load per CPU
            sql("ALTER TABLE runs ADD COLUMN hp TEXT NOT NULL DEFAULT '{}'")
            sql("ALTER TABLE runs RENAME COLUMN load_avg TO load_per_cpu")
            sql("UPDATE runs SET load_per_cpu = NULL")
        if version <= 3:  # whether the data was synthetic
            sql("ALTER TABLE runs ADD COLUMN synthetic_data INTEGER")
        columns = {row[1] for row in sql("PRAGMA table_info(runs)")}
        added = (  # (the version before it, column): stores at that version or older lack it
            (4, "slurm TEXT NOT NULL DEFAULT 'null'"),  # the Slurm job (executor slurm)
            (5, "verdict TEXT NOT NULL DEFAULT 'null'"),  # a passed run's verdict
            (6, "peak TEXT NOT NULL DEFAULT 'null'"),  # what MFU divides
            (7, "config_env TEXT NOT NULL DEFAULT '{}'"),  # the config's env
            (8, "smoke INTEGER NOT NULL DEFAULT 0"),  # --smoke runs
            (9, "monitoring TEXT NOT NULL DEFAULT 'null'"),  # energy, monitoring
        )
        for before, column in added:
            if version <= before and column.split()[0] not in columns:
                sql(f"ALTER TABLE runs ADD COLUMN {column}")
    for index in (*runs.indexes, *metrics.indexes):
        sql(str(sa.schema.CreateIndex(index, if_not_exists=True).compile(dialect=conn.dialect)))
