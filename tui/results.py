"""Run records, the SQLite results store with history, and the result tables.

The JSON form of a record is DESIGN's "Result record"; markdown reproduces the seeds'
"性能指标" tables (FlagPerf case pages); CSV is one flat row per run for spreadsheets.
Controller code: no torch, no textual.
"""

from __future__ import annotations

import csv
import io
import json
import math
import re
import sqlite3
import threading
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal, NamedTuple, Self

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

__all__ = [
    "FORMATS",
    "INFER_COLUMNS",
    "METRIC_KEYS",
    "RECORD_KEYS",
    "SCHEMA_VERSION",
    "TOKENS_HEADER",
    "TRAIN_COLUMNS",
    "MetricPoint",
    "ResultStore",
    "RunRecord",
    "StoreError",
    "config_label",
    "format_fix_hp",
    "now_utc_iso",
    "render",
    "to_csv",
    "to_json",
    "to_markdown",
]

Status = Literal["passed", "failed", "aborted"]

TRAIN_METRICS = (
    "e2e_time",
    "p_whole",
    "p_train",
    "p_core",
    "tokens_per_s_per_device",
    "mfu",
    "acc",
    "loss",
    "mem_used_gib",
    "mem_total_gib",
)
INFER_METRICS = ("p_val_whole", "p_val_core", "p_infer_whole", "p_infer_core")
# Every record carries all of them (null where not applicable), so JSON/CSV have one shape.
METRIC_KEYS = TRAIN_METRICS + INFER_METRICS

# DESIGN "Result record", in order: exactly what to_json_dict() shows.
RECORD_KEYS = (
    "run_id",
    "case",
    "vendor",
    "config",
    "hosts",
    "status",
    "error",
    "started",
    "finished",
    "precision",
    "fix_hp",
    "metrics",
    "notes",  # beyond DESIGN's list: the workload's own words, e.g. why p_core < p_train
)

# Seed 000/001 (training) and seed 002 (inference) layouts: used when a record names none.
TRAIN_COLUMNS = ("precision", "fix_hp", "e2e_time", "p_whole", "p_train", "p_core", "acc", "mem")
INFER_COLUMNS = (
    "precision",
    "e2e_time",
    "p_val_whole",
    "p_val_core",
    "p_infer_whole",
    "p_infer_core",
    "mfu",
    "loss",
    "mem",
)

# Seed 003 writes "token/p/s", seed 004 and DESIGN's metric table "tokens/p/s": we follow
# DESIGN (normative) and accept both spellings in a case's report list.
TOKENS_HEADER = "tokens/p/s"
_HEADERS = {"tokens_per_s_per_device": TOKENS_HEADER, "mfu": "MFU"}
_COLUMN_ALIASES = {
    "token/p/s": "tokens_per_s_per_device",
    "tokens/p/s": "tokens_per_s_per_device",
    "MFU": "mfu",
}
_TABLE_ONLY_COLUMNS = ("precision", "fix_hp", "mem")
# "acc(MMLU)" (seed 003): a known column with a qualifier, shown verbatim as the header.
_QUALIFIED = re.compile(r"^(?P<key>[^()]+)\((?P<qualifier>[^()]+)\)$")
_CONFIG = re.compile(r"^(?P<chip>.+)x(?P<nnodes>\d+)x(?P<nproc>\d+)$")


def now_utc_iso() -> str:
    """The current time in the records' timestamp form, e.g. 2026-11-21T19:30:00Z."""
    return _utc_iso(datetime.now(UTC))


def _utc_iso(value: str | datetime) -> str:
    """Normalise to UTC at whole seconds with a Z suffix: one fixed-width form sorts right."""
    dt = value if isinstance(value, datetime) else datetime.fromisoformat(value)
    if dt.tzinfo is None:
        raise ValueError(f"timestamp {value!s} has no UTC offset (write it as ...Z)")
    return dt.astimezone(UTC).replace(tzinfo=None, microsecond=0).isoformat() + "Z"


def _column_key(spec: str) -> str:
    """The metric/table key a report column names; ValueError for an unknown one."""
    match = _QUALIFIED.match(spec)
    key = match.group("key") if match else spec
    key = _COLUMN_ALIASES.get(key, key)
    if key not in METRIC_KEYS and key not in _TABLE_ONLY_COLUMNS:
        known = ", ".join((*_TABLE_ONLY_COLUMNS, *METRIC_KEYS, *_COLUMN_ALIASES))
        raise ValueError(f"unknown report column {spec!r} (known: {known})")
    return key


