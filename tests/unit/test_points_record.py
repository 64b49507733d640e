"""A sweep's points (issue 43: llm-serving's loads) from the result line to the record and
the store, and Alembic's v13 adding runs.points to a store at v12."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from seed_records import seed001_records

from tui.core.events import CaseResult, parse
from tui.results.store import ResultStore
from tui.results.storedb import HEAD

POINTS = [
    {"hp": {"concurrency": 1}, "metrics": {"output_tokens_per_s": 50.0, "tpot_p90_ms": 20.0}},
    {"hp": {"concurrency": 2}, "metrics": {"output_tokens_per_s": 80.0, "tpot_p90_ms": None}},
]


@pytest.mark.parametrize(("given", "kept"), [(POINTS, POINTS), ("many", None), ([1], None)])
def test_a_result_line_s_points_reach_the_event_only_as_a_list_of_objects(
    given: object, kept: object
) -> None:
    line = {"kind": "result", "t": 1.0, "rank": 0, "status": "passed", "converged": True}
    ev = parse("r1", "node1", json.dumps({**line, "points": given}))
    assert isinstance(ev, CaseResult) and ev.points == kept


def test_a_record_s_points_read_back_from_the_store(tmp_path: Path) -> None:
    record = seed001_records()[0].model_copy(update={"points": POINTS})
    with ResultStore(tmp_path / "s.sqlite") as store:
        store.add(record)
        assert store.get(record.run_id).points == POINTS


def test_v13_adds_points_to_a_store_at_v12_keeping_its_runs(tmp_path: Path) -> None:
    """A store as the fleetperf before v13 left it (revision v12, no points column) opens,
    gains the column (its runs' points null) and stores a new run's points."""
    path = tmp_path / "old.sqlite"
    first, second = seed001_records()[:2]
    with ResultStore(path) as store:
        store.add(first)
    conn = sqlite3.connect(path)
    conn.executescript(
        "ALTER TABLE runs DROP COLUMN points; UPDATE alembic_version SET version_num = 'v12';"
        " ALTER TABLE runs RENAME COLUMN executor_detail TO slurm;"  # as v14 found it
    )
    conn.close()
    with ResultStore(path) as store:
        assert store.get(first.run_id).points is None
        store.add(second.model_copy(update={"points": POINTS}))
        assert store.get(second.run_id).points == POINTS
    conn = sqlite3.connect(path)
    try:
        assert conn.execute("SELECT version_num FROM alembic_version").fetchone() == (HEAD,)
    finally:
        conn.close()
