"""The SQLite results store: one row per run, one row per known metric value.

WAL and IMMEDIATE write transactions let several controllers (the app, cron batches)
write one file at once: writers wait for each other instead of failing late.
Controller code: no torch, no textual.
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any, NamedTuple, Self

from tui.core import liveness, safefile
from tui.core.errors import StoreError
from tui.results.record import RunRecord

SCHEMA_VERSION = 10
BUSY_TIMEOUT_S = 60.0  # how long one controller waits for another's write
RESOLVE_SHOWN = 5  # an ambiguous run id: the matches named in the refusal

_RUNS = """CREATE TABLE runs (
    run_id         TEXT PRIMARY KEY,
    batch_id       TEXT,
    case_name      TEXT NOT NULL,
    vendor         TEXT NOT NULL,
    config         TEXT NOT NULL,
    chip           TEXT NOT NULL,
    nnodes         INTEGER NOT NULL,
    nproc_per_node INTEGER NOT NULL,
    hosts          TEXT NOT NULL,  -- JSON list
    status         TEXT NOT NULL CHECK (status IN
                       ('passed', 'failed', 'aborted', 'running', 'interrupted')),
    error          TEXT,
    started        TEXT NOT NULL,  -- ISO-8601 UTC, ...Z: sorts as text
    finished       TEXT,
    precision      TEXT,
    fix_hp         TEXT NOT NULL,  -- JSON object
    hp             TEXT NOT NULL DEFAULT '{}',  -- JSON object
    config_env     TEXT NOT NULL DEFAULT '{}',  -- JSON object: the config's env
    notes          TEXT NOT NULL,  -- JSON list
    environment    TEXT NOT NULL,  -- JSON object
    executor       TEXT,
    image          TEXT,
    slurm          TEXT NOT NULL DEFAULT 'null',  -- JSON object or null (executor slurm)
    load_per_cpu   REAL,
    synthetic_data INTEGER,  -- 1, 0, or NULL: not known
    smoke          INTEGER NOT NULL DEFAULT 0,  -- 1: a --smoke run (not judged)
    case_metrics   TEXT NOT NULL,  -- JSON list of metric definitions
    report_columns TEXT NOT NULL,  -- JSON list
    short_names    TEXT NOT NULL,  -- JSON object
    run_dir        TEXT,
    inventory      TEXT,
    controller     TEXT,
    cleaned        INTEGER NOT NULL DEFAULT 0,
    verdict        TEXT NOT NULL DEFAULT 'null',  -- JSON object or null (tui/results/references.py)
    peak           TEXT NOT NULL DEFAULT 'null',  -- JSON object or null: what MFU divides
    monitoring     TEXT NOT NULL DEFAULT 'null'  -- JSON object or null: energy, monitoring
)"""
_METRICS = """CREATE TABLE metrics (
    run_id TEXT NOT NULL REFERENCES runs (run_id) ON DELETE CASCADE,
    name   TEXT NOT NULL,
    value  REAL NOT NULL,
    PRIMARY KEY (run_id, name)
)"""
_INDEXES = (
    "CREATE INDEX IF NOT EXISTS runs_by_case ON runs (case_name, started)",
    "CREATE INDEX IF NOT EXISTS runs_by_batch ON runs (batch_id)",
    "CREATE INDEX IF NOT EXISTS runs_by_status ON runs (status)",
    "CREATE INDEX IF NOT EXISTS metrics_by_name ON metrics (name, run_id)",
)
# Version 1 columns (a v1 store is migrated on open).
_V1_COLUMNS = (
    "run_id, batch_id, case_name, vendor, config, chip, nnodes, nproc_per_node, hosts, "
    "status, error, started, finished, precision, fix_hp, report_columns, short_names, "
    "notes, run_dir"
)

# Record field -> column, where the name differs ("case" is an SQL keyword).
_COLUMN = {"case": "case_name", "columns": "report_columns"}
_RUN_FIELDS = tuple(name for name in RunRecord.model_fields if name != "metrics")
_JSON_FIELDS = (
    "hosts",
    "fix_hp",
    "hp",
    "config_env",
    "notes",
    "environment",
    "case_metrics",
    "columns",
    "short_names",
    "slurm",
    "verdict",
    "peak",
    "monitoring",
)
_COLUMNS = tuple(_COLUMN.get(f, f) for f in _RUN_FIELDS)
_UPSERT_RUN = (
    f"INSERT INTO runs ({', '.join(_COLUMNS)}) "
    f"VALUES ({', '.join(':' + c for c in _COLUMNS)}) "
    "ON CONFLICT (run_id) DO UPDATE SET " + ", ".join(f"{c} = excluded.{c}" for c in _COLUMNS[1:])
)


class MetricPoint(NamedTuple):
    """One known value of one metric in one run, for history views."""

    run_id: str
    case: str
    config: str
    status: str
    started: str
    value: float


class ResultStore:
    """Run records in one SQLite file, safe to share between threads and processes."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        safefile.make_dirs(self.path.parent)  # the results directory: 0700 when new
        with suppress(FileExistsError):  # 0600 before SQLite makes it (its -wal and -shm copy it)
            os.close(safefile.create(self.path))
        # One connection shared by engine threads; the lock serialises its use.
        self._lock = threading.Lock()
        self._conn = sqlite3.connect(
            self.path, timeout=BUSY_TIMEOUT_S, isolation_level=None, check_same_thread=False
        )
        self._conn.row_factory = sqlite3.Row
        try:
            self._use_wal()
            self._create_or_migrate()
            self._conn.execute("PRAGMA foreign_keys = ON")
        except sqlite3.DatabaseError as exc:
            self._conn.close()
            raise StoreError(f"{self.path}: not a usable results store ({exc})") from exc
        except BaseException:
            self._conn.close()
            raise

    def _use_wal(self) -> None:
        # Two controllers opening a new file at once both switch it to WAL; SQLite answers
        # one of them "database is locked" at once, without its busy wait (waiting could
        # deadlock there), so the wait is ours.
        deadline = time.monotonic() + BUSY_TIMEOUT_S
        while True:
            try:
                self._conn.execute("PRAGMA journal_mode = WAL")
                return
            except sqlite3.OperationalError as exc:
                if exc.sqlite_errorcode != sqlite3.SQLITE_BUSY or time.monotonic() > deadline:
                    raise
                time.sleep(0.01)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        with self._lock:
            self._conn.close()

    @contextmanager
    def _transaction(self, write: bool = True) -> Iterator[sqlite3.Connection]:
        # Writes: IMMEDIATE takes the write lock up front, so two writers wait for each
        # other instead of failing late. Reads: one snapshot, so a run and its metrics
        # come from the same commit.
        with self._lock:
            self._conn.execute("BEGIN IMMEDIATE" if write else "BEGIN")
            try:
                yield self._conn
                self._conn.execute("COMMIT")
            except BaseException:
                if self._conn.in_transaction:
                    self._conn.execute("ROLLBACK")
                raise

    def _create_or_migrate(self) -> None:
        # Foreign keys stay off here: rebuilding runs must not cascade into metrics.
        with self._transaction() as conn:
            version = conn.execute("PRAGMA user_version").fetchone()[0]
            if version > SCHEMA_VERSION:
                raise StoreError(
                    f"{self.path}: schema version {version} is newer than this fleetperf "
                    f"({SCHEMA_VERSION}); upgrade fleetperf"
                )
            if version == 0:
                conn.execute(_RUNS)
                conn.execute(_METRICS)
            elif version == 1:  # new columns, and a status check that knows 'running'
                conn.execute(_RUNS.replace("CREATE TABLE runs", "CREATE TABLE runs_new"))
                conn.execute(
                    f"INSERT INTO runs_new ({_V1_COLUMNS}, environment, case_metrics) "
                    f"SELECT {_V1_COLUMNS}, '{{}}', '[]' FROM runs"
                )
                conn.execute("DROP TABLE runs")
                conn.execute("ALTER TABLE runs_new RENAME TO runs")
            else:
                if version == 2:  # hp added; the raw load average became load per CPU
                    conn.execute("ALTER TABLE runs ADD COLUMN hp TEXT NOT NULL DEFAULT '{}'")
                    conn.execute("ALTER TABLE runs RENAME COLUMN load_avg TO load_per_cpu")
                    conn.execute("UPDATE runs SET load_per_cpu = NULL")
                if version <= 3:  # whether the data was synthetic
                    conn.execute("ALTER TABLE runs ADD COLUMN synthetic_data INTEGER")
                columns = {row[1] for row in conn.execute("PRAGMA table_info(runs)")}
                if version <= 4 and "slurm" not in columns:  # the Slurm job (executor slurm)
                    conn.execute("ALTER TABLE runs ADD COLUMN slurm TEXT NOT NULL DEFAULT 'null'")
                if version <= 5 and "verdict" not in columns:  # a passed run's verdict
                    conn.execute("ALTER TABLE runs ADD COLUMN verdict TEXT NOT NULL DEFAULT 'null'")
                if version <= 6 and "peak" not in columns:  # what MFU divides
                    conn.execute("ALTER TABLE runs ADD COLUMN peak TEXT NOT NULL DEFAULT 'null'")
                if version <= 7 and "config_env" not in columns:  # the config's env
                    conn.execute(
                        "ALTER TABLE runs ADD COLUMN config_env TEXT NOT NULL DEFAULT '{}'"
                    )
                if version <= 8 and "smoke" not in columns:  # --smoke runs
                    conn.execute("ALTER TABLE runs ADD COLUMN smoke INTEGER NOT NULL DEFAULT 0")
                if version <= 9 and "monitoring" not in columns:  # energy, monitoring
                    conn.execute(
                        "ALTER TABLE runs ADD COLUMN monitoring TEXT NOT NULL DEFAULT 'null'"
                    )
            for statement in _INDEXES:
                conn.execute(statement)
            conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")

    def add(self, record: RunRecord) -> None:
        """Insert, or replace the run with the same run_id (its metrics too), atomically.
        Only the controller that created a run replaces it: StoreError for another's."""
        metrics = [(record.run_id, k, v) for k, v in record.metrics.items() if v is not None]
        with self._transaction() as conn:
            row = conn.execute(
                "SELECT controller FROM runs WHERE run_id = ?", (record.run_id,)
            ).fetchone()
            if row is not None and row["controller"] != record.controller:
                raise StoreError(
                    f"{self.path}: run {record.run_id} belongs to another controller"
                    f" ({row['controller']}); not replaced"
                )
            conn.execute(_UPSERT_RUN, _run_row(record))
            conn.execute("DELETE FROM metrics WHERE run_id = ?", (record.run_id,))
            conn.executemany("INSERT INTO metrics (run_id, name, value) VALUES (?, ?, ?)", metrics)

    def get(self, run_id: str) -> RunRecord | None:
        with self._transaction(write=False) as conn:
            row = conn.execute("SELECT * FROM runs WHERE run_id = ?", (run_id,)).fetchone()
            return None if row is None else _read_record(conn, row)

    def list(
        self,
        case: str | None = None,
        limit: int | None = None,
        batch_id: str | None = None,
        status: str | None = None,
    ) -> list[RunRecord]:
        """Runs oldest first; with limit, the newest `limit` of them (still oldest first)."""
        if limit is not None and limit < 0:
            raise ValueError("limit must be >= 0")
        conditions, params = _filters(case=case, batch_id=batch_id, status=status)
        sql = f"SELECT * FROM runs r{_where(conditions)} ORDER BY started DESC, run_id DESC"
        if limit is not None:
            sql += " LIMIT ?"
            params.append(limit)
        with self._transaction(write=False) as conn:
            rows = conn.execute(sql, params).fetchall()
            return [_read_record(conn, row) for row in reversed(rows)]

    def resolve(self, text: str) -> str:
        """The run id ``text`` names: the whole id, a unique prefix of it, or a unique
        prefix of its random tail (the short form the tables show). StoreError naming the
        matches when several fit, or saying there is no such run."""
        with self._transaction(write=False) as conn:
            ids = [row[0] for row in conn.execute("SELECT run_id FROM runs ORDER BY run_id")]
        if text in ids:
            return text
        matches = [i for i in ids if text and (i.startswith(text) or _tail(i).startswith(text))]
        if len(matches) == 1:
            return matches[0]
        if not matches:
            raise StoreError(f"no run {text!r} in {self.path}")
        shown = ", ".join(matches[:RESOLVE_SHOWN])
        more = f" and {len(matches) - RESOLVE_SHOWN} more" if len(matches) > RESOLVE_SHOWN else ""
        raise StoreError(
            f"run {text!r} is ambiguous: {len(matches)} runs match ({shown}{more});"
            " give more of the id"
        )

    def interrupt(self, record: RunRecord, error: str) -> bool:
        """Mark a run 'interrupted' if it is still 'running' under the same controller."""
        with self._transaction() as conn:
            changed = conn.execute(
                "UPDATE runs SET status = 'interrupted', error = ? WHERE run_id = ?"
                " AND status = 'running' AND controller IS ?",
                (error, record.run_id, record.controller),
            )
            return changed.rowcount > 0

    def delete(self, run_id: str) -> bool:
        """Remove one run and its metrics; False if there was none."""
        with self._transaction() as conn:
            return conn.execute("DELETE FROM runs WHERE run_id = ?", (run_id,)).rowcount > 0

    def metric_history(
        self, metric: str, case: str | None = None, config: str | None = None
    ) -> list[MetricPoint]:
        """Known values of one metric across runs, oldest first (all statuses: filter them)."""
        conditions, params = _filters(case=case, config=config)
        sql = (
            "SELECT r.run_id, r.case_name, r.config, r.status, r.started, m.value "
            "FROM metrics m JOIN runs r USING (run_id)"
            f"{_where(['m.name = ?', *conditions])} ORDER BY r.started, r.run_id"
        )
        with self._transaction(write=False) as conn:
            rows = conn.execute(sql, [metric, *params]).fetchall()
        return [MetricPoint(*row) for row in rows]


