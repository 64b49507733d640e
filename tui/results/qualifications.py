"""The qualifications table of the results store (schema v11, tui/results/storedb.py):
the verdicts each ``fleetperf qualify`` kept, read back for a host's history and for the
report. SQLAlchemy loads with this module, which only store paths import."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from typing import Any

import sqlalchemy as sa

from tui.core.errors import StoreError
from tui.results.storedb import Target, open_engine, qualifications, reason


def save(rows: Iterable[dict[str, Any]], store_at: str) -> None:
    """Keep one qualification's verdict rows (their batch_ids a list of ids)."""
    rows = [{**row, "batch_ids": json.dumps(row["batch_ids"])} for row in rows]
    if rows:
        _in_store(store_at, lambda conn: conn.execute(sa.insert(qualifications), rows))


def history(store_at: str, host: str) -> list[dict[str, Any]]:
    """Every verdict kept of ``host``, oldest qualification first."""
    return _rows(
        store_at,
        qualifications.c.host == host,
        (qualifications.c.started, qualifications.c.metric, qualifications.c.device),
    )


def latest(store_at: str) -> list[dict[str, Any]]:
    """The verdict rows of the store's newest qualification (none: [])."""
    newest = sa.select(sa.func.max(qualifications.c.started)).scalar_subquery()
    return _rows(
        store_at,
        qualifications.c.started == newest,
        (qualifications.c.metric, qualifications.c.host, qualifications.c.device),
    )


def _rows(store_at: str, where: Any, order: tuple[Any, ...]) -> list[dict[str, Any]]:
    query = sa.select(qualifications).where(where).order_by(*order)
    found: list[dict[str, Any]] = []
    _in_store(store_at, lambda conn: found.extend(dict(r._mapping) for r in conn.execute(query)))
    for row in found:  # a row another controller wrote: its ids are data, checked
        row["batch_ids"] = _ids(row["batch_ids"])
    return found


def _ids(text: Any) -> list[str]:
    try:
        ids = json.loads(text)
    except (TypeError, ValueError, RecursionError):
        return []
    return [i for i in ids if isinstance(i, str)] if isinstance(ids, list) else []


def _in_store(store_at: str, work: Callable[[sa.Connection], Any]) -> None:
    target = Target(store_at)
    engine = open_engine(target)
    try:
        with engine.connect() as conn:
            conn.execution_options(fleetperf_write=True)
            with conn.begin():
                work(conn)
    except sa.exc.DBAPIError as exc:
        raise StoreError(f"{target.shown}: {reason(exc, target)}") from None
    finally:
        engine.dispose()