def _canonical_column(spec: str) -> str:
    # Plain aliases collapse to the key so records of one case merge into one column.
    key = _column_key(spec)
    return spec if _QUALIFIED.match(spec) else key


class RunRecord(BaseModel):
    """One case run: the DESIGN result record plus what the tables need to render it."""

    model_config = ConfigDict(extra="forbid")

    # DESIGN "Result record" (RECORD_KEYS).
    run_id: str = Field(min_length=1)
    case: str = Field(min_length=1)
    vendor: str = Field(min_length=1)
    config: str = Field(min_length=1)
    hosts: list[str] = Field(default_factory=list)
    status: Status
    error: str | None = None
    started: str
    finished: str
    precision: str | None = None
    fix_hp: dict[str, Any] = Field(default_factory=dict)
    metrics: dict[str, float | None] = Field(default_factory=dict)
    notes: list[str] = Field(default_factory=list)

    # For the tables and the store only; not part of the JSON record.
    columns: list[str] = Field(default_factory=list)
    short_names: dict[str, str] = Field(default_factory=dict)
    chip: str = ""
    nnodes: int | None = Field(default=None, ge=1)
    nproc_per_node: int | None = Field(default=None, ge=1)
    run_dir: str | None = None
    batch_id: str | None = None

    @field_validator("started", "finished", mode="before")
    @classmethod
    def _timestamp(cls, value: Any) -> Any:
        return _utc_iso(value) if isinstance(value, str | datetime) else value

    @field_validator("error")
    @classmethod
    def _one_line(cls, value: str | None) -> str | None:
        # DESIGN wants one line; joining keeps every part of a multi-line message.
        if value is None:
            return None
        lines = [line.strip() for line in value.splitlines() if line.strip()]
        return "; ".join(lines) or None

    @field_validator("fix_hp")
    @classmethod
    def _json_values(cls, value: dict[str, Any]) -> dict[str, Any]:
        try:
            json.dumps(value, allow_nan=False)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"fix_hp must hold plain JSON values: {exc}") from exc
        return value

    @field_validator("metrics")
    @classmethod
    def _all_metric_keys(cls, value: dict[str, float | None]) -> dict[str, float | None]:
        unknown = sorted(set(value) - set(METRIC_KEYS))
        if unknown:
            raise ValueError(f"unknown metrics {unknown} (known: {', '.join(METRIC_KEYS)})")
        # JSON has no NaN/inf: a diverged value is stored as unknown; status/error say why.
        return {
            key: v if v is not None and math.isfinite(v) else None
            for key in METRIC_KEYS
            for v in [value.get(key)]
        }

    @field_validator("columns")
    @classmethod
    def _known_columns(cls, value: list[str]) -> list[str]:
        return [_canonical_column(spec) for spec in value]

    @model_validator(mode="after")
    def _derive(self) -> Self:
        self._fill_from_config()
        if not self.columns:
            inference = any(self.metrics[key] is not None for key in INFER_METRICS)
            self.columns = list(INFER_COLUMNS if inference else TRAIN_COLUMNS)
        return self

    def _fill_from_config(self) -> None:
        """chip/nnodes/nproc_per_node default from config "CHIPxNNODESxNPROC"; must agree."""
        match = _CONFIG.match(self.config)
        if match is None:
            if not self.chip or self.nnodes is None or self.nproc_per_node is None:
                raise ValueError(
                    f"config {self.config!r} is not CHIPxNNODESxNPROC: "
                    "give chip, nnodes and nproc_per_node"
                )
            return
        parsed = (match["chip"], int(match["nnodes"]), int(match["nproc"]))
        given = (self.chip or parsed[0], self.nnodes or parsed[1], self.nproc_per_node or parsed[2])
        if given != parsed:
            raise ValueError(f"config {self.config!r} disagrees with chip/nnodes/nproc {given}")
        self.chip, self.nnodes, self.nproc_per_node = parsed

    def to_json_dict(self) -> dict[str, Any]:
        """The DESIGN result record: exactly RECORD_KEYS, in that order."""
        return self.model_dump(mode="json", include=set(RECORD_KEYS))


# ---------------------------------------------------------------------------------------
# SQLite store

SCHEMA_VERSION = 1

