"""ResultStore.rows: each run as the Results screen lists it, read from the columns without
a RunRecord, on SQLite and on a throwaway PostgreSQL (tests/pgcluster.py); what a row says
is what the run's record says."""

from __future__ import annotations

import logging
import sqlite3
from pathlib import Path

import pytest
import sqlalchemy as sa
from pgcluster import pg, pg_template  # noqa: F401 (fixtures)
from seed_records import distilbert, seed001_records
from test_store import where  # noqa: F401 (fixture: each backend)

from tui.results import store as store_module
from tui.results.record import RunRecord
from tui.results.references import busy, comparable_key
from tui.results.store import ResultStore
from tui.results.storedb import runs
from tui.results.tables import capped
from tui.results.verdict import Check, Verdict


def _records() -> list[RunRecord]:
    """The seed 001 runs, and runs a row must tell apart: flagged, smoke, on a loaded host,
    failed without metrics, running, with monitoring, <markup> in its config's name."""
    flag = Check(
        metric="p_whole", value=1.0, low=2.0, high=None, source="history", basis="b", flagged=True
    )
    calm = flag.model_copy(update={"metric": "acc", "flagged": False})
    verdict = Verdict(checks=[flag, calm], notes=["n"])
    numbers = (300, 1700.0, 1800.0, 1900.0, 0.91, 13.0)
    extra = [
        distilbert("f1", "A100x1x8", {}, numbers, verdict=verdict, started="2026-11-22T10:00:00Z"),
        distilbert("s1", "A100x1x8", {"max_samples": 800}, numbers, smoke=True),
        distilbert("l1", "A100x1x8", {}, numbers, load_per_cpu=0.9, synthetic_data=True),
        distilbert("m1", "A100x1x8", {}, numbers, monitoring={"busy": "cpu 80 %"}),
        distilbert("x1", "[b]A100x1x8", {}, numbers, status="failed", metrics={}),
        distilbert("u1", "A100x1x8", {}, numbers, status="running", finished=None),
    ]
    return [*seed001_records(), *extra]


def test_rows_say_what_each_runs_record_says(where: str) -> None:  # noqa: F811
    with ResultStore(where) as store:
        for record in _records():
            store.add(record)
        records = store.list()
        rows = store.rows()
        assert [r.run_id for r in rows] == [r.run_id for r in records]  # oldest first
        for row, record in zip(rows, records, strict=True):
            assert (row.case, row.vendor, row.config) == (record.case, record.vendor, record.config)
            assert (row.status, row.started, row.smoke) == (
                record.status,
                record.started,
                record.smoke,
            )
            known = {k: v for k, v in record.metrics.items() if v is not None}
            assert row.metrics == known
            flagged = tuple(c.metric for c in record.verdict.flagged) if record.verdict else ()
            assert row.flagged == flagged
            assert row.capped == capped(record)
            assert row.key == comparable_key(record)
            assert busy(row) == busy(record)  # type: ignore[arg-type]
        by_id = {r.run_id: r for r in rows}
        assert by_id["f1"].flagged == ("p_whole",)
        assert by_id["s1"].capped and by_id["s1"].smoke
        assert busy(by_id["l1"]) and busy(by_id["m1"])  # type: ignore[arg-type]
        newest = store.rows(limit=3)
        assert [r.run_id for r in newest] == [r.run_id for r in records[-3:]]
        assert newest == rows[-3:]
        assert store.rows(limit=0) == []
        wanted = [records[-1].run_id, records[0].run_id, "no-such-run"]
        assert store.records(wanted) == [records[0], records[-1]]  # oldest first
        # An export of every shown run: more ids than PostgreSQL takes in one query.
        many = [f"gone-{i}" for i in range(70_000)] + wanted
        assert store.records(many) == [records[0], records[-1]]


def test_an_unreadable_row_is_skipped_as_list_skips_it(
    where: str,  # noqa: F811
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(store_module, "_SHOWN", set())  # said once a process: said here
    with ResultStore(where) as store:
        for record in seed001_records()[:3]:
            store.add(record)
    engine = sa.create_engine(where if "://" in where else f"sqlite:///{where}")
    with engine.begin() as conn:  # another program's rows, written by hand
        conn.execute(sa.update(runs).where(runs.c.run_id == "r1").values(hp="[1, 2]"))
        conn.execute(sa.update(runs).where(runs.c.run_id == "r2").values(verdict='{"checks": true'))
    engine.dispose()
    caplog.set_level(logging.WARNING)
    with ResultStore(where) as store:
        assert [r.run_id for r in store.rows()] == ["r3"]
        assert [r.run_id for r in store.list()] == ["r3"]
    said = [r.getMessage() for r in caplog.records]
    assert any("run r1: unreadable record" in m for m in said), said
    assert any("run r2: unreadable record" in m for m in said), said


def test_the_newest_page_is_read_by_the_started_index(tmp_path: Path) -> None:
    """rows(limit)'s query walks runs_by_started from its newest end: no sort of the whole
    runs table (10,000 runs: 55 ms) before the Results screen's first page."""
    path = tmp_path / "fleetperf.sqlite"
    with ResultStore(path) as store:
        for record in _records():
            store.add(record)
        statements: list[tuple[str, object]] = []
        sa.event.listen(
            store._engine,
            "before_cursor_execute",
            lambda _c, _cur, sql, params, _ctx, _many: statements.append((sql, params)),
        )
        store.rows(limit=2)
    ((sql, params),) = [(q, p) for q, p in statements if "ORDER BY" in q]  # the page's runs
    conn = sqlite3.connect(path)
    try:
        plan = " ".join(row[-1] for row in conn.execute(f"EXPLAIN QUERY PLAN {sql}", params))
    finally:
        conn.close()
    assert "runs_by_started" in plan, plan
    assert "TEMP B-TREE" not in plan, plan
