"""The record's Slurm job: kept by the store, and a version 4 store gains the column."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from seed_records import store_at_version

from tui.results.store import SCHEMA_VERSION, ResultStore

JOB = {"job_id": "42", "partition": "debug", "nodes": ["node1", "node2"], "state": "COMPLETED"}


def test_a_version_4_store_gains_the_slurm_job(tmp_path: Path) -> None:
    path, first, second = store_at_version(tmp_path, "slurm", 4)
    with ResultStore(path) as store:
        assert store.get(first.run_id) == first and first.slurm is None
        store.add(second.model_copy(update={"executor": "slurm", "slurm": JOB}))
        got = store.get(second.run_id)
        assert got.executor == "slurm" and got.slurm == JOB
        assert got.to_json_dict()["slurm"] == JOB
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    conn.close()