_SCHEMA_V1 = (
    """CREATE TABLE runs (
        run_id         TEXT PRIMARY KEY,
        batch_id       TEXT,
        case_name      TEXT NOT NULL,
        vendor         TEXT NOT NULL,
        config         TEXT NOT NULL,
        chip           TEXT NOT NULL,
        nnodes         INTEGER NOT NULL,
        nproc_per_node INTEGER NOT NULL,
        hosts          TEXT NOT NULL,  -- JSON list
        status         TEXT NOT NULL CHECK (status IN ('passed', 'failed', 'aborted')),
        error          TEXT,
        started        TEXT NOT NULL,  -- ISO-8601 UTC, ...Z: sorts as text
        finished       TEXT NOT NULL,
        precision      TEXT,
        fix_hp         TEXT NOT NULL,  -- JSON object
        report_columns TEXT NOT NULL,  -- JSON list
        short_names    TEXT NOT NULL,  -- JSON object
        notes          TEXT NOT NULL,  -- JSON list
        run_dir        TEXT
    )""",
    # Only known values get a row: history per metric needs no NULL filtering.
    """CREATE TABLE metrics (
        run_id TEXT NOT NULL REFERENCES runs (run_id) ON DELETE CASCADE,
        name   TEXT NOT NULL,
        value  REAL NOT NULL,
        PRIMARY KEY (run_id, name)
    )""",
    "CREATE INDEX runs_by_case ON runs (case_name, started)",
    "CREATE INDEX runs_by_batch ON runs (batch_id)",
    "CREATE INDEX metrics_by_name ON metrics (name, run_id)",
)

_RUN_FIELDS = (
    "run_id",
    "batch_id",
    "case_name",
    "vendor",
    "config",
    "chip",
    "nnodes",
    "nproc_per_node",
    "hosts",
    "status",
    "error",
    "started",
    "finished",
    "precision",
    "fix_hp",
    "report_columns",
    "short_names",
    "notes",
    "run_dir",
)
_UPSERT_RUN = (
    f"INSERT INTO runs ({', '.join(_RUN_FIELDS)}) "
    f"VALUES ({', '.join(':' + f for f in _RUN_FIELDS)}) "
    "ON CONFLICT (run_id) DO UPDATE SET "
    + ", ".join(f"{f} = excluded.{f}" for f in _RUN_FIELDS[1:])
)


class StoreError(Exception):
    """The results file cannot be used (not a store, or written by a newer fleetperf)."""


class MetricPoint(NamedTuple):
    """One known value of one metric in one run, for history views."""

    run_id: str
    case: str
    config: str
    status: str
    started: str
    value: float