def _read_record(conn: sqlite3.Connection, row: sqlite3.Row) -> RunRecord:
    metrics = conn.execute(
        "SELECT name, value FROM metrics WHERE run_id = ?", (row["run_id"],)
    ).fetchall()
    fields: dict[str, Any] = {}
    for name in _RUN_FIELDS:
        value = row[_COLUMN.get(name, name)]
        fields[name] = json.loads(value) if name in _JSON_FIELDS else value
    fields["cleaned"] = bool(fields["cleaned"])
    fields["smoke"] = bool(fields["smoke"])
    if fields["synthetic_data"] is not None:
        fields["synthetic_data"] = bool(fields["synthetic_data"])
    return RunRecord(**fields, metrics={name: value for name, value in metrics})


def _run_row(record: RunRecord) -> dict[str, Any]:
    data = record.model_dump(mode="json", exclude={"metrics"})
    return {
        _COLUMN.get(name, name): json.dumps(data[name], ensure_ascii=False)
        if name in _JSON_FIELDS
        else data[name]
        for name in _RUN_FIELDS
    }


def _tail(run_id: str) -> str:
    """The random tail of STAMP-CASE-TOKEN (new_run_id, tui/executors/base.py), which
    tables shorten."""
    return run_id.rsplit("-", 1)[-1]


