"""What a run's kind records of it (a Slurm job): kept by the store as the record's
executor_detail; a version 4 store gains the column, a v13 store's ``slurm`` column is
renamed with its values (Alembic's v14), and a record written before names it ``slurm``."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from seed_records import seed001_records, store_at_version

from tui.results.record import RunRecord
from tui.results.store import SCHEMA_VERSION, ResultStore
from tui.results.storedb import HEAD

JOB = {"job_id": "42", "partition": "debug", "nodes": ["node1", "node2"], "state": "COMPLETED"}


def test_a_version_4_store_gains_the_slurm_job(tmp_path: Path) -> None:
    path, first, second = store_at_version(tmp_path, "slurm", 4)
    with ResultStore(path) as store:
        assert store.get(first.run_id) == first and first.executor_detail is None
        store.add(second.model_copy(update={"executor": "slurm", "executor_detail": JOB}))
        got = store.get(second.run_id)
        assert got.executor == "slurm" and got.executor_detail == JOB
        assert got.to_json_dict()["executor_detail"] == JOB
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    conn.close()


def test_a_v13_stores_slurm_column_becomes_executor_detail_with_its_values(
    tmp_path: Path,
) -> None:
    path = tmp_path / "fleetperf.sqlite"
    record = seed001_records()[0].model_copy(update={"executor": "slurm", "executor_detail": JOB})
    with ResultStore(path) as store:
        store.add(record)
    conn = sqlite3.connect(path)  # as a fleetperf at Alembic's v13 left it
    conn.execute("ALTER TABLE runs RENAME COLUMN executor_detail TO slurm")
    conn.execute("UPDATE alembic_version SET version_num = 'v13'")
    conn.commit()
    conn.close()
    with ResultStore(path) as store:
        assert store.get(record.run_id) == record
    conn = sqlite3.connect(path)
    columns = {row[1] for row in conn.execute("PRAGMA table_info(runs)")}
    assert "executor_detail" in columns and "slurm" not in columns
    assert conn.execute("SELECT version_num FROM alembic_version").fetchone()[0] == HEAD
    conn.close()


def test_a_record_written_before_schema_14_names_it_slurm() -> None:
    data = seed001_records()[0].to_json_dict()
    del data["executor_detail"]
    assert RunRecord.model_validate({**data, "slurm": JOB}).executor_detail == JOB