class ResultStore:
    """Run records in one SQLite file (WAL, so the TUI can read while a cron batch writes)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        # One connection shared by TUI worker threads; the lock serialises its use.
        self._lock = threading.Lock()
        self._conn = sqlite3.connect(
            self.path, timeout=30.0, isolation_level=None, check_same_thread=False
        )
        self._conn.row_factory = sqlite3.Row
        try:
            self._conn.execute("PRAGMA journal_mode = WAL")
            self._conn.execute("PRAGMA foreign_keys = ON")
            self._create_or_check_schema()
        except sqlite3.DatabaseError as exc:
            self._conn.close()
            raise StoreError(f"{self.path}: not a usable results store ({exc})") from exc
        except BaseException:
            self._conn.close()
            raise

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        with self._lock:
            self._conn.close()

    @contextmanager
    def _transaction(self, write: bool = True) -> Iterator[sqlite3.Connection]:
        # Writes: IMMEDIATE takes the write lock up front, so two writers (TUI and a cron
        # batch) wait for each other instead of failing late. Reads: one snapshot, so a run
        # and its metrics come from the same commit.
        with self._lock:
            self._conn.execute("BEGIN IMMEDIATE" if write else "BEGIN")
            try:
                yield self._conn
                self._conn.execute("COMMIT")
            except BaseException:
                if self._conn.in_transaction:
                    self._conn.execute("ROLLBACK")
                raise

    def _create_or_check_schema(self) -> None:
        with self._transaction() as conn:
            version = conn.execute("PRAGMA user_version").fetchone()[0]
            if version > SCHEMA_VERSION:
                raise StoreError(
                    f"{self.path}: schema version {version} is newer than this fleetperf "
                    f"({SCHEMA_VERSION}); upgrade fleetperf"
                )
            if version == 0:
                for statement in _SCHEMA_V1:
                    conn.execute(statement)
                conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")

    def add(self, record: RunRecord) -> None:
        """Insert, or replace the run with the same run_id (its metrics too), atomically."""
        metrics = [(record.run_id, k, v) for k, v in record.metrics.items() if v is not None]
        with self._transaction() as conn:
            conn.execute(_UPSERT_RUN, _run_row(record))
            conn.execute("DELETE FROM metrics WHERE run_id = ?", (record.run_id,))
            conn.executemany("INSERT INTO metrics (run_id, name, value) VALUES (?, ?, ?)", metrics)

    def get(self, run_id: str) -> RunRecord | None:
        with self._transaction(write=False) as conn:
            row = conn.execute("SELECT * FROM runs WHERE run_id = ?", (run_id,)).fetchone()
            return None if row is None else _read_record(conn, row)

    def list(
        self, case: str | None = None, limit: int | None = None, batch_id: str | None = None
    ) -> list[RunRecord]:
        """Runs oldest first; with limit, the newest `limit` of them (still oldest first)."""
        if limit is not None and limit < 0:
            raise ValueError("limit must be >= 0")
        conditions, params = _filters(case=case, batch_id=batch_id)
        sql = f"SELECT * FROM runs r{_where(conditions)} ORDER BY started DESC, run_id DESC"
        if limit is not None:
            sql += " LIMIT ?"
            params.append(limit)
        with self._transaction(write=False) as conn:
            rows = conn.execute(sql, params).fetchall()
            return [_read_record(conn, row) for row in reversed(rows)]

    def metric_history(
        self, metric: str, case: str | None = None, config: str | None = None
    ) -> list[MetricPoint]:
        """Known values of one metric across runs, oldest first (all statuses: filter them)."""
        if metric not in METRIC_KEYS:
            raise ValueError(f"unknown metric {metric!r}")
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
    return RunRecord(
        run_id=row["run_id"],
        case=row["case_name"],
        vendor=row["vendor"],
        config=row["config"],
        hosts=json.loads(row["hosts"]),
        status=row["status"],
        error=row["error"],
        started=row["started"],
        finished=row["finished"],
        precision=row["precision"],
        fix_hp=json.loads(row["fix_hp"]),
        metrics={name: value for name, value in metrics},
        columns=json.loads(row["report_columns"]),
        short_names=json.loads(row["short_names"]),
        notes=json.loads(row["notes"]),
        chip=row["chip"],
        nnodes=row["nnodes"],
        nproc_per_node=row["nproc_per_node"],
        run_dir=row["run_dir"],
        batch_id=row["batch_id"],
    )


def _run_row(record: RunRecord) -> dict[str, Any]:
    return {
        "run_id": record.run_id,
        "batch_id": record.batch_id,
        "case_name": record.case,
        "vendor": record.vendor,
        "config": record.config,
        "chip": record.chip,
        "nnodes": record.nnodes,
        "nproc_per_node": record.nproc_per_node,
        "hosts": json.dumps(record.hosts),
        "status": record.status,
        "error": record.error,
        "started": record.started,
        "finished": record.finished,
        "precision": record.precision,
        "fix_hp": json.dumps(record.fix_hp, ensure_ascii=False),
        "report_columns": json.dumps(record.columns, ensure_ascii=False),
        "short_names": json.dumps(record.short_names, ensure_ascii=False),
        "notes": json.dumps(record.notes, ensure_ascii=False),
        "run_dir": record.run_dir,
    }


def _filters(**equals: str | None) -> tuple[list[str], list[Any]]:
    """Conditions on runs (aliased r) for the filters that are set, and their parameters."""
    set_filters = {k: v for k, v in equals.items() if v is not None}
    names = {"case": "case_name"}
    return [f"r.{names.get(k, k)} = ?" for k in set_filters], list(set_filters.values())


def _where(conditions: list[str]) -> str:
    return " WHERE " + " AND ".join(conditions) if conditions else ""


# ---------------------------------------------------------------------------------------
# Renderers (pure)


def to_json(records: Iterable[RunRecord]) -> str:
    """A JSON list of DESIGN result records."""
    return json.dumps([r.to_json_dict() for r in records], indent=2, ensure_ascii=False)


def to_csv(records: Iterable[RunRecord]) -> str:
    """One row per run; fix_hp as a JSON object, metrics at full precision, empty if unknown."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(
        ["run_id", "case", "vendor", "config", "status", "precision", "fix_hp", *METRIC_KEYS]
    )
    for r in records:
        writer.writerow(
            [
                r.run_id,
                r.case,
                r.vendor,
                r.config,
                r.status,
                r.precision or "",
                json.dumps(r.fix_hp, ensure_ascii=False),
                *("" if r.metrics[k] is None else repr(r.metrics[k]) for k in METRIC_KEYS),
            ]
        )
    return out.getvalue()


def to_markdown(records: Iterable[RunRecord]) -> str:
    """One seed-style table per case, each under a `### <case>` heading, rows in input order."""
    by_case: dict[str, list[RunRecord]] = {}
    for record in records:
        by_case.setdefault(record.case, []).append(record)
    return "\n".join(_case_table(case, runs) for case, runs in by_case.items())


# Node counts as the seeds write them ("单机", "两机"); past ten, plain digits ("16机").
_CN_NUMERALS = dict(enumerate("单两三四五六七八九十", start=1))


