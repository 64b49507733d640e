"""The results store: one row per run, one row per known metric value, in a SQLite file
(the default, nothing to set up) or a PostgreSQL database several controllers share.

SQLite: WAL and IMMEDIATE write transactions let several controllers (the app, cron
batches) write one file at once: writers wait for each other instead of failing late.
PostgreSQL: one run's replacement is a conditional upsert, so two controllers never
overwrite each other's run. docs/store.md. Controller code: no torch, no textual.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from functools import cache
from pathlib import Path
from typing import Any, NamedTuple, Self

import sqlalchemy as sa
from pydantic import ValidationError

from tui.core.errors import StoreError
from tui.core.term import printable
from tui.results.record import RunRecord
from tui.results.rows import COLUMNS as ROW_COLUMNS
from tui.results.rows import RunRow, run_row
from tui.results.storedb import SCHEMA_VERSION, Target, metrics, open_engine, reason, runs

__all__ = ["SCHEMA_VERSION", "MetricPoint", "ResultStore", "StoreError"]

RESOLVE_SHOWN = 5  # an ambiguous run id: the matches named in the refusal
REASON_CHARS = 200  # an unreadable row's reason, as shown
RECORDS_AT_ONCE = 10_000  # ResultStore.records: the ids one query names
# Unreadable rows, said once a process: on stderr where no front end took the logger
# (logging's last resort prints the message alone), in the app wherever it sends logs.
_LOG = logging.getLogger(__name__)
_SHOWN: set[str] = set()

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
    "executor_detail",
    "verdict",
    "peak",
    "monitoring",
    "rank_times",
    "points",
)

_COLUMNS = tuple(_COLUMN.get(f, f) for f in _RUN_FIELDS)


@cache
def _upsert(dialect: str) -> sa.Insert:
    """Insert a run, or replace it where the controller is the same; returns its run_id
    (no row: the run is another controller's). Built once: building costs more than running.
    The dialect's module imported here: a SQLite store's run never loads PostgreSQL's."""
    if dialect == "sqlite":
        from sqlalchemy.dialects.sqlite import insert
    else:
        from sqlalchemy.dialects.postgresql import insert
    statement = insert(runs)
    return statement.on_conflict_do_update(
        index_elements=[runs.c.run_id],
        set_={name: statement.excluded[name] for name in _COLUMNS if name != "run_id"},
        where=runs.c.controller.is_not_distinct_from(statement.excluded.controller),
    ).returning(runs.c.run_id)


class MetricPoint(NamedTuple):
    """One known value of one metric in one run, for history views."""

    run_id: str
    case: str
    config: str
    status: str
    started: str
    value: float


class ResultStore:
    """Run records in one database, safe to share between threads and processes.
    ``where``: a SQLite file's path, ``sqlite:///PATH`` or ``postgresql://...``."""

    def __init__(self, where: str | Path) -> None:
        self._target = Target(where)
        self._engine = open_engine(self._target)

    @property
    def path(self) -> Path | None:
        """The SQLite file; None for PostgreSQL (``where`` names either)."""
        return self._target.path

    @property
    def where(self) -> str:
        """The store for messages: the file, or the URL with its password masked."""
        return self._target.shown

    def __repr__(self) -> str:
        return f"ResultStore({self.where!r})"

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        self._engine.dispose()

    @contextmanager
    def _transaction(self, write: bool = True) -> Iterator[sa.Connection]:
        # Reads: one snapshot, so a run and its metrics come from the same commit (SQLite's
        # read transaction; PostgreSQL's repeatable read). A lost connection: StoreError.
        try:
            with self._engine.connect() as conn:
                if write:
                    conn.execution_options(fleetperf_write=True)
                elif not self._target.sqlite:
                    conn.execution_options(isolation_level="REPEATABLE READ")
                with conn.begin():
                    yield conn
        except sa.exc.OperationalError as exc:
            raise StoreError(f"{self.where}: {reason(exc, self._target)}") from None

    def add(self, record: RunRecord) -> None:
        """Insert, or replace the run with the same run_id (its metrics too), atomically.
        Only the controller that created a run replaces it: StoreError for another's."""
        upsert = _upsert("sqlite" if self._target.sqlite else "postgresql")
        values = [
            {"run_id": record.run_id, "name": name, "value": value}
            for name, value in record.metrics.items()
            if value is not None
        ]
        with self._transaction() as conn:
            if conn.execute(upsert, _run_row(record)).first() is None:  # another's run
                owner = conn.execute(
                    sa.select(runs.c.controller).where(runs.c.run_id == record.run_id)
                ).scalar_one()
                raise StoreError(
                    f"{self.where}: run {record.run_id} belongs to another controller"
                    f" ({owner}); not replaced"
                )
            conn.execute(sa.delete(metrics).where(metrics.c.run_id == record.run_id))
            if values:
                conn.execute(sa.insert(metrics), values)

    def get(self, run_id: str) -> RunRecord | None:
        found = self._read(sa.select(runs).where(runs.c.run_id == run_id))
        return found[0] if found else None

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
        query = (
            sa.select(runs)
            .where(*_filters(case=case, batch_id=batch_id, status=status))
            .order_by(runs.c.started.desc(), runs.c.run_id.desc())
            .limit(limit)
        )
        return self._read(query)[::-1]

    def rows(self, limit: int | None = None) -> list[RunRow]:
        """Every run as a list shows it (RunRow: no RunRecord validated), oldest first;
        with limit, the newest ``limit``. An unreadable row is skipped, as list skips it."""
        query = (
            sa.select(*(runs.c[name] for name in ROW_COLUMNS))
            .order_by(runs.c.started.desc(), runs.c.run_id.desc())
            .limit(limit)
        )
        values = sa.select(metrics.c.run_id, metrics.c.name, metrics.c.value)
        with self._transaction(write=False) as conn:
            found = conn.execute(query).mappings().all()
            if limit is not None:  # the page's runs' metrics (the whole store: every one),
                # by their ids: the page's query again as a subquery sorts the runs again
                values = values.where(metrics.c.run_id.in_([r["run_id"] for r in found]))
            known: dict[str, dict[str, float]] = {}
            for run_id, name, value in conn.execute(values):
                known.setdefault(run_id, {})[name] = value
        out: list[RunRow] = []
        parsed: dict[Any, Any] = {}
        for row in reversed(found):
            try:
                out.append(run_row(row, known.get(row["run_id"], {}), parsed))
            except (ValueError, TypeError, AttributeError, KeyError, RecursionError) as exc:
                _unreadable(str(row["run_id"]), exc)
        return out

    def records(self, run_ids: Iterable[str]) -> list[RunRecord]:
        """The runs with these ids (those still stored and readable), oldest first; read
        RECORDS_AT_ONCE at a time (PostgreSQL takes at most 65,535 parameters a query)."""
        ids = list(run_ids)
        found = []
        for at in range(0, len(ids), RECORDS_AT_ONCE):
            chosen = runs.c.run_id.in_(ids[at : at + RECORDS_AT_ONCE])
            found += self._read(sa.select(runs).where(chosen))
        return sorted(found, key=lambda r: (r.started, r.run_id))

    def _read(self, query: sa.Select[Any]) -> list[RunRecord]:
        """The runs ``query`` selects, in its order, with their metrics (one snapshot)."""
        chosen = query.with_only_columns(runs.c.run_id).scalar_subquery()
        with self._transaction(write=False) as conn:
            rows = conn.execute(query).mappings().all()
            known: dict[str, dict[str, float]] = {}
            for run_id, name, value in conn.execute(
                sa.select(metrics.c.run_id, metrics.c.name, metrics.c.value)
                .where(metrics.c.run_id.in_(chosen))
                .order_by(metrics.c.run_id, metrics.c.name)
            ):
                known.setdefault(run_id, {})[name] = value
        records = []
        for row in rows:
            try:
                records.append(_record(row, known.get(row["run_id"], {})))
            except (ValueError, TypeError, RecursionError) as exc:  # ValidationError: too
                _unreadable(str(row["run_id"]), exc)
        return records

    def resolve(self, text: str) -> str:
        """The run id ``text`` names: the whole id, a unique prefix of it, or a unique
        prefix of its random tail (the short form the tables show). StoreError naming the
        matches when several fit, or saying there is no such run."""
        with self._transaction(write=False) as conn:
            ids = list(conn.execute(sa.select(runs.c.run_id).order_by(runs.c.run_id)).scalars())
        return resolve_id(ids, text, self.where)

    def interrupt(self, record: RunRecord, error: str) -> bool:
        """Mark a run 'interrupted' if it is still 'running' under the same controller."""
        update = (
            sa.update(runs)
            .where(
                runs.c.run_id == record.run_id,
                runs.c.status == "running",
                runs.c.controller.is_not_distinct_from(record.controller),
            )
            .values(status="interrupted", error=error)
        )
        with self._transaction() as conn:
            return conn.execute(update).rowcount > 0

    def delete(self, run_id: str) -> bool:
        """Remove one run and its metrics; False if there was none."""
        with self._transaction() as conn:
            return conn.execute(sa.delete(runs).where(runs.c.run_id == run_id)).rowcount > 0

    def metric_history(
        self, metric: str, case: str | None = None, config: str | None = None
    ) -> list[MetricPoint]:
        """Known values of one metric across runs, oldest first (all statuses: filter them)."""
        query = (
            sa.select(
                runs.c.run_id,
                runs.c.case_name,
                runs.c.config,
                runs.c.status,
                runs.c.started,
                metrics.c.value,
            )
            .join_from(metrics, runs, metrics.c.run_id == runs.c.run_id)
            .where(metrics.c.name == metric, *_filters(case=case, config=config))
            .order_by(runs.c.started, runs.c.run_id)
        )
        with self._transaction(write=False) as conn:
            return [MetricPoint(*row) for row in conn.execute(query)]


def _record(row: Any, metric_values: dict[str, float]) -> RunRecord:
    fields: dict[str, Any] = {}
    for name in _RUN_FIELDS:
        value = row[_COLUMN.get(name, name)]
        try:
            fields[name] = json.loads(value) if name in _JSON_FIELDS else value
        except json.JSONDecodeError as exc:
            raise ValueError(f"{name}: not JSON ({exc.msg})") from None
    fields["cleaned"] = bool(fields["cleaned"])
    fields["smoke"] = bool(fields["smoke"])
    if fields["synthetic_data"] is not None:
        fields["synthetic_data"] = bool(fields["synthetic_data"])
    return RunRecord(**fields, metrics=metric_values)


def _unreadable(run_id: str, exc: Exception) -> None:
    """A row this version cannot read (another controller's, a newer fleetperf's, or
    written by hand) is skipped: shown once, never a stop (docs/store.md)."""
    if run_id in _SHOWN:
        return
    _SHOWN.add(run_id)
    if isinstance(exc, ValidationError):
        first = exc.errors()[0]
        msg = first["msg"].removeprefix("Value error, ")  # pydantic's words for a ValueError
        why = f"{'.'.join(str(p) for p in first['loc']) or 'record'}: {msg}"
    else:
        why = str(exc) or type(exc).__name__
    why = " ".join(why.split())[:REASON_CHARS]
    _LOG.warning(printable(f"fleetperf: run {run_id[:REASON_CHARS]}: unreadable record ({why})"))


def _run_row(record: RunRecord) -> dict[str, Any]:
    data = record.model_dump(mode="json", exclude={"metrics"})
    row = {}
    for name in _RUN_FIELDS:
        value = data[name]
        if name in _JSON_FIELDS:
            value = json.dumps(value, ensure_ascii=False)
        elif isinstance(value, bool):  # INTEGER 0/1 on both backends
            value = int(value)
        row[_COLUMN.get(name, name)] = value
    return row


def resolve_id(ids: list[str], text: str, where: str) -> str:
    """The one of ``ids`` (sorted) that ``text`` names, as ResultStore.resolve says; ``where``
    names the store(s) in the refusal."""
    if text in ids:
        return text
    matches = [i for i in ids if text and (i.startswith(text) or _tail(i).startswith(text))]
    if len(matches) == 1:
        return matches[0]
    if not matches:
        raise StoreError(f"no run {text!r} in {where}")
    shown = ", ".join(matches[:RESOLVE_SHOWN])
    more = f" and {len(matches) - RESOLVE_SHOWN} more" if len(matches) > RESOLVE_SHOWN else ""
    raise StoreError(
        f"run {text!r} is ambiguous: {len(matches)} runs match ({shown}{more}); give more of the id"
    )


def _tail(run_id: str) -> str:
    """The random tail of STAMP-CASE-TOKEN (new_run_id, tui/executors/base.py), which
    tables shorten."""
    return run_id.rsplit("-", 1)[-1]


def _filters(**equals: str | None) -> list[sa.ColumnElement[bool]]:
    """Conditions on runs for the filters that are set."""
    return [runs.c[_COLUMN.get(k, k)] == v for k, v in equals.items() if v is not None]
