"""A qualification's verdicts in the results store (the qualifications table, schema v11:
tui/results/storedb.py), and a host's history of them. The runs themselves are the
store's records as any batch's, found by the batch ids kept beside the verdicts."""

from __future__ import annotations

import json
import secrets
from typing import Any

import sqlalchemy as sa

from tui.core.errors import StoreError
from tui.qualify.output import Result
from tui.results.storedb import Target, open_engine, qualifications, reason


def save(store_at: str, started: str, result: Result) -> str:
    """Keep ``result``'s verdicts; its qualification id."""
    qid = f"{started.replace(':', '').replace('-', '')}-qualify-{secrets.token_hex(4)}"
    rows = [
        {
            "qualification_id": qid,
            "host": v.host,
            "device": "" if v.device is None else str(v.device),
            "metric": v.metric,
            "started": started,
            "grp": result.group,
            "n": v.n,
            "median": v.median,
            "lo": v.lo,
            "hi": v.hi,
            "peer_median": v.peer_median,
            "ratio": v.ratio,
            "verdict": v.verdict,
            "reason": v.reason,
            "batch_ids": json.dumps(result.batch_ids),
        }
        for v in result.verdicts
    ]
    if rows:
        _write(store_at, lambda conn: conn.execute(sa.insert(qualifications), rows))
    return qid


def history(store_at: str, host: str) -> list[dict[str, Any]]:
    """Every verdict kept of ``host``, oldest qualification first."""
    query = (
        sa.select(qualifications)
        .where(qualifications.c.host == host)
        .order_by(qualifications.c.started, qualifications.c.metric, qualifications.c.device)
    )
    found: list[dict[str, Any]] = []
    _write(store_at, lambda conn: found.extend(dict(row._mapping) for row in conn.execute(query)))
    for entry in found:
        entry["batch_ids"] = json.loads(entry["batch_ids"])
    return found


def _write(store_at: str, work: Any) -> None:
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