def config_label(chip: str, nnodes: int, nproc_per_node: int) -> str:
    """The seeds' row label: A100单机单卡（1x1）, A100单机8卡（1x8）, A100两机8卡（2x8）."""
    nodes = _CN_NUMERALS.get(nnodes, str(nnodes))
    devices = "单卡" if nproc_per_node == 1 else f"{nproc_per_node}卡"
    return f"{chip}{nodes}机{devices}（{nnodes}x{nproc_per_node}）"


def format_fix_hp(
    fix_hp: dict[str, Any], short_names: dict[str, str], exclude: Sequence[str] = ()
) -> str:
    """'bs=96,lr=0.00015' (seed 001 style), '/' when nothing was overridden."""
    parts = [
        f"{short_names.get(key, key)}={_hp_value(value)}"
        for key, value in fix_hp.items()
        if key not in exclude
    ]
    return ",".join(parts) or "/"


def _hp_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float | str):
        return str(value)  # floats keep Python's shortest form: 0.00015, 1e-05 (seed 000)
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _case_table(case: str, runs: list[RunRecord]) -> str:
    columns = _merged_columns(runs)
    # A failed/aborted run keeps its partial numbers, so the table must say it did not pass.
    show_status = any(r.status != "passed" for r in runs)
    header = ["配置", *(_header(spec) for spec in columns), *(["status"] if show_status else [])]
    lines = [f"### {case}", "", _md_row(header), _md_row(["---"] * len(header))]
    keys = {_column_key(spec) for spec in columns}
    for run in runs:
        cells = [config_label(run.chip, run.nnodes or 1, run.nproc_per_node or 1)]
        cells += [_cell(run, _column_key(spec), keys) for spec in columns]
        if show_status:
            cells.append(_status_cell(run))
        lines.append(_md_row(cells))
    return "\n".join(lines) + "\n"


def _merged_columns(runs: list[RunRecord]) -> list[str]:
    merged: list[str] = []
    for run in runs:
        merged += [spec for spec in run.columns if spec not in merged]
    return merged


def _header(spec: str) -> str:
    return spec if _QUALIFIED.match(spec) else _HEADERS.get(spec, spec)


def _md_row(cells: list[str]) -> str:
    return "| " + " | ".join(_md_escape(cell) for cell in cells) + " |"


def _md_escape(cell: str) -> str:
    # A pipe or a line break inside a cell would split the row.
    return " ".join(cell.split("\n")).replace("|", "\\|")


def _cell(run: RunRecord, key: str, table_keys: set[str]) -> str:
    if key == "precision":
        return run.precision or "/"
    if key == "fix_hp":
        # Precision has its own column where the table has one (seed 001); otherwise it is
        # an override like any other (seed 003: "数据精度=fp16, local_batchsize=4").
        exclude = ("precision",) if "precision" in table_keys else ()
        return format_fix_hp(run.fix_hp, run.short_names, exclude)
    if key == "mem":
        used, total = run.metrics["mem_used_gib"], run.metrics["mem_total_gib"]
        return "/" if used is None or total is None else f"{used:.1f}/{total:.1f}"
    value = run.metrics[key]
    return "/" if value is None else _METRIC_FORMATS.get(key, _one_decimal)(value)


def _one_decimal(value: float) -> str:
    return f"{value:.1f}"


def _loss(value: float) -> str:
    # Up to 4 decimals as in the seeds ("3.0075", "1.64"), trailing zeros dropped.
    text = f"{value:.4f}".rstrip("0")
    return text + "0" if text.endswith(".") else text


def _tokens(value: float) -> str:
    # Seeds print whole tokens/s ("2788"); tiny CPU runs would lose everything to rounding.
    return f"{value:.0f}" if abs(value) >= 100 else f"{value:.1f}"


_METRIC_FORMATS = {
    "acc": lambda v: f"{v:.3f}",
    "loss": _loss,
    "tokens_per_s_per_device": _tokens,
    "mfu": lambda v: f"{v * 100:.1f}%",  # stored as a fraction of peak, shown as percent
}


def _status_cell(run: RunRecord) -> str:
    if run.status == "passed" or not run.error:
        return run.status
    error = run.error if len(run.error) <= 80 else run.error[:79] + "…"
    return f"{run.status}: {error}"


def render(records: Iterable[RunRecord], fmt: str) -> str:
    """The records in one of FORMATS: md (the seeds' tables), csv or json."""
    return {"md": to_markdown, "csv": to_csv, "json": to_json}[fmt](records)


FORMATS = ("md", "csv", "json")