def _filters(**equals: str | None) -> tuple[list[str], list[Any]]:
    """Conditions on runs (aliased r) for the filters that are set, and their parameters."""
    set_filters = {k: v for k, v in equals.items() if v is not None}
    return [f"r.{_COLUMN.get(k, k)} = ?" for k in set_filters], list(set_filters.values())


def _where(conditions: list[str]) -> str:
    return " WHERE " + " AND ".join(conditions) if conditions else ""


def controller_id() -> str:
    """Who runs a run: this controller's lease (tui/core/liveness.py), as records keep it."""
    return liveness.this_controller().text()


def mark_interrupted(store: ResultStore) -> list[RunRecord]:
    """Runs left 'running' by a controller that this one can prove gone -> 'interrupted'.
    (One it cannot judge, in another PID namespace or on another machine, stays running.)"""
    error = "the controller stopped while the run was running"
    marked = []
    for record in store.list(status="running"):
        if liveness.proven_dead(liveness.parse(record.controller)) and store.interrupt(
            record, error
        ):
            marked.append(record.model_copy(update={"status": "interrupted", "error": error}))
    return marked


def interrupted_line(record: RunRecord) -> str:
    """What to tell the operator about a run found interrupted."""
    return (
        f"fleetperf: run {record.run_id} ({record.case} {record.vendor}/{record.config} on"
        f" {', '.join(record.hosts)}) was interrupted: its controller stopped;"
        " `fleetperf cleanup` stops what is left on its hosts"
    )
